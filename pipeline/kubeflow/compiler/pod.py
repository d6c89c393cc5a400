"""What a component's pod asks of Kubernetes, as plain values checked with Kubernetes' own syntax.

Node labels (`key=value`), tolerations (kubectl's taint syntax), pod labels and annotations are parsed here,
quantities (`8`, `500m`, `32Gi`), names and image references with the rules of `foundation.k8s`, so a typo in
the config fails `tfxp compile` with the expected form instead of failing the pod.

Example:
    Resources(cpu="8", memory="32G", accelerator=Accelerator(type="nvidia.com/gpu", count=8))
    parse_toleration("nvidia.com/gpu:NoSchedule")  # Toleration(key="nvidia.com/gpu", effect="NoSchedule")
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from foundation.k8s import quantity as quantity_module
from foundation.k8s.image import check_image
from foundation.k8s.image import parse_image as parse_image_reference
from foundation.k8s.names import label_key_problem, label_value_problem

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class Accelerator:
    """Attributes:
    type: The accelerator's Kubernetes resource name on open-source KFP, e.g. `nvidia.com/gpu`.
    count: Accelerators per pod.
    """

    type: str
    count: int


@dataclass(frozen=True)
class Resources:
    """Requests of one pod; requests equal limits (Guaranteed QoS, so a busy node cannot starve training).

    Attributes:
        cpu: Kubernetes CPU quantity, e.g. `8` or `500m`.
        memory: Kubernetes memory quantity, e.g. `32G` or `512Mi`.
        accelerator: Accelerators, or None.
    """

    cpu: str
    memory: str
    accelerator: Accelerator | None = None


@dataclass(frozen=True)
class Toleration:
    """A Kubernetes toleration; `value` empty means operator `Exists`."""

    key: str
    effect: str
    value: str = ""

    def to_dict(self) -> dict[str, str]:
        entry = {"key": self.key, "operator": "Equal" if self.value else "Exists", "effect": self.effect}
        if self.value:
            entry["value"] = self.value
        return entry


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity (`8`, `0.5`, `500m`) in cores (`foundation.k8s.quantity`).

    Raises:
        ValueError: not a CPU quantity above 0.
    """
    return float(quantity_module.cpu_cores(quantity))


def memory_gigabytes(quantity: str) -> float:
    """A Kubernetes memory quantity (`32G`, `512Mi`, bytes) in gigabytes (10^9 bytes), as KFP's legacy fields hold it.

    Raises:
        ValueError: not a memory quantity above 0.
    """
    return float(quantity_module.memory_bytes(quantity)) / 1e9


def parse_node_label(entry: str) -> tuple[str, str]:
    """`key=value` → (key, value), both checked with Kubernetes' label syntax (a node selector matches labels).

    Raises:
        ValueError: no `=`, a bad key, or a bad value (at most 63 letters, digits, `-`, `_`, `.`; may be empty).
    """
    key, sep, value = entry.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{entry!r} is not `key=value`, e.g. `cloud.google.com/gke-accelerator=nvidia-tesla-a100`")
    key, value = key.strip(), value.strip()
    problem = label_key_problem(key) or label_value_problem(value)
    if problem:
        raise ValueError(f"{entry!r}: {problem}")
    return key, value


def parse_toleration(entry: str) -> Toleration:
    """`key=value:Effect` or `key:Effect` (kubectl's taint syntax) → Toleration.

    Raises:
        ValueError: no effect, an unknown effect, an empty key, or a key or value without label syntax (taints
            have it).
    """
    spec, _, effect = entry.rpartition(":")
    key, _, value = spec.partition("=")
    if not key.strip() or effect not in _TAINT_EFFECTS:
        raise ValueError(
            f"{entry!r} is not `key=value:Effect` or `key:Effect` with Effect one of {', '.join(_TAINT_EFFECTS)}, "
            "e.g. `nvidia.com/gpu:NoSchedule`"
        )
    key, value = key.strip(), value.strip()
    problem = label_key_problem(key) or label_value_problem(value)
    if problem:
        raise ValueError(f"{entry!r}: {problem}")
    return Toleration(key=key, value=value, effect=effect)


def image_warnings(image: str) -> list[str]:
    """Why `image` may not be reproducible: a `latest` or missing tag pulls whatever was pushed last, and a tag
    without a digest can give stale cache hits (KFP's cache key holds the image string, not its content).

    Raises:
        ValueError: the image is no OCI image reference (`foundation.k8s.image`), e.g. empty or with a bad digest.
    """
    reference = parse_image_reference(check_image(image, key="kubeflow.image"))
    if reference.digest:
        return []
    tag = reference.tag
    if tag in ("", "latest"):
        which = "uses the" if tag else "has no tag, i.e. the"
        return [
            f"kubeflow.image {image!r} {which} `latest` tag: pods pull whatever was pushed last, so reruns and "
            "retries may run different code and KFP's cache may mix them; pin a version tag or a @sha256 digest"
        ]
    return [
        f"kubeflow.image {image!r} is pinned by tag only: KFP's cache key holds the image string, not its content, "
        "so if the tag is pushed again, cached steps are reused although the code changed; pin the digest: "
        f"`docker buildx imagetools inspect {image}` prints it, then set kubeflow.image={image.rsplit(':', 1)[0]}"
        "@sha256:<digest>"
    ]


def parse_pod_label(entry: str) -> tuple[str, str]:
    """`key=value` → (key, value), both checked with Kubernetes' label syntax.

    Raises:
        ValueError: no `=`, a bad key, or a bad value (at most 63 letters, digits, `-`, `_`, `.`; may be empty).
    """
    return parse_node_label(entry)


def parse_pod_annotation(entry: str) -> tuple[str, str]:
    """`key=value` → (key, value); the key has label syntax, the value is any text.

    Raises:
        ValueError: no `=` or a bad key.
    """
    key, sep, value = entry.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{entry!r} is not `key=value`, e.g. `team.example.com/owner=ml-platform`")
    problem = label_key_problem(key)
    if problem:
        raise ValueError(f"{entry!r}: {problem}")
    return key, value


# The API server's environment variable names before its relaxed validation (apimachinery `IsEnvVarName`, the
# C-identifier-like form every supported cluster version accepts).
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*", re.ASCII)


def parse_env_var(entry: str) -> tuple[str, str]:
    """`NAME=value` → (NAME, value) for a container's environment; the value is any text, possibly empty.

    Raises:
        ValueError: no `=`, or a name Kubernetes refuses (letters, digits, `_`, `-`, `.`, not starting with a digit).
    """
    name, sep, value = entry.partition("=")
    if not sep or not _ENV_NAME.fullmatch(name):
        raise ValueError(
            f"{entry!r} is not `NAME=value` with a name of letters, digits, `_`, `-` or `.` that does not start "
            "with a digit, e.g. `NCCL_SOCKET_IFNAME=eth0`"
        )
    return name, value


@dataclass(frozen=True)
class PodSettings:
    """What every component pod gets besides resources: image-pull secrets and metadata.

    Attributes:
        image_pull_secrets: Secrets (docker-registry type) the kubelet uses to pull the image.
        labels: Pod labels.
        annotations: Pod annotations.
    """

    image_pull_secrets: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.image_pull_secrets or self.labels or self.annotations)
