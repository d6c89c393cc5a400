"""Submit, wait for and cancel the Training Operator v1.9 TFJob that runs a multi-worker Trainer on Kubeflow.

The Trainer task's pod creates a `kubeflow.org/v1` TFJob (the manifest is built elsewhere), polls it and its pods,
logs each change as one line (`tfjob x: Running (Worker: 3 active, 1 pending)`), and ends one of four ways: the
operator's Succeeded condition (return), its Failed condition (`TfJobFailedError` naming the first failing replica,
its exit code and reason, and its log tail), pods the API server keeps refusing to create (`TfJobPodsRejectedError`:
a missing service account, the namespace's Pod Security level or ResourceQuota, said at once rather than at the
schedule timeout), or a deadline (`TfJobNotScheduledError` naming the waiting pods and the scheduler's newest
FailedScheduling message; `TfJobTimeoutError`). A KFP retry of the Trainer task finds the earlier attempt's job
under the same name and follows it (`submit`).

`run` deletes the job on every way out, SIGTERM included: Argo stops a run by sending SIGTERM to the task's process
group, SIGKILL after the grace period (argoproj/argo-workflows `workflow/controller/pod/queue.go:118-128`;
`workflow/executor/osspecific/signal_darwin.go:19-25`, which signal_linux.go links to; `command_unix.go:37`), and
keeps the finished pod, so the owner reference to it (`task_pod_owner`) removes the job only when the workflow
itself is deleted. The signal is only recorded (foundation/stop_request.py): a read in flight is abandoned, a
create in flight is waited for (its deadline), and the deletion runs on the normal path with its own deadline, so
the process exits within STOP_BOUND_SECONDS of the SIGTERM (inside Kubernetes' default 30 s grace period), with
the job deleted or a message saying it could not be.

Polling, not watching: each poll is one GET of the job and one LIST of its pods (and of its events while a pod is
missing), so the RBAC stays `get`/`list` (RBAC_RULES) and there is no watch to resume after the API server drops
it. The calls are in tfjob_api.py, the messages of a job that did not succeed in tfjob_diagnosis.py, the reading of
its status in tfjob_status.py.

Example (in the Trainer task's pod):
    api, namespace = in_cluster()
    manifest = bind_tfjob(template, name=..., namespace=namespace, fn_args_uri=..., owner=task_pod_owner())
    outcome = TfJobClient(api, namespace, log=print).run(
        manifest, timeout_seconds=172_800, schedule_timeout_seconds=1_800
    )
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kubernetes import client as k8s

from components.multinode import tfjob_diagnosis as diagnosis
from components.multinode import tfjob_status as status
from components.multinode.tfjob_api import (
    CLEANUP_LOOK_DEADLINE_SECONDS,
    CREATE_DEADLINE_SECONDS,
    DELETE_DEADLINE_SECONDS,
    ApiUnreachableError,
    JobExistsError,
    TfJobApi,
    in_cluster,
    task_pod_owner,
    task_service_account,
)
from components.multinode.tfjob_errors import (
    TfJobConflictError,
    TfJobCrdMissingError,
    TfJobError,
    TfJobFailedError,
    TfJobForbiddenError,
    TfJobGoneError,
    TfJobNotScheduledError,
    TfJobPodsRejectedError,
    TfJobRejectedError,
    TfJobTimeoutError,
)
from foundation.stop_request import StopRequest, StopRequested

__all__ = [
    "SIGTERM_EXIT_STATUS",
    "STOP_BOUND_SECONDS",
    "TfJobClient",
    "TfJobConflictError",
    "TfJobCrdMissingError",
    "TfJobError",
    "TfJobFailedError",
    "TfJobForbiddenError",
    "TfJobGoneError",
    "TfJobNotScheduledError",
    "TfJobOutcome",
    "TfJobPodsRejectedError",
    "TfJobRejectedError",
    "TfJobTimeoutError",
    "in_cluster",
    "task_pod_owner",
    "task_service_account",
]

CREATE_ATTEMPTS = 3
# What a process killed by SIGTERM reports; `run` exits with it after deleting the job.
SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM
# The longest `run` takes from SIGTERM to its exit: the create in flight, the look whether it made the job, the
# deletion (each with its whole-call deadline, tfjob_api.py), and a poll slice of slack. Kubernetes' default grace
# period, after which the kubelet sends SIGKILL, is 30 s.
STOP_BOUND_SECONDS = CREATE_DEADLINE_SECONDS + CLEANUP_LOOK_DEADLINE_SECONDS + DELETE_DEADLINE_SECONDS + 1.0
# Waiting reasons of a scheduled pod worth a log line at once (the kubelet's; the rest are ContainerCreating).
_WAIT_PROBLEMS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}
)


@dataclass(frozen=True)
class TfJobOutcome:
    """A TFJob that succeeded.

    Attributes:
        replicas: each replica type's counts when it succeeded.
        restarts: how many times the operator restarted failed replicas (Restarting conditions seen).
        seconds: how long `wait` waited (the task's clock).
        message: the operator's Succeeded message.
        deleted: whether `run` deleted the job afterwards.
    """

    name: str
    namespace: str
    uid: str
    replicas: Mapping[str, status.ReplicaCounts]
    restarts: int
    seconds: float
    message: str
    deleted: bool = False


# How `run` names the way the wait ended, in its log line about the deletion.
_ENDINGS: tuple[tuple[type[BaseException], str], ...] = (
    (KeyboardInterrupt, "interrupted"),
    (TfJobFailedError, "failed"),
    (TfJobNotScheduledError, "its replicas did not start in time"),
    (TfJobPodsRejectedError, "its pods could not be created"),
    (TfJobTimeoutError, "ran past its deadline"),
    (TfJobError, "could not be followed"),
)


class TfJobClient:
    """Creates, follows and deletes TFJobs in one namespace through the Kubernetes API.

    Args:
        api: a `kubernetes.client.ApiClient` (`in_cluster()` builds one from the pod's service account).
        namespace: where the TFJobs go: the task pod's own namespace, so its owner reference is valid.
        poll_seconds: time between two looks at the job (default 5).
        log: where progress lines go (default: this module's logger at INFO).
        clock, sleep: the time source and the wait between polls (tests pass fakes; by default the wait ends
            at once when `run` receives a stop signal).

    Example:
        client = TfJobClient(api, "kubeflow", log=print)
        name = client.submit(manifest)
        outcome = client.wait(name, timeout_seconds=3600, schedule_timeout_seconds=600)
    """

    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        *,
        poll_seconds: float = 5.0,
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.namespace = namespace
        self.poll_seconds = poll_seconds
        self._api = TfJobApi(api, namespace)
        self._log = log or logging.getLogger(__name__).info
        self._clock = clock
        self._sleep = sleep
        self._stop: StopRequest | None = None  # while `run` runs
        self._uids: dict[str, str] = {}

    def _pause(self, seconds: float) -> None:
        """Waits `seconds` between two calls; raises StopRequested when `run` received a stop signal."""
        if self._sleep is not None:
            self._sleep(seconds)
        elif self._stop is not None:
            self._stop.wait(seconds)
        else:
            time.sleep(seconds)
        if self._stop is not None:
            self._stop.raise_if_requested()

    # -- submit -------------------------------------------------------------------------------------------------

    def submit(self, manifest: Mapping[str, Any]) -> str:
        """Creates the TFJob; returns its name.

        A create whose answer was lost (timeout, dropped connection) is sent again. A 409 AlreadyExists adopts the
        job of that name when it is not being deleted and is this task's: its ownerReferences hold the manifest's
        owner (this task's pod: the lost answer), or it runs the same work (its Worker container's arguments, the
        `--fn-args URI`, equal the manifest's). The second is a KFP retry of the Trainer task: the job's name comes
        from the FnArgs URI, the same for every attempt (KFP's driver runs once, Argo retries the executor only),
        while the retry's pod is a new one; it continues the earlier attempt's training (from its backups), and a
        job that already Succeeded is followed to its end at once. An earlier attempt's job that already Failed is
        deleted (only that one, by uid) and created anew, once. Any other job of that name is refused.

        Raises:
            ValueError: the manifest has no metadata.name, or names another namespace.
            TfJobCrdMissingError: the cluster has no TFJob resource (the Training Operator is not installed).
            TfJobForbiddenError: the service account may not create TFJobs (or delete a failed earlier one).
            TfJobRejectedError: the API server or the operator's webhook refused the manifest.
            TfJobConflictError: a TFJob of that name exists and is not this task's, or is being deleted.
            TfJobError: the API could not be reached, or answered otherwise.
        """
        name = self._manifest_name(manifest)
        troubles = 0
        replaced_failed = False  # an earlier attempt's failed job is replaced once at most
        while True:
            if self._stop is not None:
                self._stop.raise_if_requested()  # a create is waited for once sent: do not send one after a stop
            try:
                try:
                    created = self._api.create(manifest)
                except JobExistsError:
                    existing = self._api.get(name)
                    if self._adopt(manifest, name, existing, may_replace=not replaced_failed):
                        return name
                    replaced_failed = True
                    continue
            except (ApiUnreachableError, TfJobGoneError) as trouble:
                # No answer (the job may exist now); or the job of the 409 went away before the GET.
                troubles += 1
                if troubles == CREATE_ATTEMPTS:
                    raise TfJobError(
                        f"could not create TFJob {self.namespace}/{name}: the Kubernetes API did not answer "
                        f"{CREATE_ATTEMPTS} times ({trouble}).",
                        job=f"{self.namespace}/{name}",
                    ) from trouble
                if isinstance(trouble, TfJobGoneError):
                    self._log(f"tfjob {name}: the job of that name went away meanwhile; creating it again")
                else:
                    self._log(f"tfjob {name}: create got no answer ({trouble}); sending it again")
                self._pause(float(troubles))
                continue
            self._uids[name] = str(created["metadata"]["uid"])
            replicas = ", ".join(
                f"{spec.get('replicas', 1)} {kind}" for kind, spec in status.replica_specs(created).items()
            )
            self._log(f"tfjob {name}: created in namespace {self.namespace} ({replicas})")
            return name

    def _adopt(self, manifest: Mapping[str, Any], name: str, existing: Mapping[str, Any], *, may_replace: bool) -> bool:
        """Whether to follow `existing` (True) or create the job anew (False: the failed earlier job is deleted);
        raises TfJobConflictError when it is not this task's."""
        metadata = existing["metadata"]
        deleting = metadata.get("deletionTimestamp")
        owned = _owned_by_manifest_owner(existing, manifest)
        same_work = _runs_same_work(existing, manifest)
        if deleting or not (owned or same_work):
            raise TfJobConflictError(
                f"a TFJob named {name} already exists in namespace {self.namespace} and is not this task's (created "
                f"{metadata.get('creationTimestamp', '?')}, owned by {_owners(existing)}, running "
                f"{_work(existing)}{'; it is being deleted' if deleting else ''}). If it is left over from an earlier "
                f"run, delete it (`kubectl -n {self.namespace} delete tfjob {name}`) and retry the run; if another run "
                "uses it, let that run finish first.",
                job=f"{self.namespace}/{name}",
            )
        uid = str(metadata["uid"])
        if owned:
            self._uids[name] = uid
            self._log(f"tfjob {name}: already exists and belongs to this task ({_owners(existing)}); following it")
            return True
        current = status.state(existing)
        earlier = (
            f"created {metadata.get('creationTimestamp', '?')} by an earlier attempt of this task "
            f"({_owners(existing)}) for the same work ({_work(existing)})"
        )
        if current == "Failed" and may_replace:
            said = str((status.condition(existing, "Failed") or {}).get("message", "")).strip()
            done = {"deleted": "deleted it", "gone": "it is gone already", "replaced": "another job took the name"}
            outcome = done[self._api.delete(name, uid)]
            self._log(
                f"tfjob {name}: already exists, {earlier}, and it Failed ({said or 'no message'}); {outcome}, "
                "creating it anew"
            )
            return False
        self._uids[name] = uid
        self._log(f"tfjob {name}: already exists, {earlier}: {current}; following the earlier attempt's job")
        return True

    # -- wait ---------------------------------------------------------------------------------------------------

    def wait(self, name: str, *, timeout_seconds: float, schedule_timeout_seconds: float) -> TfJobOutcome:
        """Polls the TFJob until the operator marks it Succeeded; logs every change as one line.

        The schedule timeout counts from the start of the wait, and again from whenever a replica is back to
        Pending (a restart); it stops counting while every replica's container has started. An API server that does
        not answer (transport errors, 429, 5xx) is asked again at the next poll.

        Args:
            timeout_seconds: the longest the job may take in all.
            schedule_timeout_seconds: the longest any replica may wait to start.

        Returns:
            The outcome, once the job's Succeeded condition is True.

        Raises:
            TfJobFailedError: the operator marked the job Failed.
            TfJobNotScheduledError: some replica did not start within `schedule_timeout_seconds`.
            TfJobPodsRejectedError: the API server keeps refusing to create one of its pods (a missing service
                account, the namespace's Pod Security level or ResourceQuota), seen on two polls in a row.
            TfJobTimeoutError: the job ran past `timeout_seconds`, or past its own activeDeadlineSeconds.
            TfJobGoneError: the job was deleted (or replaced) while waiting.
            TfJobForbiddenError: the service account may not read the job or its pods.
        """
        start = self._clock()
        pending_since: float | None = start
        progress = diagnosis.Progress()
        while True:
            try:
                job, pods = self._look(name)
            except ApiUnreachableError as trouble:
                if not progress.unreachable:
                    self._log(f"tfjob {name}: the Kubernetes API did not answer ({trouble}); trying again")
                progress.unreachable = str(trouble)
            else:
                if progress.unreachable:
                    self._log(f"tfjob {name}: the Kubernetes API answers again")
                    progress.unreachable = ""
                self._report(name, job, pods, progress)
                current = status.state(job)
                if current == "Succeeded":
                    return TfJobOutcome(
                        name=name,
                        namespace=self.namespace,
                        uid=self._uids[name],
                        replicas=status.replica_counts(job, pods),
                        restarts=progress.restarts,
                        seconds=self._clock() - start,
                        message=str((status.condition(job, "Succeeded") or {}).get("message", "")),
                    )
                if current == "Failed":
                    raise diagnosis.failure(self._api, name, job, progress)
                self._check_pod_creation(name, job, pods, progress)
                if status.started_count(job, pods) >= status.expected_replicas(job):
                    pending_since = None
                elif pending_since is None:
                    pending_since = self._clock()
            now = self._clock()
            if pending_since is not None and now - pending_since >= schedule_timeout_seconds:
                raise diagnosis.not_scheduled(self._api, name, progress, schedule_timeout_seconds)
            if now - start >= timeout_seconds:
                raise diagnosis.timed_out(self._api, name, progress, timeout_seconds)
            self._pause(max(0.0, min(self.poll_seconds, start + timeout_seconds - now)))

    def _look(self, name: str) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
        job = self._api.get(name)
        uid = str(job["metadata"]["uid"])
        known = self._uids.setdefault(name, uid)
        if uid != known:
            raise TfJobGoneError(
                f"TFJob {self.namespace}/{name} was replaced by another job of the same name (uid {uid}, this task's "
                f"was {known}) while the task waited for it; another run uses that name.",
                job=f"{self.namespace}/{name}",
            )
        return job, status.controlled_pods(self._api.list_pods(name), known)

    def _check_pod_creation(
        self, name: str, job: Mapping[str, Any], pods: list[Mapping[str, Any]], progress: diagnosis.Progress
    ) -> None:
        """Fails the wait when the API server keeps refusing the operator one of the job's pods.

        When the pod create fails, the operator records a FailedCreatePod Warning on the job and returns the error
        (pkg/controller.v1/control/pod_control.go:152-154, common/pod.go:455-470 and 319-324, common/job.go:
        338-342), so Reconcile fails (tensorflow/tfjob_controller.go:154-157) before the job's status is written
        (job.go:354-361): such a job shows no condition at all, and it is not a missing operator. controller-runtime
        requeues a failed Reconcile with exponential backoff (client-go's default controller rate limiter, 5 ms
        doubling; not mirrored here), so by the next poll (5 s) the operator has tried again. A single refusal may
        pass (a webhook timing out, a quota freed by a pod that is going away, a service account created a moment
        later); a missing service account, a Pod Security level and an exhausted quota do not. So the wait fails
        once the same pod was refused and still does not exist on two polls in a row, well before the schedule
        timeout, which would otherwise blame capacity. Only a job with fewer pods than replicas is looked at (one
        events LIST per poll): a refused pod is a missing one. The gang scheduler's PodGroup events (volcano's
        Unschedulable) are about capacity and are not FailedCreatePod on the TFJob: the schedule timeout handles
        them."""
        if len(pods) >= status.expected_replicas(job):
            progress.refused = ""
            return
        found = diagnosis.pod_creation_refusal(self._api, name, self._uids[name], pods)
        if found is None:
            progress.refused = ""
            return
        pod, event = found
        key = pod or str(event.get("message", ""))
        if key == progress.refused:
            raise diagnosis.pods_rejected(self.namespace, name, pod, event, job)
        if not progress.refused:
            self._log(f"tfjob {name}: the operator could not create {pod or 'a pod'}: {event.get('message')}")
        progress.refused = key

    def _report(
        self, name: str, job: Mapping[str, Any], pods: list[Mapping[str, Any]], progress: diagnosis.Progress
    ) -> None:
        progress.job, progress.pods = job, pods
        current = status.state(job)
        if current == "Restarting" and progress.state != "Restarting":
            progress.restarts += 1
            # The operator deletes a failed pod as it restarts it (pod.go:350-366), usually before a poll sees it;
            # what it recorded (pod.go:346) says which replica exited how.
            for event in self._api.operator_exit_events(name):
                said = (str(event.get("metadata", {}).get("name")), str(event.get("message")))
                if said not in progress.reported:
                    progress.reported.add(said)
                    self._log(f"tfjob {name}: the operator recorded: {event.get('message')}")
        progress.state = current
        line = status.status_line(name, job, pods)
        if line != progress.line:
            self._log(line)
            progress.line = line
        for waiting in status.not_started(pods):
            if not waiting.reason or (waiting.scheduled and waiting.reason not in _WAIT_PROBLEMS):
                continue
            if (waiting.pod, waiting.reason) not in progress.reported:
                progress.reported.add((waiting.pod, waiting.reason))
                self._log(f"tfjob {name}: pod {waiting.describe()}")
        for exited in status.container_exits(job, pods):
            key = (exited.pod_uid, exited.finished_at, exited.exit_code)
            if key not in progress.exits:
                self._log(f"tfjob {name}: {exited.describe()}")
                tail = self._api.log_tail(exited.pod, previous=exited.previous)
                progress.exits[key] = (exited, tail)

    # -- delete and run -----------------------------------------------------------------------------------------

    def delete(self, name: str, *, uid: str | None = None) -> bool:
        """Deletes the TFJob (its pods and services follow through their owner references); returns False when
        it was already gone. Deleting twice is harmless.

        Background propagation: the API server removes the job at once and the garbage collector its pods, so the
        call returns within the SIGTERM grace period and a retried task may reuse the name at once. Foreground would
        keep the job (with a deletionTimestamp, which already stops the operator, tfjob_controller.go:144) until
        every pod had terminated: nothing more is gained, and the name stays taken meanwhile.

        Args:
            uid: delete only the job with this uid (default: the one this client created or adopted), never a
                newer job that took the name.

        Raises:
            TfJobForbiddenError: the service account may not delete TFJobs.
            TfJobError: the API refused otherwise or could not be reached.
        """
        outcome = self._api.delete(name, uid or self._uids.get(name))
        if outcome == "replaced":
            self._log(f"tfjob {name}: the name belongs to another job now; left that one alone")
        return outcome == "deleted"

    def run(
        self,
        manifest: Mapping[str, Any],
        *,
        timeout_seconds: float,
        schedule_timeout_seconds: float,
        keep_on_success: bool = False,
    ) -> TfJobOutcome:
        """`submit` + `wait`, deleting the job on every way out: failure, deadline, KeyboardInterrupt, and SIGTERM,
        after which the process exits with status 143 (SystemExit).

        A succeeded job is deleted too (unless `keep_on_success`): the chief wrote the model to the Trainer's
        artifact, nothing else reads the job, and the operator's default cleanPodPolicy None
        (tensorflow_defaults.go:52-53) would keep every worker pod until the workflow is deleted.

        SIGTERM and SIGINT are recorded while `run` runs in the main thread (Python delivers signals there only;
        elsewhere they are not caught, and the log says so), and the previous handlers come back afterwards. A stop
        signal abandons the read in flight, waits for a create in flight (its deadline), deletes the job with the
        deletion's own deadline and exits within STOP_BOUND_SECONDS: SIGTERM with status 143 (SystemExit), SIGINT
        as KeyboardInterrupt. A second signal during the deletion is recorded and changes nothing.

        Raises:
            What `submit` and `wait` raise; the error's message then also says whether the job was deleted.
            SystemExit: on SIGTERM, after deleting the job.
        """
        name = self._manifest_name(manifest)
        submitted = finished = False
        with StopRequest() as stop:
            if not stop.installed:
                self._log(f"tfjob {name}: not in the main thread, so a SIGTERM will not delete the job")
            self._stop = self._api.stop = stop
            try:
                self.submit(manifest)
                submitted = True
                outcome = self.wait(
                    name, timeout_seconds=timeout_seconds, schedule_timeout_seconds=schedule_timeout_seconds
                )
                stop.raise_if_requested()  # a signal during the last poll still stops the run: delete the job
                if keep_on_success:
                    finished = True
                    return outcome
                deleted = self._delete_after_success(name)
                finished = True
                return replace(outcome, deleted=deleted)
            except BaseException as error:
                if not finished:
                    self._clean_up(error, manifest, name, submitted=submitted)
                if isinstance(error, StopRequested):
                    if error.signum == signal.SIGINT:
                        raise KeyboardInterrupt from None
                    raise SystemExit(error.exit_status) from None
                raise
            finally:
                self._stop = self._api.stop = None

    def _delete_after_success(self, name: str) -> bool:
        try:
            deleted = self.delete(name)
        except TfJobError as problem:
            self._log(
                f"tfjob {name}: succeeded, but could not be deleted ({problem}); delete it with "
                f"`kubectl -n {self.namespace} delete tfjob {name}`"
            )
            return False
        self._log(f"tfjob {name}: succeeded; deleted it (its pods go with it)")
        return deleted

    def _clean_up(self, error: BaseException, manifest: Mapping[str, Any], name: str, *, submitted: bool) -> None:
        interrupted = isinstance(error, (StopRequested, KeyboardInterrupt))
        if not submitted and not (interrupted and self._exists_and_is_ours(manifest, name)):
            return  # nothing was created (or it is not ours to delete)
        if isinstance(error, StopRequested):
            why = "SIGTERM (the run is being stopped)" if error.signum == signal.SIGTERM else "interrupted"
        else:
            stopped = f"stopped by {type(error).__name__}"
            why = next((text for kind, text in _ENDINGS if isinstance(error, kind)), stopped)
        job_id = f"{self.namespace}/{name}"
        try:
            note = f"The TFJob {job_id} was deleted." if self.delete(name) else f"The TFJob {job_id} was already gone."
        except TfJobError as problem:
            note = (
                f"The TFJob {job_id} could not be deleted ({problem}); delete it with "
                f"`kubectl -n {self.namespace} delete tfjob {name}`."
            )
        self._log(f"tfjob {name}: {why}. {note}")
        if isinstance(error, TfJobError):
            error.cleanup = note

    def _exists_and_is_ours(self, manifest: Mapping[str, Any], name: str) -> bool:
        # Interrupted while creating: the job may exist; delete it only if it is this task's as `submit` adopts.
        try:
            existing = self._api.get(name, cleanup=True)
        except (TfJobError, ApiUnreachableError):
            return False
        return _owned_by_manifest_owner(existing, manifest) or _runs_same_work(existing, manifest)

    def _manifest_name(self, manifest: Mapping[str, Any]) -> str:
        metadata = manifest.get("metadata") or {}
        name = metadata.get("name")
        if not name:
            raise ValueError("the TFJob manifest has no metadata.name (generateName is not supported: run needs it)")
        if metadata.get("namespace") not in (None, self.namespace):
            raise ValueError(
                f"the TFJob manifest names namespace {metadata['namespace']}, but this client creates jobs in "
                f"{self.namespace} (the task pod's namespace, which its owner reference requires)"
            )
        return str(name)


def _owner_uids(obj: Mapping[str, Any]) -> set[str]:
    return {str(ref.get("uid")) for ref in (obj.get("metadata") or {}).get("ownerReferences") or () if ref.get("uid")}


def _owned_by_manifest_owner(existing: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """Whether `existing` carries one of the manifest's owner references (this task's pod): a manifest without any
    proves nothing, so it adopts nothing."""
    wanted = _owner_uids(manifest)
    return bool(wanted) and bool(wanted & _owner_uids(existing))


def _runs_same_work(existing: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """Whether `existing` runs the manifest's work: its Worker container's arguments (`--fn-args URI`) are the
    manifest's; a manifest without any proves nothing."""
    wanted = status.worker_args(manifest)
    return bool(wanted) and status.worker_args(existing) == wanted


def _work(job: Mapping[str, Any]) -> str:
    """`--fn-args URI` of the job's workers, as a reader looks for it."""
    return " ".join(status.worker_args(job)) or "no worker arguments"


def _owners(obj: Mapping[str, Any]) -> str:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return ", ".join(f"{ref.get('kind')} {ref.get('name')} (uid {ref.get('uid')})" for ref in refs) or "nothing"
