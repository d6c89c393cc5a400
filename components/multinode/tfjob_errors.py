"""The TFJob client's errors, and how a Kubernetes API refusal becomes one (pure Python, no client calls).

An API error arrives as the kubernetes client's `ApiException` with the HTTP status and the body: a `Status`
object (`{"kind": "Status", "code": 403, "reason": "Forbidden", "message": ..., "details": {...}}`, built by
kubernetes/apimachinery `pkg/api/errors/errors.go` NewNotFound:145, NewAlreadyExists:160, NewForbidden:209,
NewInvalid:284), or plain text where no API handler answered: a resource the cluster does not serve (a missing CRD)
falls through the apiextensions handler to Go's `http.NotFound`, "404 page not found"
(kubernetes/apiextensions-apiserver `pkg/apiserver/customresource_handler.go:256-260`, `apiserver.go:174-176`;
kubernetes/apiserver `pkg/util/notfoundhandler/not_found_handler.go:64`).

403 has two authors: RBAC, whose message is `User "system:serviceaccount:NS:SA" cannot VERB resource "RES" in API
group "GROUP" in the namespace "NS"` (kubernetes/apiserver `pkg/endpoints/handlers/responsewriters/errors.go:45-75`),
and admission webhooks: the Training Operator's TFJob validator denies through controller-runtime's `Denied`, which
answers 403 Forbidden (controller-runtime `pkg/webhook/admission/response.go:35,63-83`,
`validator_custom.go:143-150`), and the API server prefixes `admission webhook "NAME" denied the request: `
(kubernetes/apiserver `pkg/admission/plugin/webhook/errors/statuserror.go:28-52`). The first is missing RBAC, the
second a manifest the operator refuses: different fixes, so different errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from foundation.bounded import parse_json
from foundation.errors import TfxpError

TRAINING_OPERATOR_INSTALL = (
    'kubectl apply --server-side -k "github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref=v1.9.4"'
)
RBAC_FILE = "pipeline.rbac.yaml"
# The config keys (pipeline/config.py, KubeflowSection) whose values the Trainer task passes to the client.
DEADLINE_KEY = "kubeflow.workers.job_deadline_seconds"
SCHEDULE_TIMEOUT_KEY = "kubeflow.workers.schedule_timeout_seconds"
BACKOFF_LIMIT_KEY = "kubeflow.workers.backoff_limit"
# HTTP statuses worth another try while waiting: the API server restarting, overloaded or throttling.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})

_RBAC_MESSAGE = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
    r'(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)'
)
_SERVICE_ACCOUNT_USER = re.compile(r"system:serviceaccount:(?P<namespace>[^:]+):(?P<name>.+)")


class TfJobError(TfxpError, RuntimeError):
    """The Training Operator job of a multi-worker Trainer could not be run; the message says why and how to fix it.

    Attributes:
        job: `namespace/name` of the TFJob, when known.
        detail: lines shown after the message (a log tail).
        cleanup: set by `TfJobClient.run` once it has tried to delete the job (what happened to it), and appended to
            the message, before the detail.
    """

    def __init__(self, message: str, *, job: str | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.job = job
        self.detail = detail
        self.cleanup = ""

    def __str__(self) -> str:
        text = f"{self.message} {self.cleanup}" if self.cleanup else self.message
        return f"{text}\n{self.detail}" if self.detail else text


class TfJobCrdMissingError(TfJobError):
    """The cluster serves no `tfjobs.kubeflow.org`: the Training Operator is not installed."""


class TfJobForbiddenError(TfJobError):
    """RBAC refused the pipeline's service account one of the calls the client makes."""

    def __init__(
        self, message: str, *, verb: str, resource: str, namespace: str, service_account: str, job: str | None = None
    ) -> None:
        super().__init__(message, job=job)
        self.verb, self.resource, self.namespace, self.service_account = verb, resource, namespace, service_account


class TfJobRejectedError(TfJobError):
    """The API server or the operator's admission webhook refused the manifest (422 Invalid, 400, webhook 403)."""


