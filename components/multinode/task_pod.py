"""The Trainer task's own pod, as the TFJob it starts needs it: the owner reference to the pod, and the service
account it runs as (read from the token Kubernetes mounts into it, as a secret: `foundation.credentials`).

Example:
    owner = task_pod_owner()          # OwnerReference(name="tfxp-digits-abc-system-container-impl-1", uid=...)
    identity = task_service_account()  # ("kubeflow-user-example-com", "default-editor")
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from pathlib import Path

from components.multinode.tfjob_binding import OwnerReference
from components.multinode.tfjob_errors import TfJobError
from foundation.bounded import parse_json
from foundation.credentials import CredentialError, CredentialFileMissingError, read_secret_file

SERVICE_ACCOUNT_TOKEN_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
# The `sub` claim of a service account's token: serviceaccount.MakeUsername (kubernetes
# staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount/util.go), in bound and legacy tokens alike.
_SERVICE_ACCOUNT_SUBJECT = re.compile(r"system:serviceaccount:(?P<namespace>[^:]+):(?P<name>[^:]+)")
# KFP's compiler sets both on the executor container of every task (kubeflow/pipelines
# backend/src/v2/compiler/argocompiler/common.go:42-56 for the container, container.go:571), not only on the driver
# (container.go:293), and the launcher runs the component's command with its own environment
# (backend/src/v2/component/launcher_v2.go:707, exec.Command without Env).
POD_NAME_ENV = "KFP_POD_NAME"
POD_UID_ENV = "KFP_POD_UID"


def task_pod_owner(env: Mapping[str, str] = os.environ) -> OwnerReference | None:
    """The owner reference to the Trainer task's pod (KFP_POD_NAME, KFP_POD_UID), for the TFJob's
    `metadata.ownerReferences`; None outside a KFP task.

    Neither `controller` nor `blockOwnerDeletion` is set: nothing controls the TFJob but the operator, and
    blockOwnerDeletion would need `update` on pods/finalizers where the OwnerReferencesPermissionEnforcement
    admission plugin runs (OpenShift). The TFJob must live in the pod's namespace: the garbage collector treats an
    owner in another namespace as absent and deletes the dependent.

    Raises:
        TfJobError: only one of the two variables is set.
    """
    name, uid = env.get(POD_NAME_ENV, ""), env.get(POD_UID_ENV, "")
    if not name and not uid:
        return None
    if not (name and uid):
        missing, present = (POD_UID_ENV, POD_NAME_ENV) if name else (POD_NAME_ENV, POD_UID_ENV)
        raise TfJobError(
            f"{missing} is not set while {present} is: KFP sets both on every task (from the pod's metadata.name "
            "and metadata.uid), so this environment is not a KFP task's."
        )
    return OwnerReference(name=name, uid=uid)


def task_service_account(token_path: Path = SERVICE_ACCOUNT_TOKEN_FILE) -> tuple[str, str] | None:
    """The task pod's own identity, (namespace, service account name), from the `sub` claim
    (`system:serviceaccount:<namespace>:<name>`) of the token Kubernetes mounts into it; None where no token is
    mounted (outside a pod, or automountServiceAccountToken false).

    The token is a JWT whose payload is read, not verified: the API server verifies it on every call, and this only
    says whom it names.

    Args:
        token_path: the token file (default: /var/run/secrets/kubernetes.io/serviceaccount/token).

    Raises:
        TfJobError: the file cannot be read, or holds no service account's token.

    Example:
        task_service_account()  # ("kubeflow-user-example-com", "default-editor")
    """
    fix = "the kubelet mounts it; is automountServiceAccountToken off, or the file replaced?"
    try:
        token = read_secret_file(token_path, f"the pod's service account token {token_path}", fix)
    except CredentialFileMissingError:
        return None
    except CredentialError as error:
        raise TfJobError(str(error)) from None
    parts = token.split(".")
    if len(parts) != 3:
        raise TfJobError(
            f"{token_path} is not a service account token: a JWT has 3 dot-separated parts, this has {len(parts)}"
        )
    try:
        claims = parse_json(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError as error:  # binascii.Error, UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise TfJobError(f"{token_path} is not a service account token: its payload is not JSON ({error})") from error
    subject = claims.get("sub") if isinstance(claims, dict) else None
    match = _SERVICE_ACCOUNT_SUBJECT.fullmatch(subject) if isinstance(subject, str) else None
    if match is None:
        raise TfJobError(
            f"{token_path} is not a service account token: its subject is {subject!r}, not "
            "system:serviceaccount:<namespace>:<name>"
        )
    return match["namespace"], match["name"]
