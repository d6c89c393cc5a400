"""Reading a Training Operator v1.9 TFJob's state from the plain JSON the Kubernetes API returns (no client calls).

The TFJob's `status` (kubeflow/trainer release-1.9 @ 3a3a1da, `pkg/apis/kubeflow.org/v1/common_types.go:46-160`)
holds `conditions` (Created, Running, Restarting, Succeeded, Suspended, Failed; each with `status` "True"/"False",
`reason` such as `TFJobRunning`, and `message`) and `replicaStatuses` keyed by replica type (`Worker`, `Chief`, ...)
with `active` (Running pods), `succeeded` and `failed` counts (`pkg/core/status.go:33-50`). Pending pods count in
none of them, so the pending figure comes from the job's pods, which the operator labels with
`training.kubeflow.org/job-name`, `.../replica-type` (lower-case) and `.../replica-index`
(`pkg/controller.v1/common/pod.go:401-404`, `job_controller.go:236-241`).

Example:
    status_line("trainer-x", job, pods)  # "tfjob trainer-x: Running (Worker: 3 active, 1 pending)"
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from components.multinode.tfjob import CONTAINER_NAME, REPLICA_TYPE

# common_types.go:23-37 and the TFJob controller's name (tfjob_controller.go:61), the operator-name label's value.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
TFJOB_CONTROLLER_NAME = "tfjob-controller"
# The order UpdateJobStatus walks the replica types in (tfjob_controller.go:419-425).
REPLICA_TYPE_ORDER = ("Chief", "Evaluator", "Master", "PS", "Worker")
# The operator's Failed messages for its own limits (pkg/controller.v1/common/job.go:210,212).
BACKOFF_LIMIT_MESSAGE = "has reached the specified backoff limit"
ACTIVE_DEADLINE_MESSAGE = "was active longer than specified deadline"

# Shown when a TFJob has no True condition yet: the operator adds Created when it first sees the job
# (tfjob_controller.go:652-661), so a job without it has not been picked up.
NOT_PICKED_UP = "Submitted"


def pod_label_selector(job_name: str) -> str:
    """The label selector of a TFJob's pods: the labels the operator selects them by (job_controller.go:236-241)."""
    return f"{JOB_NAME_LABEL}={job_name},{OPERATOR_NAME_LABEL}={TFJOB_CONTROLLER_NAME}"


def controlled_pods(pods: Iterable[Mapping[str, Any]], job_uid: str) -> list[Mapping[str, Any]]:
    """The pods whose controller is the TFJob with `job_uid`: a deleted job of the same name may leave terminating
    pods with the same labels, which the operator ignores too (tfjob_controller.go:292, JobControlledPodList)."""
    return [
        pod
        for pod in pods
        if any(
            ref.get("controller") and ref.get("uid") == job_uid
            for ref in pod.get("metadata", {}).get("ownerReferences") or ()
        )
    ]


def true_condition_types(job: Mapping[str, Any]) -> list[str]:
    """The types of the job's True conditions, oldest first (setCondition appends, pkg/util/status.go:103-124)."""
    conditions = (job.get("status") or {}).get("conditions") or ()
    return [str(c.get("type")) for c in conditions if c.get("status") == "True"]