class TfJobPodsRejectedError(TfJobRejectedError):
    """The Kubernetes API refused to create the workers' pods for the operator (a missing service account, a Pod
    Security Admission level, a ResourceQuota), persistently; the message says which setting to change.

    Attributes:
        pod: the pod the operator could not create.
        event: the operator's FailedCreatePod message (`Error creating: pods "x" is forbidden: ...`).
        cause: `service-account`, `pod-security`, `quota` or `other`.
    """

    def __init__(self, message: str, *, job: str, pod: str, event: str, cause: str) -> None:
        super().__init__(message, job=job)
        self.pod, self.event, self.cause = pod, event, cause


class TfJobUnansweredError(TfJobError):
    """The Kubernetes API gave no readable answer about the job, poll after poll (no answer, 429/5xx, or one tfxp
    cannot read): tfxp lost sight of the job, does not know its state, and left it running."""


def delete_command(namespace: str, name: str) -> str:
    """The command that deletes the TFJob by hand."""
    return f"kubectl -n {namespace} delete tfjob {name}"


class TfJobConflictError(TfJobError):
    """A TFJob of that name exists and is not this task's."""


class TfJobFailedError(TfJobError):
    """The operator marked the job Failed; the message names the failing replica, its exit and its log tail.

    Attributes:
        replica_type, replica_index, exit_code, reason: the first failing replica, when one could be found.
        log_tail: the last lines of its `tensorflow` container's log ("" when unavailable).
    """

    def __init__(
        self,
        message: str,
        *,
        job: str,
        replica_type: str = "",
        replica_index: int = -1,
        exit_code: int | None = None,
        reason: str = "",
        log_tail: str = "",
        detail: str = "",
    ) -> None:
        super().__init__(message, job=job, detail=detail)
        self.replica_type, self.replica_index = replica_type, replica_index
        self.exit_code, self.reason, self.log_tail = exit_code, reason, log_tail


class TfJobNotScheduledError(TfJobError):
    """The workers did not all start within the schedule timeout; the message names the waiting pods and why.

    Attributes:
        pending_pods: names of the pods that had not started.
        event: the newest scheduling event's message ("" when none was found).
    """

    def __init__(self, message: str, *, job: str, pending_pods: tuple[str, ...], event: str) -> None:
        super().__init__(message, job=job)
        self.pending_pods, self.event = pending_pods, event


class TfJobTimeoutError(TfJobError):
    """The job was still running at the deadline (the client's, or the operator's `activeDeadlineSeconds`); the
    detail is the chief's log tail."""


class TfJobGoneError(TfJobError):
    """The TFJob disappeared (or was replaced by another of the same name) while the task waited for it."""


@dataclass(frozen=True)
class ApiStatus:
    """What an API refusal said: the HTTP code and, when the body is a Status object, its reason, message and
    details; `text` is a non-Status body as it came."""

    code: int
    reason: str = ""
    message: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    text: str = ""

    @property
    def is_status_object(self) -> bool:
        return bool(self.reason or self.message)


def api_status(error: Any) -> ApiStatus:
    """The `ApiStatus` of a kubernetes `ApiException` (duck-typed: `.status`, `.reason`, `.body`)."""
    raw = getattr(error, "body", None)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
    try:
        body = parse_json(text) if text else None
    except ValueError:
        body = None
    code = int(getattr(error, "status", 0) or 0)
    if isinstance(body, dict) and body.get("kind") == "Status":
        return ApiStatus(
            code=int(body.get("code") or code),
            reason=str(body.get("reason", "")),
            message=str(body.get("message", "")),
            details=body.get("details") or {},
        )
    return ApiStatus(code=code, text=text.strip() or str(getattr(error, "reason", "") or ""))


def is_transient(status: ApiStatus) -> bool:
    return status.code in TRANSIENT_STATUSES


def is_webhook_denial(status: ApiStatus) -> bool:
    return status.message.startswith("admission webhook ")


def say(status: ApiStatus) -> str:
    """What a refusal said, in a few words."""
    return status.message or status.text or f"HTTP {status.code}"


