"""Kubernetes' name rules, as the API server checks them: object names per kind, label keys and values,
namespaces, Secret and PersistentVolumeClaim names, and the namespaces tfxp never takes over.

Most kinds need a DNS-1123 subdomain as `metadata.name`, Namespaces a DNS-1123 label, Services (and KServe
InferenceServices) a DNS-1035 label (kubernetes/apimachinery `pkg/util/validation/validation.go`,
`IsDNS1123Label`, `IsDNS1123Subdomain`, `IsDNS1035Label`, `IsQualifiedName`, `IsValidLabelValue`). Serving's
and Kubeflow's config keys check their values here, so a typo fails when the config loads.

Example:
    name_problem("Service", "tf-serving-resnet50_imagenet")  # "... is not a DNS-1035 label ..."
    label_key_problem("example.com/team")                    # None
    check_namespace("kube-system")  # ValueError: managed by Kubernetes; tfxp never relabels it
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*"
MAX_LABEL_LENGTH = 63
MAX_SUBDOMAIN_LENGTH = 253
# KServe names the predictor's Service `<name>-predictor` and Knative its revisions `<name>-predictor-00001`,
# each a DNS-1035 label of at most 63 characters.
MAX_INFERENCE_SERVICE_NAME = MAX_LABEL_LENGTH - len("-predictor-00001")
# A label key is `[prefix/]name`: the prefix a DNS-1123 subdomain, the name (and a label value, which may be
# empty) alphanumeric at both ends with `-`, `_`, `.` between, at most 63 characters.
LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
# Namespaces Kubernetes creates and manages; tfxp writes no Namespace object for them (which would relabel them,
# e.g. enforce the restricted Pod Security Standard on kube-system).
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


@dataclass(frozen=True)
class NameRule:
    """What the API server accepts as `metadata.name` of one kind."""

    pattern: str
    max_length: int
    format: str


_SUBDOMAIN = NameRule(DNS1123_SUBDOMAIN, MAX_SUBDOMAIN_LENGTH, "a DNS-1123 subdomain")
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
            # Role and RoleBinding names need only be path segments (ValidateRBACName); a subdomain is one.
            "Role",
            "RoleBinding",
            "Secret",
            "ServiceAccount",
            # Custom resources of the rollout assets: their CRDs keep the default rule, a subdomain.
            "HTTPRoute",
            "GRPCRoute",
            "Rollout",
            "AnalysisTemplate",
            "Canary",
            "MetricTemplate",
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


def label_key_problem(key: str) -> str | None:
    """Why `key` is no label or annotation key (`[DNS-subdomain prefix/]name`), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and not (len(prefix) <= MAX_SUBDOMAIN_LENGTH and re.fullmatch(DNS1123_SUBDOMAIN, prefix)):
        return f"the key prefix {prefix!r} is not a DNS subdomain, e.g. `example.com`"
    if not re.fullmatch(LABEL_NAME, name):
        return (
            f"the key {name!r} is not a Kubernetes name: at most 63 letters, digits, `-`, `_` or `.`, "
            "starting and ending with a letter or digit"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why `value` is no label value (empty, or a label name), or None."""
    if value and not re.fullmatch(LABEL_NAME, value):
        return (
            f"the value {value!r} is not a Kubernetes name: at most 63 letters, digits, `-`, `_` or `.`, "
            "starting and ending with a letter or digit (or empty)"
        )
    return None


def parse_label(entry: str) -> tuple[str, str]:
    """`key=value` → (key, value) for a Kubernetes label selector.

    Raises:
        ValueError: not `key=value`, or a key or value Kubernetes does not accept as a label.
    """
    key, sep, value = entry.partition("=")
    problem = "no `=`" if not sep else label_key_problem(key) or label_value_problem(value)
    if problem:
        raise ValueError(
            f"{entry!r} is not a Kubernetes label `key=value` ({problem}), e.g. `app.kubernetes.io/name=frontend`"
        )
    return key, value


def check_label(value: str) -> str:
    """`value` if `parse_label` accepts it (a pydantic validator for config keys)."""
    parse_label(value)
    return value


def check_namespace(value: str) -> str:
    """`value` if it is a valid namespace name (a pydantic validator for config keys that select namespaces).

    Raises:
        ValueError: not a DNS-1123 label of at most 63 characters.
    """
    if name_problem("Namespace", value):
        raise ValueError("not a Kubernetes namespace name: lower-case letters, digits and '-', at most 63, e.g. `ml`")
    return value


def check_own_namespace(value: str) -> str:
    """`value` if it is a namespace tfxp may create and label (a pydantic validator): a valid name, and not one of
    `RESERVED_NAMESPACES`.

    Raises:
        ValueError: an invalid name, or a namespace Kubernetes manages.
    """
    check_namespace(value)
    if value in RESERVED_NAMESPACES:
        raise ValueError(
            f"{value} is managed by Kubernetes, and the deploy assets would relabel it (Pod Security Standard "
            f"`restricted`); tfxp never relabels {', '.join(sorted(RESERVED_NAMESPACES))}; use a namespace of your "
            "own, e.g. tfxp-serving"
        )
    return value


def check_resource_name(value: str) -> str:
    """`value` if it is empty or a resource name (`nvidia.com/gpu`; label-key syntax), a pydantic validator.

    Raises:
        ValueError: not `[DNS-subdomain prefix/]name`.
    """
    problem = value and label_key_problem(value)
    if problem:
        raise ValueError(f"not a Kubernetes resource name ({problem}), e.g. `nvidia.com/gpu`")
    return value


def check_claim_name(value: str) -> str:
    """`value` if it is empty or a valid PersistentVolumeClaim name (a pydantic validator for config keys).

    Raises:
        ValueError: not a DNS-1123 subdomain.
    """
    if value and name_problem("PersistentVolumeClaim", value):
        raise ValueError("not a PersistentVolumeClaim name: lower-case letters, digits, '-' and '.', e.g. `models`")
    return value


def check_secret_name(name: str) -> str:
    """`name` when it is a valid Kubernetes Secret name (a DNS subdomain, lower case).

    Raises:
        ValueError: not a DNS subdomain.
    """
    if name_problem("Secret", name):
        raise ValueError(
            f"{name!r} is not a Kubernetes Secret name: lower-case letters, digits, `-` and `.`, e.g. `regcred`"
        )
    return name
