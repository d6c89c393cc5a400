"""The Kubernetes calls of the TFJob client, in one namespace: plain JSON in and out, refusals as TfJobErrors.

Every read asks for the raw JSON (`_preload_content=False`) rather than the kubernetes client's models, so TFJobs,
pods and events are the same camelCase dicts the API server sends (and `kubectl get -o json` shows); the readers
in components/multinode/tfjob_status.py take them as they are. RBAC_RULES lists every call made here: the Role that
`tfxp compile` writes beside the compiled spec (pipeline.rbac.yaml) grants exactly these.

Example:
    api, namespace = in_cluster()
    calls = TfJobApi(api, namespace)
    job = calls.get("tfxp-train-3f1e")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from components.multinode import api_answers as answers
from components.multinode import tfjob
from components.multinode import tfjob_status as status
from components.multinode.tfjob_errors import (
    TfJobError,
    TfJobGoneError,
    api_error,
    api_status,
    create_not_found_error,
    is_transient,
    say,
)
from foundation.bounded import cap_pool
from foundation.deadline import with_deadline
from foundation.redirects import guard_pool

if TYPE_CHECKING:
    from foundation.stop_request import StopRequest

# (connect, read) seconds of every call; the kubernetes client ignores a float `_request_timeout` (its rest.py takes
# an int or a pair only), so this is a pair. These bound each connect and each socket read, not the call (a server
# that trickles its answer never trips them), so every call also has a whole-call deadline (`with_deadline`).
REQUEST_TIMEOUT = (10, 30)
DELETE_TIMEOUT = (3, 6)
READ_DEADLINE_SECONDS = 40.0
# After SIGTERM the pod's grace period (terminationGracePeriodSeconds, 30 s by default) bounds everything that is
# left: the create in flight (it is waited for: abandoned, it could still create the job after the cleanup looked),
# the look whether an unanswered create made the job, and the deletion. Reads in flight are abandoned at once.
CREATE_DEADLINE_SECONDS = 12.0
CLEANUP_LOOK_DEADLINE_SECONDS = 4.0
DELETE_DEADLINE_SECONDS = 8.0
T = TypeVar("T")
LOG_TAIL_LINES = 40
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# The operator records a pod it could not create as a Warning on the job: reason FailedCreatePod, message
# `Error creating: <the API server's error>` (pkg/controller.v1/control/pod_control.go:37-39,152-153).
FAILED_CREATE_POD_REASON = "FailedCreatePod"
TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)


class ApiUnreachableError(Exception):
    """A call got no usable answer (a transport error, or 429/5xx); worth another try later."""


class JobExistsError(Exception):
    """409 AlreadyExists on create: a TFJob of that name exists (whose it is, the caller decides)."""


class TfJobApi:
    """The calls, in `namespace`, through a `kubernetes.client.ApiClient`."""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self._custom = k8s.CustomObjectsApi(api)
        self._core = k8s.CoreV1Api(api)
        # Set by TfJobClient.run: a stop signal abandons the read in flight (StopRequested), never a create or delete.
        self.stop: StopRequest | None = None

    def _bounded(self, call: Callable[[], T], what: str, deadline: float, *, abandon_on_stop: bool) -> T:
        """`call()` within `deadline` seconds in all (else urllib3's TimeoutError, a transport error)."""
        late = urllib3.exceptions.TimeoutError(f"no whole answer to {what} within {deadline:.0f} s")
        return with_deadline(call, deadline, late, stop=self.stop if abandon_on_stop else None)

    def _json(
        self,
        method: Callable[..., Any],
        *args: Any,
        shape: Any,
        deadline: float = READ_DEADLINE_SECONDS,
        abandon_on_stop: bool = True,
        **kwargs: Any,
    ) -> dict[str, Any]:
        what = getattr(method, "__name__", "the call")

        def call() -> dict[str, Any]:
            response = method(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
            return answers.json_object(answers.read_capped(response, answers.MAX_ANSWER_BYTES), what, shape)

        return self._bounded(call, getattr(method, "__name__", "the call"), deadline, abandon_on_stop=abandon_on_stop)

    def _tfjobs(self) -> tuple[str, str, str, str]:
        """The group, version, namespace and plural that name this namespace's TFJobs in a custom object call."""
        return tfjob.TFJOB_GROUP, tfjob.TFJOB_VERSION, self.namespace, tfjob.TFJOB_PLURAL

    def _job_id(self, name: str) -> str:
        return f"{self.namespace}/{name}"

    def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Creates the TFJob; returns it as stored.

        Raises:
            JobExistsError: 409 AlreadyExists.
            ApiUnreachableError: no answer, or a transient status (the job may have been created nonetheless).
            TfJobCrdMissingError, TfJobForbiddenError, TfJobRejectedError, TfJobError: the API refused it.
        """
        name = str(manifest["metadata"]["name"])
        try:
            created = self._json(
                self._custom.create_namespaced_custom_object,
                *self._tfjobs(),
                dict(manifest),
                shape=answers.TFJOB,
                deadline=CREATE_DEADLINE_SECONDS,
                abandon_on_stop=False,
            )
            return answers.named(created, name, "create_namespaced_custom_object")
        except ApiException as error:
            refusal = api_status(error)
            if refusal.code == 409 and refusal.reason == "AlreadyExists":
                raise JobExistsError(say(refusal)) from error
            if refusal.code == 404:
                raise create_not_found_error(refusal, namespace=self.namespace, job=self._job_id(name)) from error
            if is_transient(refusal):
                raise ApiUnreachableError(f"{refusal.code} {say(refusal)}") from error
            action = f"create TFJob {self._job_id(name)}"
            raise api_error(refusal, action=action, namespace=self.namespace, job=self._job_id(name)) from error
        except TRANSPORT_ERRORS as error:
            raise ApiUnreachableError(f"{type(error).__name__}: {error}") from error

    def get(self, name: str, *, cleanup: bool = False) -> dict[str, Any]:
        """The TFJob as the API server has it (`cleanup`: a short deadline, and not abandoned on a stop signal).

        Raises:
            TfJobGoneError: it does not exist.
            ApiUnreachableError: no answer, or a transient status.
            TfJobForbiddenError, TfJobError: the API refused otherwise.
        """
        job_id = self._job_id(name)
        try:
            job = self._json(
                self._custom.get_namespaced_custom_object,
                *self._tfjobs(),
                name,
                shape=answers.TFJOB,
                deadline=CLEANUP_LOOK_DEADLINE_SECONDS if cleanup else READ_DEADLINE_SECONDS,
                abandon_on_stop=not cleanup,
            )
            return answers.named(job, name, "get_namespaced_custom_object")
        except ApiException as error:
            refusal = api_status(error)
            if refusal.code == 404 and refusal.is_status_object:
                raise TfJobGoneError(
                    f"TFJob {job_id} does not exist (any more): it was deleted while the task waited for it "
                    "(by hand, or by its ttlSecondsAfterFinished).",
                    job=job_id,
                ) from error
            if is_transient(refusal):
                raise ApiUnreachableError(f"{refusal.code} {say(refusal)}") from error
            raise api_error(refusal, action=f"get TFJob {job_id}", namespace=self.namespace, job=job_id) from error
        except TRANSPORT_ERRORS as error:
            raise ApiUnreachableError(f"{type(error).__name__}: {error}") from error

    def list_pods(self, name: str) -> list[dict[str, Any]]:
        """The pods labelled as the TFJob's (tfjob_status.pod_label_selector); same errors as `get`, but 404."""
        job_id = self._job_id(name)
        try:
            listed = self._json(
                self._core.list_namespaced_pod,
                self.namespace,
                shape=answers.POD_LIST,
                label_selector=status.pod_label_selector(name),
            )
        except ApiException as error:
            refusal = api_status(error)
            if is_transient(refusal):
                raise ApiUnreachableError(f"{refusal.code} {say(refusal)}") from error
            action = f"list the pods of TFJob {job_id}"
            raise api_error(refusal, action=action, namespace=self.namespace, job=job_id) from error
        except TRANSPORT_ERRORS as error:
            raise ApiUnreachableError(f"{type(error).__name__}: {error}") from error
        return list(listed.get("items") or [])

    def delete(self, name: str, uid: str | None) -> Literal["deleted", "gone", "replaced"]:
        """Deletes the TFJob with propagationPolicy Background, and only the one with `uid` when given: `gone` when
        there was none, `replaced` when the name belongs to another job now (the uid precondition's 409).

        Raises:
            TfJobForbiddenError, TfJobError: the API refused, or could not be reached.
        """
        options = k8s.V1DeleteOptions(
            propagation_policy="Background", preconditions=k8s.V1Preconditions(uid=uid) if uid else None
        )
        try:
            self._bounded(
                lambda: self._custom.delete_namespaced_custom_object(
                    *self._tfjobs(),
                    name,
                    body=options,
                    _request_timeout=DELETE_TIMEOUT,
                ),
                "delete_namespaced_custom_object",
                DELETE_DEADLINE_SECONDS,
                abandon_on_stop=False,
            )
        except ApiException as error:
            refusal = api_status(error)
            if refusal.code == 404:
                return "gone"
            if refusal.code == 409:
                return "replaced"
            job_id = self._job_id(name)
            raise api_error(refusal, action=f"delete TFJob {job_id}", namespace=self.namespace, job=job_id) from error
        except TRANSPORT_ERRORS as error:
            raise TfJobError(f"could not reach the Kubernetes API to delete TFJob {name}: {error}") from error
        return "deleted"

    def log_tail(self, pod: str, *, previous: bool = False) -> str:
        """The last LOG_TAIL_LINES lines of the pod's `tensorflow` container (`previous`: of its run before the
        current one), or `(log unavailable: why)`."""

        def call() -> bytes:
            response = self._core.read_namespaced_pod_log(
                pod,
                self.namespace,
                container=tfjob.CONTAINER_NAME,
                tail_lines=LOG_TAIL_LINES,
                previous=previous,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
            return answers.read_capped(response, answers.MAX_LOG_BYTES)

        try:
            data = self._bounded(call, "read_namespaced_pod_log", READ_DEADLINE_SECONDS, abandon_on_stop=True)
        except ApiException as error:
            return f"(log unavailable: {say(api_status(error))})"
        except TRANSPORT_ERRORS as error:
            return f"(log unavailable: {type(error).__name__})"
        text = data.decode("utf-8", "replace").rstrip("\n")
        return text or "(the log is empty)"

    def events(self, field_selector: str) -> list[Mapping[str, Any]]:
        """The namespace's events matching `field_selector`, or [] when they cannot be read: they only explain a
        failure the caller reports anyway."""
        try:
            listed = self._json(
                self._core.list_namespaced_event,
                self.namespace,
                shape=answers.EVENT_LIST,
                field_selector=field_selector,
            )
        except (ApiException, *TRANSPORT_ERRORS):
            return []
        return list(listed.get("items") or [])

    def pod_creation_failures(self, name: str, uid: str) -> list[Mapping[str, Any]]:
        """The operator's FailedCreatePod events of the TFJob with `uid`, oldest first: the recorder names the job
        with its uid, so an earlier job of the same name (whose events outlive it) does not count."""
        selector = (
            f"involvedObject.kind={tfjob.TFJOB_KIND},involvedObject.name={name},involvedObject.uid={uid},"
            f"reason={FAILED_CREATE_POD_REASON}"
        )
        return sorted(self.events(selector), key=lambda event: status.event_time(event) or datetime.min)

    def operator_exit_events(self, name: str) -> list[Mapping[str, Any]]:
        """The operator's "Pod: NS.NAME exited with code N" events of the job, non-zero codes, oldest first
        (pkg/controller.v1/common/pod.go:346)."""
        exits = [
            event
            for event in self.events(f"involvedObject.name={name}")
            if event.get("reason") == "ExitedWithCode" and not str(event.get("message", "")).endswith(" code 0")
        ]
        return sorted(exits, key=lambda event: status.event_time(event) or datetime.min)


def in_cluster(
    namespace: str | None = None, *, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE
) -> tuple[k8s.ApiClient, str]:
    """An ApiClient authenticated as the pod's service account (the kubernetes client re-reads the token as it
    rotates), and the namespace: `namespace`, else the pod's own (`namespace_file`).

    Raises:
        TfJobError: not inside a Kubernetes pod (no service host or token), or no namespace to be found.
    """
    from kubernetes import config

    configuration = k8s.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException as error:
        raise TfJobError(
            f"not running inside a Kubernetes pod ({error}): the TFJob of trainer.workers > 1 is created by the "
            "Trainer task on Kubeflow with the pod's service account (KUBERNETES_SERVICE_HOST and "
            "/var/run/secrets/kubernetes.io/serviceaccount/token). Locally, `tfxp run` runs the workers as "
            "processes instead."
        ) from error
    if namespace is None:
        try:
            namespace = namespace_file.read_text().strip()
        except OSError as error:
            raise TfJobError(
                f"cannot tell which namespace this pod runs in: {namespace_file} is unreadable ({error}); pass the "
                "namespace (kubeflow.namespace)."
            ) from error
    api = k8s.ApiClient(configuration)
    pool = guard_pool(api.rest_client.pool_manager)  # redirects within the API server's origin only
    cap_pool(pool, answers.MAX_ANSWER_BYTES, answers.answer_too_large)  # a delete's or an error's answer too
    return api, namespace
