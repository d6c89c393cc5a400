"""What a component's pod asks of Kubernetes, as plain values checked with Kubernetes' own syntax.

Quantities (`8`, `500m`, `32Gi`), node labels (`key=value`), tolerations (kubectl's taint syntax), pod labels
and annotations, image-pull secret names and image digests are parsed here, so a typo in the config fails
`tfxp compile` with the expected form instead of failing the pod.

Example:
    Resources(cpu="8", memory="32G", accelerator=Accelerator(type="nvidia.com/gpu", count=8))
    parse_toleration("nvidia.com/gpu:NoSchedule")  # Toleration(key="nvidia.com/gpu", effect="NoSchedule")
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_CPU = re.compile(r"^(?P<number>[0-9]+(\.[0-9]+)?)(?P<milli>m?)$")
_MEMORY = re.compile(r"^(?P<number>[0-9]+(\.[0-9]+)?)(?P<unit>E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki)?$")
# Bytes per unit of a Kubernetes memory quantity; no unit means bytes.
_MEMORY_UNITS = {
    "": 1,
    **{unit: 1000**power for power, unit in enumerate("KMGTPE", start=1)},
    **{f"{unit}i": 1024**power for power, unit in enumerate("KMGTPE", start=1)},
}
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


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


def _parse_quantity(pattern: re.Pattern[str], quantity: str, what: str, forms: str) -> re.Match[str]:
    match = pattern.match(quantity.strip())
    if not match:
        raise ValueError(f"{quantity!r} is not a {what} quantity; use {forms}")
    return match


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity (`8`, `0.5`, `500m`) in cores.

    Raises:
        ValueError: not a CPU quantity.
    """
    match = _parse_quantity(_CPU, quantity, "CPU", "cores (`8`, `0.5`) or millicores (`500m`)")
    number = float(match["number"])
    return number / 1000 if match["milli"] else number


def memory_gigabytes(quantity: str) -> float:
    """A Kubernetes memory quantity (`32G`, `512Mi`, bytes) in gigabytes (10^9 bytes), as KFP's legacy fields hold it.

    Raises:
        ValueError: not a memory quantity.
    """
    match = _parse_quantity(_MEMORY, quantity, "memory", "e.g. `32G`, `32Gi` or `512Mi`")
    return float(match["number"]) * _MEMORY_UNITS[match["unit"] or ""] / 1e9


def parse_node_label(entry: str) -> tuple[str, str]:
    """`key=value` → (key, value).

    Raises:
        ValueError: no `=` or an empty key.
    """
    key, sep, value = entry.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{entry!r} is not `key=value`, e.g. `cloud.google.com/gke-accelerator=nvidia-tesla-a100`")
    return key.strip(), value.strip()


def parse_toleration(entry: str) -> Toleration:
    """`key=value:Effect` or `key:Effect` (kubectl's taint syntax) → Toleration.

    Raises:
        ValueError: no effect, an unknown effect or an empty key.
    """
    spec, _, effect = entry.rpartition(":")
    key, _, value = spec.partition("=")
    if not key.strip() or effect not in _TAINT_EFFECTS:
        raise ValueError(
            f"{entry!r} is not `key=value:Effect` or `key:Effect` with Effect one of {', '.join(_TAINT_EFFECTS)}, "
            "e.g. `nvidia.com/gpu:NoSchedule`"
        )
    return Toleration(key=key.strip(), value=value.strip(), effect=effect)


def image_warnings(image: str) -> list[str]:
    """Why `image` may not be reproducible: a `latest` or missing tag pulls whatever was pushed last, and a tag
    without a digest can give stale cache hits (KFP's cache key holds the image string, not its content).

    Raises:
        ValueError: the image is empty, or its digest is not `sha256:` and 64 hex digits.
    """
    if not image.strip():
        raise ValueError("the component image is empty; set `kubeflow.image`, e.g. `registry.example.com/tfxp:0.1.0`")
    if "@" in image:
        digest = image.rsplit("@", 1)[1]
        if not _DIGEST.fullmatch(digest):
            raise ValueError(
                f"kubeflow.image {image!r}: the digest {digest!r} is not `sha256:` and 64 hex digits; copy it "
                f"from `docker buildx imagetools inspect IMAGE:TAG` (the Digest line)"
            )
        return []
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
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


def _check_name(name: str, what: str) -> None:
    # A label or annotation key's name part (after an optional DNS-subdomain prefix and `/`).
    if not (len(name) <= 63 and _NAME.fullmatch(name)):
        raise ValueError(
            f"{what} {name!r} is not a Kubernetes name: at most 63 letters, digits, `-`, `_` or `.`, "
            "starting and ending with a letter or digit"
        )


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if prefix and not (len(prefix) <= 253 and _SUBDOMAIN.fullmatch(prefix)):
        raise ValueError(f"the key prefix {prefix!r} is not a DNS subdomain, e.g. `example.com`")
    _check_name(name, "the key")


def parse_pod_label(entry: str) -> tuple[str, str]:
    """`key=value` → (key, value), both checked with Kubernetes' label syntax.

    Raises:
        ValueError: no `=`, a bad key, or a bad value (at most 63 letters, digits, `-`, `_`, `.`; may be empty).
    """
    key, value = parse_node_label(entry)
    try:
        _check_key(key)
        if value:
            _check_name(value, "the value")
    except ValueError as error:
        raise ValueError(f"{entry!r}: {error}") from None
    return key, value


def parse_pod_annotation(entry: str) -> tuple[str, str]:
    """`key=value` → (key, value); the key has label syntax, the value is any text.

    Raises:
        ValueError: no `=` or a bad key.
    """
    key, sep, value = entry.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{entry!r} is not `key=value`, e.g. `team.example.com/owner=ml-platform`")
    try:
        _check_key(key)
    except ValueError as error:
        raise ValueError(f"{entry!r}: {error}") from None
    return key, value


def check_secret_name(name: str) -> str:
    """`name` when it is a valid Kubernetes Secret name (a DNS subdomain, lower case).

    Raises:
        ValueError: not a DNS subdomain.
    """
    if not (len(name) <= 253 and _SUBDOMAIN.fullmatch(name)):
        raise ValueError(
            f"{name!r} is not a Kubernetes Secret name: lower-case letters, digits, `-` and `.`, e.g. `regcred`"
        )
    return name


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