def forbidden_error(status: ApiStatus, *, namespace: str, job: str | None) -> TfJobForbiddenError:
    """The 403 of RBAC as a TfJobForbiddenError naming the verb, resource, namespace and service account."""
    match = _RBAC_MESSAGE.search(status.message)
    verb = match["verb"] if match else "?"
    resource = match["resource"] if match else str(status.details.get("kind", "?"))
    group = match["group"] if match else str(status.details.get("group", ""))
    where = (match["namespace"] if match else None) or namespace
    user = match["user"] if match else ""
    account = _SERVICE_ACCOUNT_USER.fullmatch(user)
    who = f"service account {account['namespace']}/{account['name']}" if account else f"user {user or '?'}"
    qualified = f"{resource}.{group}" if group else resource
    # The calls carry the pod's own token, so its identity is the service account the run's pods run as, which no
    # config key changes: kubeflow.namespace and kubeflow.service_account only decide whom the RBAC file binds.
    if account:
        namespace_, name = account["namespace"], account["name"]
        apply = f"`kubectl apply -n {namespace_} -f {RBAC_FILE}`"
        fix = (
            f"as its own pod's service account, {namespace_}/{name}, which no config key changes. Give that account "
            f"the rights: compile with `--set kubeflow.namespace={namespace_} --set kubeflow.service_account={name}` "
            f"(those keys decide which account {RBAC_FILE} binds) and {apply}, or edit the RoleBinding's subject in "
            f"{RBAC_FILE} to that account and {apply}."
        )
    else:
        fix = (
            f"as its own pod's identity, user {user or '?'}: grant it the rules of the Role in {RBAC_FILE} (written "
            "by `tfxp compile` beside the spec)."
        )
    message = (
        f"Kubernetes refused the {who} to {verb} {qualified} in namespace {where} (403 Forbidden: "
        f"{say(status)}). The Trainer of a multi-worker run creates, reads and deletes TFJobs and reads its pods, "
        f"their logs and events {fix}"
    )
    service_account = f"{account['namespace']}/{account['name']}" if account else user
    return TfJobForbiddenError(
        message, verb=verb, resource=qualified, namespace=where, service_account=service_account, job=job
    )


def rejected_error(status: ApiStatus, *, job: str | None) -> TfJobRejectedError:
    """A refused manifest, with each field the API server named (`details.causes`)."""
    causes = [
        f"{cause.get('field', '')}: {cause.get('message', '')}".strip(": ")
        for cause in status.details.get("causes") or ()
    ]
    cause_text = f" Fields: {'; '.join(causes)}." if causes and status.code == 422 else ""
    who = "the Training Operator's admission webhook" if is_webhook_denial(status) else "the Kubernetes API"
    return TfJobRejectedError(
        f"{who} refused the TFJob {job or ''} ({status.code} {status.reason or 'refused'}: {say(status)})."
        f"{cause_text} The manifest comes from the Trainer's kubeflow settings; fix the key it names "
        "(or report a tfxp bug when the manifest itself is malformed).",
        job=job,
    )


def api_error(status: ApiStatus, *, action: str, namespace: str, job: str | None = None) -> TfJobError:
    """The TfJobError for a refused call; `action` says what was tried, e.g. `create TFJob ns/x`.

    Raises nothing; 404 on create is the missing CRD or namespace, so the caller handles 404 elsewhere itself.
    """
    if status.code == 403:
        if is_webhook_denial(status):
            return rejected_error(status, job=job)
        return forbidden_error(status, namespace=namespace, job=job)
    if status.code in (400, 422):
        return rejected_error(status, job=job)
    if status.code == 401:
        return TfJobError(
            f"the Kubernetes API refused the service account's credentials ({action}: 401 {say(status)}); the "
            "pod's token (/var/run/secrets/kubernetes.io/serviceaccount/token) is missing, expired or not accepted.",
            job=job,
        )
    return TfJobError(f"the Kubernetes API answered {status.code} {status.reason} to {action}: {say(status)}", job=job)


def create_not_found_error(status: ApiStatus, *, namespace: str, job: str) -> TfJobError:
    """404 on creating a TFJob: the namespace does not exist (a Status naming `namespaces`), or the cluster serves
    no tfjobs resource at all."""
    if status.details.get("kind") == "namespaces":
        return TfJobError(
            f"namespace {namespace} does not exist ({say(status)}); the TFJob goes in the namespace the Trainer "
            "task runs in (kubeflow.namespace).",
            job=job,
        )
    return TfJobCrdMissingError(
        f"this cluster has no TFJob resource (POST /apis/kubeflow.org/v1/namespaces/{namespace}/tfjobs answered 404 "
        f"{say(status)}), so it cannot run trainer.workers > 1. Install the Training Operator v1.9 "
        f"({TRAINING_OPERATOR_INSTALL}), or set trainer.workers=1 to train in the Trainer's own pod.",
        job=job,
    )
