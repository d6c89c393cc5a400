"""Kubernetes names for a TF Serving model, and the name rules of the objects the deploy assets create.

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
    name_problem("Service", "tf-serving-resnet50_imagenet")     # "... is not a DNS-1035 label ..."
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*"
MAX_LABEL_LENGTH = 63
# KServe names the predictor's Service `<name>-predictor` and Knative its revisions `<name>-predictor-00001`,
# each a DNS-1035 label of at most 63 characters.
MAX_INFERENCE_SERVICE_NAME = MAX_LABEL_LENGTH - len("-predictor-00001")
_HASH_LENGTH = 8
# A label key is `[prefix/]name`; the prefix a DNS-1123 subdomain, the name and the value (may be empty)
# alphanumeric at both ends with `-`, `_`, `.` between, at most 63 characters each.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_ENTRY = re.compile(rf"^(?:(?P<prefix>{DNS1123_SUBDOMAIN})/)?(?P<name>{_LABEL_NAME})=(?P<value>{_LABEL_NAME})?$")


@dataclass(frozen=True)
class NameRule:
    """What the API server accepts as `metadata.name` of one kind."""

    pattern: str
    max_length: int
    format: str


_SUBDOMAIN = NameRule(DNS1123_SUBDOMAIN, 253, "a DNS-1123 subdomain")
NAME_RULES: dict[str, NameRule] = {
    "Namespace": NameRule(DNS1123_LABEL, MAX_LABEL_LENGTH, "a DNS-1123 label"),
    "Service": NameRule(DNS1035_LABEL, MAX_LABEL_LENGTH, "a DNS-1035 label"),
    "InferenceService": NameRule(DNS1035_LABEL, MAX_INFERENCE_SERVICE_NAME, "a DNS-1035 label (KServe)"),
    **{
        kind: _SUBDOMAIN
        for kind in (
            "ConfigMap",
            "Deployment",
            "HorizontalPodAutoscaler",
            "NetworkPolicy",
            "PersistentVolumeClaim",
            "Pod",
            "PodDisruptionBudget",
        )
    },
}


def name_problem(kind: str, name: str) -> str | None:
    """Why the API server would refuse `name` for an object of `kind`, or None when it accepts it.

    Raises:
        KeyError: a kind without a rule here (add it to NAME_RULES).
    """
    rule = NAME_RULES[kind]
    if len(name) > rule.max_length or not re.fullmatch(rule.pattern, name):
        return (
            f"{kind} name {name!r} is not {rule.format} of at most {rule.max_length} characters "
            "(lower-case letters, digits and '-')"
        )
    return None


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


def check_namespace(value: str) -> str:
    """`value` if it is a valid namespace name (a pydantic validator for config keys).

    Raises:
        ValueError: not a DNS-1123 label of at most 63 characters.
    """
    if name_problem("Namespace", value):
        raise ValueError("not a Kubernetes namespace name: lower-case letters, digits and '-', at most 63, e.g. `ml`")
    return value


def check_claim_name(value: str) -> str:
    """`value` if it is empty or a valid PersistentVolumeClaim name (a pydantic validator for config keys).

    Raises:
        ValueError: not a DNS-1123 subdomain.
    """
    if value and name_problem("PersistentVolumeClaim", value):
        raise ValueError("not a PersistentVolumeClaim name: lower-case letters, digits, '-' and '.', e.g. `models`")
    return value


def parse_label(entry: str) -> tuple[str, str]:
    """`key=value` → (key, value) for a Kubernetes label selector.

    Raises:
        ValueError: not `key=value`, or a key or value Kubernetes does not accept as a label.
    """
    match = _LABEL_ENTRY.fullmatch(entry)
    if not match or len(match["prefix"] or "") > 253:
        raise ValueError(
            f"{entry!r} is not a Kubernetes label `key=value` (key `name` or `prefix/name`; name and value up to 63 "
            "letters, digits, '-', '_' or '.'), e.g. `app.kubernetes.io/name=frontend`"
        )
    key, _, value = entry.partition("=")
    return key, value


def check_label(value: str) -> str:
    """`value` if `parse_label` accepts it (a pydantic validator for config keys)."""
    parse_label(value)
    return value
