"""Kubernetes names for a TF Serving model (the name rules themselves are `foundation.k8s.names`).

A TF Serving model name may hold capitals, `_` and `.` and be of any length (`resnet50_imagenet`); a Kubernetes
object name may not: most kinds need a DNS-1123 subdomain, Services (and KServe InferenceServices) a DNS-1035
label, at most 63 characters. `kubernetes_name` turns a model name into one name that fits every kind:
lower-cased, every other character made `-`, and, when that changed anything or the name is too long, cut and
followed by `-<8 hex digits of the model name's SHA-256>`. The suffix keeps the name stable from run to run and
apart from every other model name's (`Resnet_50` and `resnet-50` differ). TF Serving's own model name
(models.config, `/v1/models/<name>`, the base path) stays as it is.

Example:
    kubernetes_name("resnet50_imagenet", prefix="tf-serving-")  # 'tf-serving-resnet50-imagenet-<8 hex>'
    kubernetes_name("digits", prefix="tf-serving-")             # 'tf-serving-digits' (already valid)
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from foundation.k8s.names import MAX_INFERENCE_SERVICE_NAME, MAX_LABEL_LENGTH

_HASH_LENGTH = 8


def kubernetes_name(model_name: str, prefix: str = "", suffix: str = "", max_length: int = MAX_LABEL_LENGTH) -> str:
    """`prefix + <model name made valid> + suffix`: a DNS-1035 label (so valid for every kind) of ≤ max_length.

    Args:
        model_name: The TF Serving model name, any characters and length.
        prefix: Fixed start, e.g. `tf-serving-`; empty or a letter first and `-` last.
        suffix: Fixed end, e.g. `-config`; empty or `-` first and a letter or digit last.
        max_length: The longest name allowed (63 for a label; less where a controller appends to it).

    Returns:
        The name; `prefix + model_name + suffix` itself when that is already valid.

    Raises:
        ValueError: a prefix or suffix that cannot form a valid name, or one that leaves no room.
    """
    if prefix and not re.fullmatch(r"[a-z][-a-z0-9]*-", prefix):
        raise ValueError(f"prefix {prefix!r} must start with a lower-case letter and end with '-'")
    if suffix and not re.fullmatch(r"-[-a-z0-9]*[a-z0-9]", suffix):
        raise ValueError(f"suffix {suffix!r} must start with '-' and end with a lower-case letter or digit")
    body = re.sub(r"[^a-z0-9-]+", "-", model_name.lower()).strip("-")
    # Without a prefix the name must still start with a letter (DNS-1035).
    head = prefix or ("" if body[:1].isalpha() else "m-")
    if head == prefix and body == model_name and len(prefix + body + suffix) <= max_length:
        return prefix + body + suffix
    digest = hashlib.sha256(model_name.encode()).hexdigest()[:_HASH_LENGTH]
    room = max_length - len(head) - len(suffix) - len(digest) - 1
    if room < 0:
        raise ValueError(f"{prefix!r} + {suffix!r} leaves no room for a name within {max_length} characters")
    body = body[:room].rstrip("-")
    return head + (f"{body}-{digest}" if body else digest) + suffix


@dataclass(frozen=True)
class ServingNames:
    """The Kubernetes names of one served model's objects.

    Attributes:
        app: The Deployment, Service, HPA, PodDisruptionBudget and NetworkPolicy, and their `app` label.
        config_map: The ConfigMap with models.config and the other TF Serving config files.
        pvc: The default PersistentVolumeClaim with the models (`serving.model_pvc` replaces it).
        inference_service: The KServe InferenceService (shorter: KServe appends to it).
    """

    app: str
    config_map: str
    pvc: str
    inference_service: str


def serving_names(model_name: str) -> ServingNames:
    """Every Kubernetes name the deploy assets give the objects of TF Serving model `model_name`."""
    return ServingNames(
        app=kubernetes_name(model_name, prefix="tf-serving-"),
        config_map=kubernetes_name(model_name, prefix="tf-serving-", suffix="-config"),
        pvc=kubernetes_name(model_name, suffix="-models"),
        inference_service=kubernetes_name(model_name, max_length=MAX_INFERENCE_SERVICE_NAME),
    )


def track_name(model_name: str, track: str) -> str:
    """The Deployment, Service, HPA and PodDisruptionBudget of one rollout track (`stable`, `canary`):
    `tf-serving-<model>-<track>`, made valid as `kubernetes_name` does."""
    return kubernetes_name(model_name, prefix="tf-serving-", suffix=f"-{track}")


def revision_config_name(model_name: str, content: str) -> str:
    """A ConfigMap named after its content (`tf-serving-<model>-config-<8 hex of its SHA-256>`): a new model
    version is a new ConfigMap, so the pods of the previous revision keep reading theirs."""
    digest = hashlib.sha256(content.encode()).hexdigest()[:_HASH_LENGTH]
    return kubernetes_name(model_name, prefix="tf-serving-", suffix=f"-config-{digest}")