def condition(job: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    """The job's condition of `condition_type` when it is True, else None."""
    for item in (job.get("status") or {}).get("conditions") or ():
        if item.get("type") == condition_type and item.get("status") == "True":
            return item
    return None


def state(job: Mapping[str, Any]) -> str:
    """The job's state: Failed or Succeeded once either is True (they are final, pkg/util/status.go:35-48,105), else
    the newest True condition (what `kubectl get tfjob` shows, tensorflow_types.go:46), else `Submitted`."""
    types = true_condition_types(job)
    for final in ("Failed", "Succeeded"):
        if final in types:
            return final
    return types[-1] if types else NOT_PICKED_UP


@dataclass(frozen=True)
class ReplicaCounts:
    """One replica type's pods: `active`, `succeeded`, `failed` as the operator counts them, `pending` from the pods.

    Attributes:
        expected: `spec.tfReplicaSpecs[type].replicas` (1 when unset, tensorflow_defaults.go:64-66).
    """

    expected: int
    active: int = 0
    pending: int = 0
    succeeded: int = 0
    failed: int = 0

    def describe(self) -> str:
        parts = [
            f"{count} {label}"
            for label, count in (
                ("active", self.active),
                ("pending", self.pending),
                ("succeeded", self.succeeded),
                ("failed", self.failed),
            )
            if count
        ]
        return ", ".join(parts) or "no pods yet"


def replica_specs(job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """`spec.tfReplicaSpecs` in the operator's order of replica types (unknown types last, by name)."""
    specs = (job.get("spec") or {}).get("tfReplicaSpecs") or {}
    order = {name: index for index, name in enumerate(REPLICA_TYPE_ORDER)}
    return {name: specs[name] for name in sorted(specs, key=lambda n: (order.get(n, len(order)), n))}


def expected_replicas(job: Mapping[str, Any]) -> int:
    """How many pods the job runs in all."""
    return sum(int(spec.get("replicas", 1)) for spec in replica_specs(job).values())


def replica_of(pod: Mapping[str, Any], job: Mapping[str, Any]) -> tuple[str, int]:
    """The pod's replica type (as spelled in the job's spec) and index, from the operator's labels."""
    labels = pod.get("metadata", {}).get("labels") or {}
    lowered = str(labels.get(REPLICA_TYPE_LABEL, ""))
    spelled = {name.lower(): name for name in replica_specs(job)}
    index = str(labels.get(REPLICA_INDEX_LABEL, "-1"))
    return spelled.get(lowered, lowered), int(index) if index.lstrip("-").isdigit() else -1


def worker_args(job: Mapping[str, Any]) -> tuple[str, ...]:
    """The arguments of the Worker replica's `tensorflow` container (`--fn-args URI` in a tfxp job: the work it
    runs), or () when it has none."""
    spec = ((job.get("spec") or {}).get("tfReplicaSpecs") or {}).get(REPLICA_TYPE) or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or ()
    for container in containers:
        if container.get("name") == CONTAINER_NAME:
            return tuple(str(arg) for arg in container.get("args") or ())
    return ()


def is_pending(pod: Mapping[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Pending" and not pod.get("metadata", {}).get("deletionTimestamp")


def replica_counts(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, ReplicaCounts]:
    """Each replica type's counts. While the job runs they come from its pods, counted as the operator counts them
    (Running without a deletionTimestamp is active, pkg/core/status.go:33-50), since its `replicaStatuses` lag the
    pods by a reconcile; once it is finished, from `replicaStatuses`: the operator's last word, which outlives pods
    that cleanPodPolicy deletes. Pending pods always come from the pods."""
    finished = state(job) in ("Succeeded", "Failed")
    statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    tallies: dict[str, dict[str, int]] = {}
    for pod in pods:
        phase = pod.get("status", {}).get("phase")
        deleting = bool(pod.get("metadata", {}).get("deletionTimestamp"))
        key = {"Pending": "pending", "Running": "active", "Succeeded": "succeeded", "Failed": "failed"}.get(phase)
        if key in ("pending", "active") and deleting:
            key = "failed" if key == "active" else None  # a terminating Running pod counts as failed (status.go:37-41)
        if key:
            tally = tallies.setdefault(replica_of(pod, job)[0], {})
            tally[key] = tally.get(key, 0) + 1
    counts = {}
    for replica_type, spec in replica_specs(job).items():
        tally = tallies.get(replica_type, {})
        source = statuses.get(replica_type) or {} if finished else tally
        counts[replica_type] = ReplicaCounts(
            expected=int(spec.get("replicas", 1)),
            active=int(source.get("active", 0)),
            pending=tally.get("pending", 0),
            succeeded=int(source.get("succeeded", 0)),
            failed=int(source.get("failed", 0)),
        )
    return counts


def status_line(name: str, job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str:
    """One line for the task's log, e.g. `tfjob x: Running (Worker: 3 active, 1 pending)`; a Restarting, Failed or
    Suspended job adds the operator's message."""
    current = state(job)
    counts = "; ".join(f"{kind}: {c.describe()}" for kind, c in replica_counts(job, pods).items())
    line = f"tfjob {name}: {current} ({counts})"
    if current in ("Restarting", "Failed", "Suspended"):
        message = (condition(job, current) or {}).get("message")
        if message:
            line += f" - {message}"
    return line


def _naive(moment: datetime | None) -> datetime | None:
    # API times are all UTC; naive values compare with datetime.min/max.
    return moment.replace(tzinfo=None) if moment else None


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time of the Kubernetes API (`2025-01-01T00:00:00Z`, with or without microseconds), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class ContainerExit:
    """A replica's container that ended with an error, or a pod the kubelet failed as a whole (evicted).

    Attributes:
        previous: the exit is the container's previous run (`lastState`; the kubelet restarted it in place), so its
            log is read with `previous=true`.
        exit_code: None when the pod failed without a container exit (e.g. `Evicted`).
    """

    replica_type: str
    index: int
    pod: str
    pod_uid: str
    exit_code: int | None
    reason: str
    message: str
    finished_at: str
    previous: bool
    restart_count: int

    def describe(self) -> str:
        """`Worker 2 (pod x-worker-2) exited with code 137 (OOMKilled)`."""
        who = f"{self.replica_type} {self.index} (pod {self.pod})"
        if self.exit_code is None:
            what = f"failed: {self.reason}" + (f" ({self.message})" if self.message else "")
        else:
            what = f"exited with code {self.exit_code}" + (f" ({self.reason})" if self.reason else "")
            if self.message:
                what += f": {self.message}"
        return f"{who} {what}"


def _main_container_status(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    # The operator reads the exit code of the container named `tensorflow` (pod.go:339-348).
    for status in pod.get("status", {}).get("containerStatuses") or ():
        if status.get("name") == CONTAINER_NAME:
            return status
    return None


def container_exits(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[ContainerExit]:
    """Every failed container run among `pods`, the earliest first: with MultiWorkerMirroredStrategy one worker's
    crash makes the others fail later (collective timeouts), so the first is the cause."""
    exits = []
    for pod in pods:
        metadata, status = pod.get("metadata", {}), pod.get("status", {})
        replica_type, index = replica_of(pod, job)
        container = _main_container_status(pod) or {}
        found = None
        for previous, terminated in (
            (False, (container.get("state") or {}).get("terminated")),
            (True, (container.get("lastState") or {}).get("terminated")),
        ):
            if terminated and int(terminated.get("exitCode", 0)) != 0:
                found = (previous, terminated)
                break
        if found is not None:
            previous, ended = found
            exit_code: int | None = int(ended["exitCode"])
            reason, finished_at = str(ended.get("reason", "")), str(ended.get("finishedAt", ""))
        elif status.get("phase") == "Failed":
            previous, ended, exit_code = False, status, None
            reason, finished_at = str(status.get("reason", "Failed")), ""
        else:
            continue
        exits.append(
            ContainerExit(
                replica_type=replica_type,
                index=index,
                pod=str(metadata.get("name")),
                pod_uid=str(metadata.get("uid", "")),
                exit_code=exit_code,
                reason=reason,
                message=str(ended.get("message", "")).strip(),
                finished_at=finished_at,
                previous=previous,
                restart_count=int(container.get("restartCount", 0)),
            )
        )
    return sorted(exits, key=lambda e: _naive(parse_time(e.finished_at)) or datetime.max)


@dataclass(frozen=True)
class NotStarted:
    """A pod whose container has not started: unscheduled, or scheduled but waiting (image pull, volume, ...)."""

    pod: str
    scheduled: bool
    reason: str
    message: str

    def describe(self) -> str:
        where = "scheduled, waiting" if self.scheduled else "not scheduled"
        detail = self.reason + (f": {self.message}" if self.message else "")
        return f"{self.pod} ({where}{': ' + detail if detail else ''})"


def not_started(pods: Sequence[Mapping[str, Any]]) -> list[NotStarted]:
    """The Pending pods and why each waits: the PodScheduled condition, else its container's waiting state."""
    found = []
    for pod in pods:
        if not is_pending(pod):
            continue
        status = pod.get("status", {})
        scheduled_condition = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
        scheduled = bool(scheduled_condition and scheduled_condition.get("status") == "True")
        reason, message = "", ""
        if scheduled_condition and not scheduled:
            reason = str(scheduled_condition.get("reason", ""))
            message = str(scheduled_condition.get("message", ""))
        waiting = ((_main_container_status(pod) or {}).get("state") or {}).get("waiting")
        if scheduled and waiting:
            reason, message = str(waiting.get("reason", "")), str(waiting.get("message", ""))
        found.append(NotStarted(str(pod.get("metadata", {}).get("name")), scheduled, reason, message))
    return sorted(found, key=lambda item: item.pod)


def started_count(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> int:
    """How many replicas have a pod whose container started (Running, Succeeded or Failed)."""
    started = {
        replica_of(pod, job) for pod in pods if pod.get("status", {}).get("phase") in ("Running", "Succeeded", "Failed")
    }
    return len(started)


def event_time(event: Mapping[str, Any]) -> datetime | None:
    """When an Event last happened: events.k8s.io writers (kube-scheduler) set `eventTime` and `series`, older
    writers `lastTimestamp`; the core/v1 view carries whichever was written."""
    for value in (
        (event.get("series") or {}).get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        event.get("metadata", {}).get("creationTimestamp"),
    ):
        parsed = _naive(parse_time(value))
        if parsed is not None:
            return parsed
    return None


def newest_event(events: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recent of `events`, or None."""
    ordered = sorted(events, key=lambda e: event_time(e) or datetime.min)
    return ordered[-1] if ordered else None
