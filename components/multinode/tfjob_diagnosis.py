"""Why a TFJob did not succeed, in one message: the error `TfJobClient.wait` raises when the job failed, did not get
scheduled, or ran past its deadline.

The messages come from what the wait saw (`Progress`: the last job and pods, every failed container run with its
log tail caught when first seen) and a few reads at the end (the scheduler's events, the chief's log). They name the
replica, the Kubernetes reason and the config key to change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.multinode import tfjob
from components.multinode import tfjob_status as status
from components.multinode.tfjob_api import LOG_TAIL_LINES, TfJobApi
from components.multinode.tfjob_errors import (
    BACKOFF_LIMIT_KEY,
    DEADLINE_KEY,
    SCHEDULE_TIMEOUT_KEY,
    TRAINING_OPERATOR_INSTALL,
    TfJobError,
    TfJobFailedError,
    TfJobNotScheduledError,
    TfJobPodsRejectedError,
    TfJobTimeoutError,
)

_EXIT_HINTS = {
    "OOMKilled": "its container reached its memory limit: give the workers more memory or lower trainer.batch_size.",
    "Evicted": "the node evicted the pod (the message says which resource ran short).",
    "DeadlineExceeded": "the pod ran past its activeDeadlineSeconds.",
}
_CODE_HINTS = {
    137: "it was killed (SIGKILL): out of memory on the node, preempted, or deleted.",
    143: "it was stopped (SIGTERM): its node is draining or it was preempted.",
}
_MORE_CAPACITY = (
    "Free or add nodes with the resources the workers request (accelerators, memory), lower the workers' "
    f"accelerators or their number, or raise {SCHEDULE_TIMEOUT_KEY}."
)


@dataclass
class Progress:
    """What `wait` has seen so far. It logs changes only, and keeps every failed container run with its log tail:
    the operator deletes a failed pod to restart it (pkg/controller.v1/common/pod.go:350-366), so the exit and the
    log must be caught when first seen.

    Attributes:
        exits: (pod uid, finishedAt, exit code) -> (the exit, its log tail). The same run shows first as the
            container's state and, after an in-place restart, as its lastState: the key is the same.
        unreachable: the last API trouble, while the API does not answer.
        unanswered: the polls in a row the API gave no readable answer to (0 once it answers).
        unanswered_since: when the first of them began (the task's clock).
        refused: the pod (or, unnamed, the message) the operator's newest FailedCreatePod event named on the last
            poll, while that pod did not exist; "" when none.
    """

    line: str = ""
    state: str = ""
    restarts: int = 0
    reported: set[tuple[str, str]] = field(default_factory=set)
    exits: dict[tuple[str, str, int | None], tuple[status.ContainerExit, str]] = field(default_factory=dict)
    unreachable: str = ""
    unanswered: int = 0
    unanswered_since: float = 0.0
    refused: str = ""
    job: Mapping[str, Any] | None = None
    pods: list[Mapping[str, Any]] = field(default_factory=list)


def failure(api: TfJobApi, name: str, job: Mapping[str, Any], progress: Progress) -> TfJobError:
    """The error of a job the operator marked Failed, or a timeout when the operator's own activeDeadlineSeconds
    ended it (pkg/controller.v1/common/job.go:210-212).

    It names the first failed run seen, with its log tail: with MultiWorkerMirroredStrategy one worker's crash makes
    the others fail next (their collectives time out), so the first is the likely cause even when a later one, after
    a restart, is what the operator gave up on. Later failures are listed, and the last one's log follows too."""
    job_id = f"{api.namespace}/{name}"
    said = str((status.condition(job, "Failed") or {}).get("message", "")).strip()
    if status.ACTIVE_DEADLINE_MESSAGE in said:
        return TfJobTimeoutError(
            f"TFJob {job_id} ran longer than its runPolicy.activeDeadlineSeconds ({DEADLINE_KEY}) and the Training "
            f"Operator stopped it: {said} Raise {DEADLINE_KEY} or lower trainer.train_steps.",
            job=job_id,
        )
    seen = sorted(progress.exits.values(), key=lambda item: (not item[0].finished_at, item[0].finished_at))
    operator = f" The Training Operator: {said}" if said else ""
    if status.BACKOFF_LIMIT_MESSAGE in said:
        operator += f" (it restarted failed replicas until its backoff limit, {BACKOFF_LIMIT_KEY})."
    if not seen:
        recorded = api.operator_exit_events(name)
        what = f" (the operator recorded: {recorded[-1].get('message')})" if recorded else ""
        return TfJobFailedError(
            f"TFJob {job_id} failed, and none of its pods is left to say how{what}.{operator} The pods may have been "
            f"cleaned up (runPolicy.cleanPodPolicy); `kubectl -n {api.namespace} get events --field-selector "
            f"involvedObject.name={name}` lists what the operator recorded.",
            job=job_id,
        )
    exited, tail = seen[0]
    hint = _EXIT_HINTS.get(exited.reason) or _CODE_HINTS.get(exited.exit_code or 0) or "see its log below."
    later = [item.describe() for item, _ in seen[1:6]]
    others = f" Then: {'; '.join(later)}{' ...' if len(seen) > 6 else ''}." if later else ""
    detail = _log_block(exited, tail)
    last, last_tail = seen[-1]
    if last.pod != exited.pod:
        detail += "\n" + _log_block(last, last_tail)
    return TfJobFailedError(
        f"TFJob {job_id} failed: {exited.describe()}; {hint}{others}{operator}",
        detail=detail,
        job=job_id,
        replica_type=exited.replica_type,
        replica_index=exited.index,
        exit_code=exited.exit_code,
        reason=exited.reason,
        log_tail=tail if not tail.startswith("(") else "",
    )


# The API server's errors the operator's FailedCreatePod event carries (`Error creating: pods "NAME" is forbidden:
# CAUSE`, apimachinery NewForbidden through admission.NewForbidden), from the admission plugins of kubernetes (not
# mirrored here): ServiceAccount (plugin/pkg/admission/serviceaccount/admission.go: `error looking up service account
# NS/SA: serviceaccount "SA" not found`), PodSecurity (staging/src/k8s.io/pod-security-admission/admission/
# admission.go: `violates PodSecurity "LEVEL:VERSION": DETAIL`) and ResourceQuota (staging/src/k8s.io/apiserver/pkg/
# admission/plugin/resourcequota/controller.go: `exceeded quota: NAME, requested: ..., used: ..., limited: ...`, or
# `failed quota: NAME: must specify ...`).
_REFUSED_POD = re.compile(r'pods "(?P<pod>[^"]+)" is forbidden')
_MISSING_ACCOUNT = re.compile(
    r'(?:error looking up service account (?P<namespace>[^/\s]+)/[^:\s]+: )?serviceaccount "(?P<name>[^"]+)" not found'
)
_POD_SECURITY = re.compile(r'violates PodSecurity "(?P<level>[^"]+)": (?P<detail>.+)')
_QUOTA = re.compile(r"(?:exceeded|failed) quota: (?P<quota>[^,:]+)[,:] (?P<detail>.+)")


def pod_creation_refusal(
    api: TfJobApi, name: str, uid: str, pods: Sequence[Mapping[str, Any]]
) -> tuple[str, Mapping[str, Any]] | None:
    """The operator's newest FailedCreatePod event of the job whose pod does not exist now, with that pod's name
    ("" when the message names none: then it counts only while the job has no pod at all); None when there is none.

    A pod that exists was created after the refusal, so that refusal has passed."""
    existing = {str(pod.get("metadata", {}).get("name")) for pod in pods}
    for event in reversed(api.pod_creation_failures(name, uid)):
        named = _REFUSED_POD.search(str(event.get("message", "")))
        pod = named["pod"] if named else ""
        if (pod and pod not in existing) or (not pod and not existing):
            return pod, event
    return None


def pods_rejected(
    namespace: str, name: str, pod: str, event: Mapping[str, Any], job: Mapping[str, Any]
) -> TfJobPodsRejectedError:
    """The error of a job whose pod the API server refuses to create, with the setting to change for the usual
    refusals: a missing service account, the namespace's Pod Security level, its ResourceQuota."""
    job_id = f"{namespace}/{name}"
    said = str(event.get("message", "")).strip().rstrip(".")
    who = f"its pod {pod}" if pod else "its pods"
    head = (
        f"TFJob {job_id}: the Training Operator cannot create {who}: the Kubernetes API refused it, and again on the "
        f"operator's retries (event {event.get('reason', 'FailedCreatePod')}: {said})."
    )
    account, security, quota = _MISSING_ACCOUNT.search(said), _POD_SECURITY.search(said), _QUOTA.search(said)
    if account:
        where = account["namespace"] or namespace
        hint = (
            f"The workers' pods run as service account {account['name']} (their serviceAccountName: the Trainer task's "
            f"own service account, or kubeflow.service_account), and namespace {where} has no such account: check "
            f"kubeflow.service_account and kubeflow.namespace (`kubectl -n {where} get serviceaccounts`)."
        )
        cause = "service-account"
    elif security:
        hint = (
            f"Namespace {namespace} enforces the Pod Security level {security['level']} (its label "
            "pod-security.kubernetes.io/enforce) and the workers' pods break it. tfxp's worker pods meet the "
            "restricted level themselves; change the pod setting it names (what the kubeflow.* keys add: "
            "kubeflow.volumes, kubeflow.workers.env, ...) or run in a namespace whose level allows it "
            f"(`kubectl get namespace {namespace} --show-labels`)."
        )
        cause = "pod-security"
    elif quota:
        hint = (
            f"Namespace {namespace}'s ResourceQuota {quota['quota']} has no room for the workers: lower "
            "trainer.workers or what each worker asks for (kubeflow.trainer_cpu, kubeflow.trainer_memory, "
            "kubeflow.trainer_accelerator), free the quota, or have it raised "
            f"(`kubectl -n {namespace} describe resourcequota {quota['quota']}`)."
        )
        cause = "quota"
    else:
        replicas = status.expected_replicas(job)
        hint = (
            f"Fix what the API server names: the job's {replicas} pods come from the Trainer's kubeflow settings "
            f"(`kubectl -n {namespace} get events --field-selector involvedObject.name={name}` lists every refusal)."
        )
        cause = "other"
    return TfJobPodsRejectedError(f"{head} {hint}", job=job_id, pod=pod, event=said, cause=cause)


def not_scheduled(api: TfJobApi, name: str, progress: Progress, timeout: float) -> TfJobNotScheduledError:
    """The error of replicas that did not start within `timeout`: the waiting pods and the scheduler's newest
    FailedScheduling event; with no pod at all, the gang scheduler's PodGroup events or the missing operator."""
    job_id = f"{api.namespace}/{name}"
    job, pods = progress.job, progress.pods
    if job is None:
        return TfJobNotScheduledError(
            f"TFJob {job_id}: could not read it for {timeout:g} s ({SCHEDULE_TIMEOUT_KEY}); the Kubernetes API last "
            f"said: {progress.unreachable or 'nothing'}.",
            job=job_id,
            pending_pods=(),
            event="",
        )
    if status.state(job) == status.NOT_PICKED_UP:
        return TfJobNotScheduledError(
            f"TFJob {job_id} was created, but the Training Operator did not pick it up within {timeout:g} s "
            f"({SCHEDULE_TIMEOUT_KEY}; the job has no status). Check that the operator runs "
            f"(`kubectl -n kubeflow get deployment training-operator`); install it with {TRAINING_OPERATOR_INSTALL}.",
            job=job_id,
            pending_pods=(),
            event="",
        )
    expected, started = status.expected_replicas(job), status.started_count(job, pods)
    if not pods:
        # With gang scheduling the operator creates no pod until the PodGroup (named after the job) is admitted
        # (pkg/controller.v1/common/job.go:322-334, scheduling.go:52), so the events are the PodGroup's.
        warnings = [e for e in api.events(f"involvedObject.name={name}") if e.get("type") == "Warning"]
        event = status.newest_event(warnings)
        said = f" The newest event: {_event_text(event)}" if event else " No event explains it."
        return TfJobNotScheduledError(
            f"TFJob {job_id}: the Training Operator created none of its {expected} pods within {timeout:g} s "
            f"({SCHEDULE_TIMEOUT_KEY}). With gang scheduling it creates them once the PodGroup {name} fits the "
            f"cluster as a whole.{said} {_MORE_CAPACITY}",
            job=job_id,
            pending_pods=(),
            event=str(event.get("message", "")) if event else "",
        )
    waiting = status.not_started(pods)
    names = {item.pod for item in waiting}
    scheduling = [e for e in api.events("reason=FailedScheduling") if e.get("involvedObject", {}).get("name") in names]
    event = status.newest_event(scheduling)
    said = f" The scheduler's newest FailedScheduling event: {_event_text(event)}" if event else ""
    return TfJobNotScheduledError(
        f"TFJob {job_id}: {expected - started} of {expected} replicas did not start within {timeout:g} s "
        f"({SCHEDULE_TIMEOUT_KEY}): {_waiting_summary(waiting, with_messages=event is None)}.{said} {_MORE_CAPACITY}",
        job=job_id,
        pending_pods=tuple(sorted(names)),
        event=str(event.get("message", "")) if event else "",
    )


def timed_out(api: TfJobApi, name: str, progress: Progress, timeout: float) -> TfJobTimeoutError:
    """The error of a job still running after `timeout`, with the chief's log tail."""
    job_id = f"{api.namespace}/{name}"
    if progress.job is None:
        return TfJobTimeoutError(
            f"TFJob {job_id}: could not read it for {timeout:g} s ({DEADLINE_KEY}); the Kubernetes API last said: "
            f"{progress.unreachable or 'nothing'}.",
            job=job_id,
        )
    chief = _chief_pod(progress.job, progress.pods)
    return TfJobTimeoutError(
        f"TFJob {job_id} was still {status.state(progress.job)} after {timeout:g} s ({DEADLINE_KEY}): "
        f"{progress.line.partition(': ')[2]}. Raise {DEADLINE_KEY} or lower trainer.train_steps.",
        detail=f"Last {LOG_TAIL_LINES} lines of {chief}'s log:\n{api.log_tail(chief)}" if chief else "",
        job=job_id,
    )


def _log_block(exited: status.ContainerExit, tail: str) -> str:
    previous = " (previous run)" if exited.previous else ""
    return f"Last {LOG_TAIL_LINES} lines of {exited.pod}'s {tfjob.CONTAINER_NAME} log{previous}:\n{tail}"


def _event_text(event: Mapping[str, Any]) -> str:
    """`Reason on Kind name, time: message.`"""
    when = status.event_time(event)
    stamp = f", {when.isoformat(timespec='seconds')}Z" if when else ""
    involved = event.get("involvedObject", {})
    message = str(event.get("message", "")).strip().rstrip(".")
    return f"{event.get('reason', '')} on {involved.get('kind', '')} {involved.get('name', '?')}{stamp}: {message}."


def _waiting_summary(waiting: list[status.NotStarted], *, with_messages: bool) -> str:
    """`a, b not scheduled (Unschedulable); c scheduled, waiting (ImagePullBackOff: ...)`, pods grouped by why."""
    if not waiting:
        return "their pods are gone"
    groups: dict[tuple[bool, str, str], list[str]] = {}
    for item in waiting:
        message = item.message if with_messages or item.scheduled else ""
        groups.setdefault((item.scheduled, item.reason, message), []).append(item.pod)
    parts = []
    for (scheduled, reason, message), pods in groups.items():
        why = reason + (f": {message.strip().rstrip('.')}" if message else "")
        where = "scheduled, waiting" if scheduled else "not scheduled"
        parts.append(f"{', '.join(pods)} {where}" + (f" ({why})" if why else ""))
    return "; ".join(parts)


def _chief_pod(job: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> str | None:
    # The chief: a Chief/Master replica when the job has one, else Worker 0 (tfjob_controller.go:598-605).
    ranked = []
    for pod in pods:
        replica_type, index = status.replica_of(pod, job)
        rank = 0 if replica_type in ("Chief", "Master") else 1 if (replica_type, index) == ("Worker", 0) else 2
        ranked.append((rank, str(pod["metadata"]["name"])))
    ranked.sort()
    return ranked[0][1] if ranked and ranked[0][0] < 2 else None
