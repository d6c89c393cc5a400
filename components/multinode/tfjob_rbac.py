"""The Role and RoleBinding the Trainer task's service account needs to run the workers' TFJob, and nothing more.

`tfxp compile` writes them beside the compiled spec (pipeline.rbac.yaml) for a cluster admin to apply once; the
TFJob client's calls (components/multinode/tfjob_api.py) are exactly what `RBAC_RULES` grants. Plain dicts, no
Kubernetes client, no TFX.

Example:
    role, binding = tfjob_rbac("pipeline-runner", "kubeflow")
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from components.multinode.tfjob import PART_OF_LABEL, TFJOB_GROUP, TFJOB_PLURAL, TFJobError
from components.multinode.tfjob_names import HASH_LENGTH
from foundation.k8s.names import name_problem

ROLE_NAME = "tfxp-trainer-tfjobs"

# Who uses each right: the Trainer task's TFJob client (components/multinode/tfjob_api.py), which polls (no watch):
# - tfjobs create: submit the job; get: read its status and conditions; delete: when it ended, on SIGTERM
#   (`tfxp runs terminate`, Argo's deadline) and on the task's own deadline.
# - pods list: each replica's phase, restarts and exit code (`-l training.kubeflow.org/job-name=...`).
# - pods/log get: the failing replica's log tail for the error message.
# - events list: why a worker is not scheduled (FailedScheduling, gang timeouts) and the operator's events on the
#   job (restarts, backoff limit, deadline).
# No watch, patch or update (the job is never changed), no services, no secrets; no `*` anywhere.
# tests/components/multinode/test_tfjob_client.py runs the client against an API double that enforces exactly these
# rules.
RBAC_RULES: tuple[Mapping[str, Any], ...] = (
    MappingProxyType({"apiGroups": (TFJOB_GROUP,), "resources": (TFJOB_PLURAL,), "verbs": ("create", "get", "delete")}),
    MappingProxyType({"apiGroups": ("",), "resources": ("pods",), "verbs": ("list",)}),
    MappingProxyType({"apiGroups": ("",), "resources": ("pods/log",), "verbs": ("get",)}),
    MappingProxyType({"apiGroups": ("",), "resources": ("events",), "verbs": ("list",)}),
)


def _rbac_name(service_account: str) -> str:
    name = f"{ROLE_NAME}-{service_account}"
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(service_account.encode()).hexdigest()[:HASH_LENGTH]
    return f"{name[: 253 - HASH_LENGTH - 1].rstrip('-.')}-{digest}"


def tfjob_rbac(service_account: str, namespace: str) -> list[dict[str, Any]]:
    """The Role and RoleBinding that let `service_account` in `namespace` run the workers' TFJobs, and nothing
    more (`RBAC_RULES` says who uses each verb).

    Raises:
        TFJobError: a service account or namespace name the API server refuses.
    """
    problem = name_problem("ServiceAccount", service_account) or name_problem("Namespace", namespace)
    if problem:
        raise TFJobError(problem)
    labels = dict([PART_OF_LABEL, ("app.kubernetes.io/component", "trainer")])
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ROLE_NAME, "namespace": namespace, "labels": labels},
        "rules": [{key: list(value) for key, value in rule.items()} for rule in RBAC_RULES],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": _rbac_name(service_account), "namespace": namespace, "labels": dict(labels)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    }
    return [role, binding]
