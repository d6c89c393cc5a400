"""Following a submitted TFJob poll by poll until it succeeds, fails or misses a deadline, each change one log line.

`TfJobClient.wait` (components/multinode/tfjob_client.py) runs a `TfJobFollower`: each poll is one GET of the job and
one LIST of its pods (and of its events while a pod is missing), read by tfjob_status.py; the progress it keeps
(`tfjob_diagnosis.Progress`) is what the error of a job that did not succeed is built from (tfjob_diagnosis.py).

A poll the API server gives no readable answer to (no answer, 429/5xx, or one tfxp cannot read:
components/multinode/api_answers.py) is tried again after a wait that doubles from `poll_seconds` up to
MAX_TROUBLE_PAUSE_SECONDS, UNANSWERED_POLLS times in a row at most (about 8 minutes at the default 5 s: an API
server restart or a control-plane upgrade fits in it); then the wait ends with `TfJobUnansweredError`, and the job
is left running: tfxp does not know its state, and a retry of the task follows it again (`tfjob_submit`).

Example:
    follower = TfJobFollower(TfJobApi(api, namespace), {}, poll_seconds=5.0, log=print,
                             clock=time.monotonic, pause=time.sleep)
    outcome = follower.wait("tfxp-train-3f1e", timeout_seconds=3600, schedule_timeout_seconds=600)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from components.multinode import tfjob_diagnosis as diagnosis
from components.multinode import tfjob_status as status
from components.multinode.tfjob_api import ApiUnreachableError, TfJobApi
from components.multinode.tfjob_errors import TfJobGoneError, TfJobUnansweredError, delete_command

UNANSWERED_POLLS = 12
MAX_TROUBLE_PAUSE_SECONDS = 60.0

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


@dataclass(frozen=True)
class TfJobFollower:
    """Polls the TFJobs of one namespace until each one it waits for ends.

    Attributes:
        api: the API calls, in the namespace where the jobs are (`api.namespace`).
        uids: the uid of each job by name, shared with the client that created or adopted it; the first look at a
            job it does not hold records the job's, and a later look at another uid is a replaced job.
        poll_seconds: time between two looks at the job.
        log: where progress lines go.
        clock: the time source of the deadlines.
        pause: waits between two polls (the client's: it ends at once, raising, on a stop signal).
    """

    api: TfJobApi
    uids: dict[str, str]
    _: KW_ONLY
    poll_seconds: float
    log: Callable[[str], None]
    clock: Callable[[], float]
    pause: Callable[[float], None]

    @property
    def namespace(self) -> str:
        """Where the jobs are: the API's namespace."""
        return self.api.namespace

    def wait(self, name: str, *, timeout_seconds: float, schedule_timeout_seconds: float) -> TfJobOutcome:
        """Polls the TFJob until the operator marks it Succeeded (`TfJobClient.wait` says what it raises when not).

        The schedule timeout counts from the start of the wait, and again from whenever a replica is back to
        Pending (a restart); it stops counting while every replica's container has started.
        """
        start = self.clock()
        pending_since: float | None = start
        progress = diagnosis.Progress()
        while True:
            looked = self._poll(name, progress)
            if looked is not None:
                job, pods = looked
                outcome = self._outcome_if_ended(name, job, pods, progress, start)
                if outcome is not None:
                    return outcome
                self._check_pod_creation(name, job, pods, progress)
                if status.started_count(job, pods) >= status.expected_replicas(job):
                    pending_since = None
                elif pending_since is None:
                    pending_since = self.clock()
            now = self.clock()
            if pending_since is not None and now - pending_since >= schedule_timeout_seconds:
                raise diagnosis.not_scheduled(self.api, name, progress, schedule_timeout_seconds)
            if now - start >= timeout_seconds:
                raise diagnosis.timed_out(self.api, name, progress, timeout_seconds)
            self.pause(max(0.0, min(self._next_pause(progress), start + timeout_seconds - now)))

    def _next_pause(self, progress: diagnosis.Progress) -> float:
        """`poll_seconds`, or while the API gives no readable answer, twice the wait before the last try."""
        if not progress.unanswered:
            return self.poll_seconds
        return min(
            self.poll_seconds * 2 ** (progress.unanswered - 1), max(MAX_TROUBLE_PAUSE_SECONDS, self.poll_seconds)
        )

    def _poll(
        self, name: str, progress: diagnosis.Progress
    ) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]] | None:
        """One look at the job and its pods, reported; None when the API server did not answer (said once, and
        said again when it answers)."""
        try:
            job, pods = self._look(name)
        except ApiUnreachableError as trouble:
            if not progress.unanswered:
                self.log(f"tfjob {name}: the Kubernetes API did not answer ({trouble}); trying again")
                progress.unanswered_since = self.clock()
            progress.unreachable = str(trouble)
            progress.unanswered += 1
            if progress.unanswered >= UNANSWERED_POLLS:
                raise self._lost_sight(name, progress) from None
            return None
        if progress.unanswered:
            self.log(f"tfjob {name}: the Kubernetes API answers again")
            progress.unreachable, progress.unanswered = "", 0
        self._report(name, job, pods, progress)
        return job, pods

    def _lost_sight(self, name: str, progress: diagnosis.Progress) -> TfJobUnansweredError:
        job_id = f"{self.namespace}/{name}"
        seconds = self.clock() - progress.unanswered_since
        return TfJobUnansweredError(
            f"the Kubernetes API gave no readable answer about TFJob {job_id} on {progress.unanswered} polls in a row "
            f"({seconds:.0f} s; the last: {progress.unreachable}), so the task stopped following it and left it "
            "running: tfxp does not know its state, and deletes a job only when it decides to stop it. Look at it "
            f"with `kubectl -n {self.namespace} get tfjob {name}`; a retry of this task follows it again, and "
            f"`{delete_command(self.namespace, name)}` deletes it.",
            job=job_id,
        )

    def _outcome_if_ended(
        self,
        name: str,
        job: Mapping[str, Any],
        pods: list[Mapping[str, Any]],
        progress: diagnosis.Progress,
        start: float,
    ) -> TfJobOutcome | None:
        """The outcome of a job that Succeeded; raises the diagnosis of one that Failed; None while it runs."""
        current = status.state(job)
        if current == "Succeeded":
            return TfJobOutcome(
                name=name,
                namespace=self.namespace,
                uid=self.uids[name],
                replicas=status.replica_counts(job, pods),
                restarts=progress.restarts,
                seconds=self.clock() - start,
                message=str((status.condition(job, "Succeeded") or {}).get("message", "")),
            )
        if current == "Failed":
            raise diagnosis.failure(self.api, name, job, progress)
        return None

    def _look(self, name: str) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
        job = self.api.get(name)
        uid = str(job["metadata"]["uid"])
        known = self.uids.setdefault(name, uid)
        if uid != known:
            raise TfJobGoneError(
                f"TFJob {self.namespace}/{name} was replaced by another job of the same name (uid {uid}, this task's "
                f"was {known}) while the task waited for it; another run uses that name.",
                job=f"{self.namespace}/{name}",
            )
        return job, status.controlled_pods(self.api.list_pods(name), known)

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
        found = diagnosis.pod_creation_refusal(self.api, name, self.uids[name], pods)
        if found is None:
            progress.refused = ""
            return
        pod, event = found
        key = pod or str(event.get("message", ""))
        if key == progress.refused:
            raise diagnosis.pods_rejected(self.namespace, name, pod, event, job)
        if not progress.refused:
            self.log(f"tfjob {name}: the operator could not create {pod or 'a pod'}: {event.get('message')}")
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
            for event in self.api.operator_exit_events(name):
                said = (str(event.get("metadata", {}).get("name")), str(event.get("message")))
                if said not in progress.reported:
                    progress.reported.add(said)
                    self.log(f"tfjob {name}: the operator recorded: {event.get('message')}")
        progress.state = current
        line = status.status_line(name, job, pods)
        if line != progress.line:
            self.log(line)
            progress.line = line
        for waiting in status.not_started(pods):
            if not waiting.reason or (waiting.scheduled and waiting.reason not in _WAIT_PROBLEMS):
                continue
            if (waiting.pod, waiting.reason) not in progress.reported:
                progress.reported.add((waiting.pod, waiting.reason))
                self.log(f"tfjob {name}: pod {waiting.describe()}")
        for exited in status.container_exits(job, pods):
            key = (exited.pod_uid, exited.finished_at, exited.exit_code)
            if key not in progress.exits:
                self.log(f"tfjob {name}: {exited.describe()}")
                tail = self.api.log_tail(exited.pod, previous=exited.previous)
                progress.exits[key] = (exited, tail)
