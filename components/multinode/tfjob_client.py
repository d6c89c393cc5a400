"""Submit, wait for and cancel the Training Operator v1.9 TFJob that runs a multi-worker Trainer on Kubeflow.

The Trainer task's pod creates a `kubeflow.org/v1` TFJob (the manifest is built elsewhere), polls it and its pods,
logs each change as one line (`tfjob x: Running (Worker: 3 active, 1 pending)`), and ends one of four ways: the
operator's Succeeded condition (return), its Failed condition (`TfJobFailedError` naming the first failing replica,
its exit code and reason, and its log tail), pods the API server keeps refusing to create (`TfJobPodsRejectedError`:
a missing service account, the namespace's Pod Security level or ResourceQuota, said at once rather than at the
schedule timeout), or a deadline (`TfJobNotScheduledError` naming the waiting pods and the scheduler's newest
FailedScheduling message; `TfJobTimeoutError`). A KFP retry of the Trainer task finds the earlier attempt's job
under the same name and follows it (`submit`).

`run` deletes the job when it decides to stop it, and only then: a stop signal or an interrupt (a cancel), a job it
reports Failed, a deadline it set, pods the API keeps refusing, an API refusal it names (a `TfJobError`). It leaves
the job running when it lost sight of it (`TfJobUnansweredError`: the API gave no readable answer, poll after
poll) and after an error it did not expect (any other exception, which it wraps into a `TfJobError` saying so): a
multi-day job is not deleted as the cleanup of something tfxp does not understand, and the message gives the
`kubectl` command that deletes it by hand.

A cancel is a SIGTERM: Argo stops a run by sending it to the task's process group, SIGKILL after the grace period
(argoproj/argo-workflows `workflow/controller/pod/queue.go:118-128`;
`workflow/executor/osspecific/signal_darwin.go:19-25`, which signal_linux.go links to; `command_unix.go:37`), and
keeps the finished pod, so the owner reference to it (`task_pod_owner`) removes the job only when the workflow
itself is deleted. The signal is only recorded (foundation/stop_request.py): a read in flight is abandoned, a
create in flight is waited for (its deadline), and the deletion runs on the normal path with its own deadline, so
the process exits within STOP_BOUND_SECONDS of the SIGTERM (inside Kubernetes' default 30 s grace period), with
the job deleted or a message saying it could not be.

Polling, not watching: each poll is one GET of the job and one LIST of its pods (and of its events while a pod is
missing), so the RBAC stays `get`/`list` (tfjob_rbac.RBAC_RULES) and there is no watch to resume after the API
server drops it. This module holds the client and its stop handling; the create and adoption are in tfjob_submit.py,
the polling in tfjob_follow.py, the calls in tfjob_api.py, the messages of a job that did not succeed in
tfjob_diagnosis.py, the reading of its status in tfjob_status.py.

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
from dataclasses import replace
from typing import Any

from kubernetes import client as k8s

from components.multinode.task_pod import task_pod_owner, task_service_account
from components.multinode.tfjob_api import (
    CLEANUP_LOOK_DEADLINE_SECONDS,
    CREATE_DEADLINE_SECONDS,
    DELETE_DEADLINE_SECONDS,
    ApiUnreachableError,
    TfJobApi,
    in_cluster,
)
from components.multinode.tfjob_errors import (
    TfJobError,
    TfJobFailedError,
    TfJobNotScheduledError,
    TfJobPodsRejectedError,
    TfJobTimeoutError,
    TfJobUnansweredError,
    delete_command,
)
from components.multinode.tfjob_follow import TfJobFollower, TfJobOutcome
from components.multinode.tfjob_submit import TfJobSubmitter, is_this_tasks
from foundation.stop_request import StopRequest, StopRequested

__all__ = [
    "SIGTERM_EXIT_STATUS",
    "STOP_BOUND_SECONDS",
    "TfJobClient",
    "in_cluster",
    "task_pod_owner",
    "task_service_account",
]

# What a process killed by SIGTERM reports; `run` exits with it after deleting the job.
SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM
# The longest `run` takes from SIGTERM to its exit: the create in flight, the look whether it made the job, the
# deletion (each with its whole-call deadline, tfjob_api.py), and a poll slice of slack. Kubernetes' default grace
# period, after which the kubelet sends SIGKILL, is 30 s.
STOP_BOUND_SECONDS = CREATE_DEADLINE_SECONDS + CLEANUP_LOOK_DEADLINE_SECONDS + DELETE_DEADLINE_SECONDS + 1.0

# How `run` names the way the wait ended, in its log line about the deletion.
_ENDINGS: tuple[tuple[type[BaseException], str], ...] = (
    (KeyboardInterrupt, "interrupted"),
    (TfJobFailedError, "failed"),
    (TfJobNotScheduledError, "its replicas did not start in time"),
    (TfJobPodsRejectedError, "its pods could not be created"),
    (TfJobTimeoutError, "ran past its deadline"),
    (TfJobUnansweredError, "lost sight of it (the Kubernetes API gave no readable answer)"),
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
        self._raise_if_stopped()

    def _raise_if_stopped(self) -> None:
        """Raises StopRequested when `run` received a stop signal."""
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
        submitter = TfJobSubmitter(
            self._api, self._uids, log=self._log, pause=self._pause, raise_if_stopped=self._raise_if_stopped
        )
        return submitter.submit(manifest, name)

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
        follower = TfJobFollower(
            self._api, self._uids, poll_seconds=self.poll_seconds, log=self._log, clock=self._clock, pause=self._pause
        )
        return follower.wait(name, timeout_seconds=timeout_seconds, schedule_timeout_seconds=schedule_timeout_seconds)

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
                note = self._clean_up(error, manifest, name, submitted=submitted) if not finished else ""
                if isinstance(error, StopRequested):
                    if error.signum == signal.SIGINT:
                        raise KeyboardInterrupt from None
                    raise SystemExit(error.exit_status) from None
                if note and isinstance(error, Exception) and not isinstance(error, TfJobError):
                    job_id = f"{self.namespace}/{name}"
                    raise TfJobError(
                        f"following TFJob {job_id} stopped on an unexpected {type(error).__name__}: {error}. {note}",
                        job=job_id,
                    ) from error
                raise
            finally:
                self._stop = self._api.stop = None

    def _delete_after_success(self, name: str) -> bool:
        try:
            deleted = self.delete(name)
        except TfJobError as problem:
            self._log(
                f"tfjob {name}: succeeded, but could not be deleted ({problem}); delete it with "
                f"`{delete_command(self.namespace, name)}`"
            )
            return False
        self._log(f"tfjob {name}: succeeded; deleted it (its pods go with it)")
        return deleted

    def _clean_up(self, error: BaseException, manifest: Mapping[str, Any], name: str, *, submitted: bool) -> str:
        """Deletes the job when `error` is tfxp's decision to stop it (`_stops_the_job`), else leaves it; logs which
        and returns the note saying so ("" when nothing was created, or it is not this task's)."""
        interrupted = isinstance(error, (StopRequested, KeyboardInterrupt))
        if not submitted and not (interrupted and self._exists_and_is_ours(manifest, name)):
            return ""  # nothing was created (or it is not ours to delete)
        if isinstance(error, StopRequested):
            why = "SIGTERM (the run is being stopped)" if error.signum == signal.SIGTERM else "interrupted"
        else:
            stopped = f"stopped by an unexpected {type(error).__name__}"
            why = next((text for kind, text in _ENDINGS if isinstance(error, kind)), stopped)
        job_id = f"{self.namespace}/{name}"
        if not _stops_the_job(error):
            note = (
                f"The TFJob {job_id} was left running (tfxp deletes a job only when it decides to stop it); delete "
                f"it by hand with `{delete_command(self.namespace, name)}` if it should not go on."
            )
            self._log(f"tfjob {name}: {why}. {note}")
            return note  # TfJobUnansweredError says it already; another exception is wrapped with it by `run`
        try:
            note = f"The TFJob {job_id} was deleted." if self.delete(name) else f"The TFJob {job_id} was already gone."
        except TfJobError as problem:
            command = delete_command(self.namespace, name)
            note = f"The TFJob {job_id} could not be deleted ({problem}); delete it with `{command}`."
        self._log(f"tfjob {name}: {why}. {note}")
        if isinstance(error, TfJobError):
            error.cleanup = note
        return note

    def _exists_and_is_ours(self, manifest: Mapping[str, Any], name: str) -> bool:
        # Interrupted while creating: the job may exist; delete it only if it is this task's as `submit` adopts.
        try:
            existing = self._api.get(name, cleanup=True)
        except (TfJobError, ApiUnreachableError):
            return False
        return is_this_tasks(existing, manifest)

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


def _stops_the_job(error: BaseException) -> bool:
    """Whether the way `run` ended is tfxp's decision to stop the job, so that it deletes it: a stop signal or an
    interrupt (a cancel), or a `TfJobError` with the cause it names (the job Failed, a deadline, refused pods, an API
    refusal); not one where it lost sight of the job (`TfJobUnansweredError`), nor an exception it did not expect."""
    if isinstance(error, (StopRequested, KeyboardInterrupt)):
        return True
    return isinstance(error, TfJobError) and not isinstance(error, TfJobUnansweredError)
