"""The cluster behind tests/support/k8s_api_double.py: the Training Operator v1.9's TFJob controller, and the
scheduler and
kubelet as far as a TFJob's pods need them, stepped one tick per read of a TFJob.

The operator part follows kubeflow/trainer release-1.9 @ 3a3a1da (cited as `job.go` = pkg/controller.v1/common/
job.go, `pod.go` = pkg/controller.v1/common/pod.go, `tfjob_controller.go` = pkg/controller.v1/tensorflow/, `status.go`
= pkg/util/status.go, `core/` = pkg/core/). It leaves out services, suspend, TTL and dynamic workers. Where the
scheduler, the kubelet or volcano act, the behaviour is the documented one, not derived from their source (their
repositories are not mirrored here): an unschedulable pod stays Pending with PodScheduled=False/Unschedulable and a
FailedScheduling event written through events.k8s.io (so `eventTime` and `series`, not `lastTimestamp`); a container
that exits non-zero in a pod with restartPolicy OnFailure is restarted in place (restartCount+1, lastState); with
Never the pod's phase becomes Failed.

What happens to each pod is the `Scenario`'s script (tests/support/k8s_api_double.py); the job's conditions and replica
statuses follow from the controller's rules, given the manifest's restartPolicy, backoffLimit, activeDeadlineSeconds
and cleanPodPolicy.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k8s_api_double import Scenario

GROUP_VERSION = "kubeflow.org/v1"
CONTAINER = "tensorflow"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
REPLICA_TYPE_ORDER = ("Chief", "Evaluator", "Master", "PS", "Worker")  # tfjob_controller.go:419-425
DEFAULT_PORT = 2222  # tensorflow_types.go:28
START = datetime(2025, 1, 1, tzinfo=UTC)


def stamp(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_stamp(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Exit:
    """One scripted run of a replica's container: it runs `ticks` ticks, writes `log`, exits with `code`."""

    code: int = 0
    reason: str = "Completed"
    log: str = ""
    ticks: int = 2


@dataclass(frozen=True)
class Refusal:
    """The API server refuses to create a replica's pod: `cause` is the admission plugin's error (what follows
    `pods "NAME" is forbidden: `); `times` creates in a row are refused (None: every one)."""

    cause: str
    times: int | None = None


@dataclass
class _PodRun:
    replica: tuple[str, int]
    pending_ticks: int = 0
    running_ticks: int = 0
    current: Exit | None = None
    logs: list[str] = field(default_factory=list)
    blocked: bool = False


def _is_true(status: dict[str, Any], condition_type: str) -> bool:
    return any(c["type"] == condition_type and c["status"] == "True" for c in status.get("conditions") or ())


def set_condition(status: dict[str, Any], kind: str, status_value: str, reason: str, message: str, now: str) -> None:
    """UpdateJobConditions (status.go:58-67,103-148): a Failed job keeps its conditions; an unchanged one is kept;
    Running and Restarting replace each other; Failed or Succeeded turn Running False."""
    if _is_true(status, "Failed"):
        return
    conditions = status.setdefault("conditions", [])
    current = next((c for c in conditions if c["type"] == kind), None)
    if current and current["status"] == status_value and current["reason"] == reason:
        return
    new = {
        "type": kind,
        "status": status_value,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": current["lastTransitionTime"] if current and current["status"] == status_value else now,
    }
    kept = []
    for c in conditions:
        if {kind, c["type"]} == {"Running", "Restarting"} or c["type"] == kind:
            continue
        if kind in ("Failed", "Succeeded") and c["type"] == "Running":
            c = {**c, "status": "False"}
        kept.append(c)
    status["conditions"] = [*kept, new]


class _CreateRefusedError(Exception):
    """The API server refused a pod the operator creates: createNewPod returns the error (pod.go:455-470)."""


def _job_ref(job: dict[str, Any]) -> dict[str, Any]:
    """The object reference the operator's recorder puts on the job's events (client-go's GetReference: with the
    uid)."""
    metadata = job["metadata"]
    return {"kind": "TFJob", "apiVersion": GROUP_VERSION, "name": metadata["name"], "uid": metadata["uid"]}


class Cluster:
    """The state the API double serves, and one `tick()` of scheduler, kubelet and operator.

    Args:
        scenario: what happens to the pods.
        namespace: the one namespace that exists.
        clock: seconds since START (the API's timestamps and activeDeadlineSeconds); tests share a fake one.
    """

    def __init__(self, scenario: Scenario, namespace: str, clock: Callable[[], float]) -> None:
        self.scenario = scenario
        self.namespace = namespace
        self.clock = clock
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, _PodRun] = {}
        self.events: list[dict[str, Any]] = []
        self.attempts: dict[tuple[str, str, int], int] = {}
        self.refusals: dict[tuple[str, int], int] = {}  # (job uid, Worker index) -> creates refused so far
        self.resource_version = 1000
        self.ticks = 0

    # -- bookkeeping -----------------------------------------------------------------------------------------------

    def now(self) -> str:
        return stamp(self.clock())

    def next_version(self) -> str:
        self.resource_version += 1
        return str(self.resource_version)

    def record_event(
        self,
        involved: dict[str, Any],
        reason: str,
        message: str,
        *,
        kind: str = "Normal",
        component: str = "tfjob-controller",
        series: bool = False,
    ) -> None:
        """An event, or one more occurrence of it (same object, reason and message)."""
        for seen in self.events:
            # client-go's EventAggregator keys an event by the whole involved object (uid too), reason and message.
            same_object = all(seen["involvedObject"].get(key) == involved.get(key) for key in ("kind", "name", "uid"))
            if same_object and (seen["reason"], seen["message"]) == (reason, message):
                if series:  # events.k8s.io: a series, the core/v1 timestamps stay null
                    count = seen.get("series", {}).get("count", 1) + 1
                    seen["series"] = {"count": count, "lastObservedTime": micro_stamp(self.clock())}
                else:
                    seen["count"] += 1
                    seen["lastTimestamp"] = self.now()
                return
        event: dict[str, Any] = {
            "metadata": {
                "name": f"{involved['name']}.{uuid.uuid4().hex[:16]}",
                "namespace": self.namespace,
                "creationTimestamp": self.now(),
            },
            "involvedObject": {"namespace": self.namespace, **involved},
            "reason": reason,
            "message": message,
            "type": kind,
            "reportingComponent": component if series else "",
            "source": {} if series else {"component": component},
            "firstTimestamp": None if series else self.now(),
            "lastTimestamp": None if series else self.now(),
            "eventTime": micro_stamp(self.clock()) if series else None,
            "count": None if series else 1,
        }
        self.events.append(event)

    def job_pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        uid = job["metadata"]["uid"]
        return [
            pod
            for pod in self.pods.values()
            if any(ref.get("uid") == uid and ref.get("controller") for ref in pod["metadata"]["ownerReferences"])
        ]

    def add_pod(self, pod: dict[str, Any], replica: tuple[str, int]) -> None:
        """Puts a pod in place as it is (e.g. a terminating pod of an earlier job); the kubelet leaves a finished
        one alone."""
        self.pods[pod["metadata"]["name"]] = pod
        self.runs[pod["metadata"]["name"]] = _PodRun(replica=replica)

    def delete_job(self, name: str) -> None:
        """Background deletion: the job goes, and the garbage collector takes the pods it owns."""
        job = self.jobs.pop(name)
        for pod in self.job_pods(job):
            self.pods.pop(pod["metadata"]["name"])

    # -- one tick ----------------------------------------------------------------------------------------------------

    def tick(self) -> None:
        self.ticks += 1
        for name in sorted(self.pods):
            self._kubelet(self.pods[name])
        # MultiWorkerMirroredStrategy's first collective waits for every worker: a started worker makes no
        # progress until all of its job's replicas run (the trainer's behaviour, not the operator's).
        for job in self.jobs.values():
            pods = self.job_pods(job)
            everyone = len(pods) == sum(int(s.get("replicas", 1)) for s in replica_specs(job).values()) and all(
                p["status"]["phase"] != "Pending" for p in pods
            )
            for pod in pods:
                self.runs[pod["metadata"]["name"]].blocked = not everyone
        if self.scenario.operator and self.ticks % self.scenario.operator_every == 0:
            for job in list(self.jobs.values()):
                self._reconcile(job)

    def _kubelet(self, pod: dict[str, Any]) -> None:
        run, status = self.runs[pod["metadata"]["name"]], pod["status"]
        index = run.replica[1]
        if status["phase"] == "Pending":
            if self.scenario.unschedulable(index):
                message = self.scenario.scheduling_event
                status["conditions"] = [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
                ]
                self.record_event(
                    {"kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]},
                    "FailedScheduling",
                    message,
                    kind="Warning",
                    component="default-scheduler",
                    series=True,
                )
                return
            status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
            waiting = self.scenario.waiting.get(index)
            if waiting is not None:
                status["containerStatuses"] = [
                    {
                        "name": CONTAINER,
                        "ready": False,
                        "restartCount": 0,
                        "state": {"waiting": {"reason": waiting[0], "message": waiting[1]}},
                    }
                ]
                return
            run.pending_ticks += 1
            if run.pending_ticks >= self.scenario.start_ticks + self.scenario.start_delays.get(index, 0):
                status["phase"] = "Running"
                self._start_container(pod, run, restart_count=0)
            return
        if status["phase"] != "Running":
            return
        container = status["containerStatuses"][0]
        if "waiting" in container["state"]:  # CrashLoopBackOff: run again
            self._start_container(pod, run, restart_count=container["restartCount"], last=container.get("lastState"))
            return
        if run.blocked:
            return
        run.running_ticks += 1
        current = run.current
        assert current is not None
        if run.running_ticks < current.ticks:
            return
        terminated = {
            "exitCode": current.code,
            "reason": current.reason,
            "startedAt": container["state"]["running"]["startedAt"],
            "finishedAt": self.now(),
            "containerID": f"containerd://{uuid.uuid4().hex}",
        }
        if current.code == 0:
            status["phase"] = "Succeeded"
            container["state"] = {"terminated": terminated}
        elif pod["spec"]["restartPolicy"] in ("OnFailure", "Always"):
            container["restartCount"] += 1
            container["lastState"] = {"terminated": terminated}
            container["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting"}}
        else:
            status["phase"] = "Failed"
            container["state"] = {"terminated": terminated}
        container["ready"] = False

    def _start_container(
        self, pod: dict[str, Any], run: _PodRun, *, restart_count: int, last: dict[str, Any] | None = None
    ) -> None:
        job_uid = pod["metadata"]["ownerReferences"][0]["uid"]
        key = (job_uid, *run.replica)
        attempt = self.attempts.get(key, 0)
        self.attempts[key] = attempt + 1
        run.current = self.scenario.exit_for(run.replica, attempt)
        run.running_ticks = 0
        run.logs.append(run.current.log)
        container = {
            "name": CONTAINER,
            "ready": True,
            "restartCount": restart_count,
            "state": {"running": {"startedAt": self.now()}},
        }
        if last:
            container["lastState"] = last
        pod["status"]["containerStatuses"] = [container]

    # -- the TFJob controller --------------------------------------------------------------------------------------

    def _reconcile(self, job: dict[str, Any]) -> None:
        """Reconcile (tfjob_controller.go:119-170). A pod the API server refuses to create fails ReconcileJobs before
        the job's status is written (job.go:338-342 returns before UpdateJobStatusInApiServer, job.go:354-361), so
        the status stays as it was (none at all on a new job: the Created condition of the create predicate,
        tfjob_controller.go:652-661, lives only in the informer's copy until a status write); controller-runtime
        requeues the job, which here is the next tick."""
        before = json.loads(json.dumps(job["status"])) if "status" in job else None
        try:
            self._reconcile_jobs(job)
        except _CreateRefusedError:
            if before is None:
                job.pop("status", None)
            else:
                job["status"] = before

    def _reconcile_jobs(self, job: dict[str, Any]) -> None:
        """ReconcileJobs (job.go:78-364) with UpdateJobStatus (tfjob_controller.go:373-519)."""
        status = job.setdefault("status", {})
        name = job["metadata"]["name"]
        if not status.get("conditions"):  # the create predicate (tfjob_controller.go:652-661)
            set_condition(status, "Created", "True", "TFJobCreated", f"TFJob {name} is created.", self.now())
        specs = replica_specs(job)
        run_policy = job["spec"].get("runPolicy") or {}
        pods = self.job_pods(job)
        if _is_true(status, "Succeeded") or _is_true(status, "Failed"):
            self._delete_pods(run_policy, status, pods)  # job.go:122-136
            if _is_true(status, "Succeeded"):
                for counts in status.get("replicaStatuses", {}).values():
                    counts["succeeded"] = counts.get("succeeded", 0) + counts.pop("active", 0)
            return
        if self.scenario.gang and not pods:
            # Gang scheduling: no pod until the PodGroup is admitted (job.go:322-334); its events are the gang
            # scheduler's (volcano: on the PodGroup, which the operator names after the job, scheduling.go:52).
            status["lastReconcileTime"] = self.now()
            self.record_event(
                {"kind": "PodGroup", "apiVersion": "scheduling.volcano.sh/v1beta1", "name": name},
                "Unschedulable",
                self.scenario.scheduling_event,
                kind="Warning",
                component="volcano",
            )
            return
        status.setdefault("startTime", self.now())  # set in UpdateJobStatus; needed for the deadline below
        if self._past_limits(job, specs, run_policy, status, pods):
            return
        for replica_type, spec in specs.items():
            self._reconcile_pods(job, status, pods, replica_type, spec, specs)
        self._update_job_status(job, specs, status)

    def _past_limits(
        self,
        job: dict[str, Any],
        specs: dict[str, dict[str, Any]],
        run_policy: dict[str, Any],
        status: dict[str, Any],
        pods: list[dict[str, Any]],
    ) -> bool:
        """The backoff limit and activeDeadlineSeconds (job.go:175-247, core/job.go:81-133). The work queue is a
        FakeWorkQueue (tfjob_controller.go:84), so NumRequeues is 0 and only backoffLimit 0 counts new failures;
        restartCounts of Running pods count against any backoffLimit."""
        name = job["metadata"]["name"]
        active = sum(1 for p in pods if p["status"]["phase"] not in ("Succeeded", "Failed"))
        failed = sum(1 for p in pods if p["status"]["phase"] == "Failed")
        total = sum(int(s.get("replicas", 1)) for s in specs.values())
        previous_failed = sum(c.get("failed", 0) for c in (status.get("replicaStatuses") or {}).values())
        limit = run_policy.get("backoffLimit")
        over_backoff = False
        if limit is not None:
            previous_retry = 0
            exceeds = failed > previous_failed and active != total and previous_retry + 1 > limit
            restarts = sum(
                c.get("restartCount", 0)
                for replica_type, spec in specs.items()
                if spec.get("restartPolicy", "Never") in ("OnFailure", "Always", "ExitCode")
                for p in pods
                if p["metadata"]["labels"][REPLICA_TYPE_LABEL] == replica_type.lower()
                and p["status"]["phase"] == "Running"
                for c in p["status"].get("containerStatuses") or ()
            )
            over_backoff = exceeds or (restarts > 0 if limit == 0 else restarts >= limit)
        deadline = run_policy.get("activeDeadlineSeconds")
        past_deadline = deadline is not None and (
            (START + timedelta(seconds=self.clock()))
            - datetime.fromisoformat(status["startTime"].replace("Z", "+00:00"))
        ) >= timedelta(seconds=deadline)
        if over_backoff:
            message = f"Job {name} has failed because it has reached the specified backoff limit"
        elif past_deadline:
            message = f"Job {name} has failed because it was active longer than specified deadline"
        else:
            return False
        status.setdefault("completionTime", self.now())
        self.record_event(_job_ref(job), "TFJobFailed", message)
        set_condition(status, "Failed", "True", "TFJobFailed", message, self.now())
        self._delete_pods(run_policy, status, pods)
        return True

    def _delete_pods(self, run_policy: dict[str, Any], status: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        """DeletePodsAndServices (job.go:41-69): cleanPodPolicy None (the TFJob default, tensorflow_defaults.go:52)
        keeps a finished job's pods, Running deletes its Running and Pending ones, All every one."""
        policy = run_policy.get("cleanPodPolicy", "None")
        finished = _is_true(status, "Succeeded") or _is_true(status, "Failed")
        if finished and policy == "None":
            return
        for pod in pods:
            if finished and policy == "Running" and pod["status"]["phase"] not in ("Running", "Pending"):
                continue
            self.pods.pop(pod["metadata"]["name"], None)

    def _reconcile_pods(
        self,
        job: dict[str, Any],
        status: dict[str, Any],
        pods: list[dict[str, Any]],
        replica_type: str,
        spec: dict[str, Any],
        specs: dict[str, dict[str, Any]],
    ) -> None:
        """ReconcilePods (pod.go:269-380): create missing replicas' pods; a Failed pod is deleted (to be created
        again) under restartPolicy OnFailure, Always or ExitCode with a retryable code >= 128
        (pkg/util/train/train_util.go:24-26), and fails the job under ExitCode with a lower code."""
        name, rt = job["metadata"]["name"], replica_type.lower()
        counts: dict[str, int] = {}
        status.setdefault("replicaStatuses", {})[replica_type] = counts  # initializeReplicaStatuses
        typed = [p for p in pods if p["metadata"]["labels"][REPLICA_TYPE_LABEL] == rt]
        policy = spec.get("restartPolicy", "Never")  # TFJobDefaultRestartPolicy (tensorflow_types.go:30)
        for index in range(int(spec.get("replicas", 1))):
            slice_ = [p for p in typed if p["metadata"]["labels"][REPLICA_INDEX_LABEL] == str(index)]
            if not slice_:
                self._create_pod(job, replica_type, index, spec, specs)
                continue
            pod = slice_[0]
            exit_code = 0xBEEF
            for container in pod["status"].get("containerStatuses") or ():
                terminated = container["state"].get("terminated")
                if container["name"] == CONTAINER and terminated:
                    exit_code = terminated["exitCode"]
                    self.record_event(
                        _job_ref(job),
                        "ExitedWithCode",
                        f"Pod: {self.namespace}.{pod['metadata']['name']} exited with code {exit_code}",
                    )
            if pod["status"]["phase"] == "Failed":
                if (policy == "ExitCode" and exit_code >= 128) or policy in ("OnFailure", "Always"):
                    self.pods.pop(pod["metadata"]["name"])
                    message = f"job {name} is restarting because {replica_type} replica(s) failed."
                    self.record_event(
                        _job_ref(job),
                        "TFJobRestarting",
                        message,
                        kind="Warning",
                    )
                    set_condition(status, "Restarting", "True", "TFJobRestarting", message, self.now())
                elif policy == "ExitCode":
                    message = f'job "{name}" is failing because "{replica_type}" replica(s) failed.'
                    set_condition(status, "Failed", "True", "TFJobFailed", message, self.now())
            phase = pod["status"]["phase"]  # updateJobReplicaStatuses (core/status.go:33-50)
            key = {"Running": "active", "Succeeded": "succeeded", "Failed": "failed"}.get(phase)
            if key:
                counts[key] = counts.get(key, 0) + 1

    def _create_pod(
        self, job: dict[str, Any], replica_type: str, index: int, spec: dict[str, Any], specs: dict[str, Any]
    ) -> None:
        """createNewPod (pod.go:383-470): name `<job>-<type>-<index>`, the operator's labels, TF_CONFIG
        (tfjob_controller.go:555-588, tensorflow.go:112-188), the replica's restart policy (core/pod.go:81-87)."""
        name, rt = job["metadata"]["name"], replica_type.lower()
        pod_name = f"{name}-{rt}-{index}"
        refusal = self.scenario.refusal_for(replica_type, index)
        if refusal is not None:
            key = (job["metadata"]["uid"], index)
            if refusal.times is None or self.refusals.get(key, 0) < refusal.times:
                self.refusals[key] = self.refusals.get(key, 0) + 1
                # createPods records the API server's error as it came (pod_control.go:152-153): NewForbidden's
                # `pods "NAME" is forbidden: CAUSE` (apimachinery errors.go:209) from the admission plugin.
                self.record_event(
                    _job_ref(job),
                    "FailedCreatePod",
                    f'Error creating: pods "{pod_name}" is forbidden: {refusal.cause}',
                    kind="Warning",
                )
                raise _CreateRefusedError(refusal.cause)
        template = json.loads(json.dumps(spec.get("template") or {}))
        pod_spec = template.get("spec") or {}
        labels = {
            **((template.get("metadata") or {}).get("labels") or {}),
            OPERATOR_NAME_LABEL: "tfjob-controller",
            JOB_NAME_LABEL: name,
            REPLICA_TYPE_LABEL: rt,
            REPLICA_INDEX_LABEL: str(index),
        }
        has_chief = any(kind in specs for kind in ("Chief", "Master"))
        if (replica_type in ("Chief", "Master")) or (not has_chief and replica_type == "Worker" and index == 0):
            labels[JOB_ROLE_LABEL] = "master"
        cluster = {
            kind.lower(): [
                f"{name}-{kind.lower()}-{i}.{self.namespace}.svc:{DEFAULT_PORT}"
                for i in range(int(s.get("replicas", 1)))
            ]
            for kind, s in specs.items()
        }
        tf_config = {"cluster": cluster, "task": {"type": rt, "index": index}, "environment": "cloud"}
        for container in pod_spec.get("containers") or ():
            if container.get("name") == CONTAINER:
                container.setdefault("env", []).append({"name": "TF_CONFIG", "value": json.dumps(tf_config)})
        policy = spec.get("restartPolicy", "Never")
        pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        pod = {
            "metadata": {
                "name": pod_name,
                "namespace": self.namespace,
                "uid": str(uuid.uuid4()),
                "labels": labels,
                "creationTimestamp": self.now(),
                "resourceVersion": self.next_version(),
                "ownerReferences": [
                    {
                        "apiVersion": GROUP_VERSION,
                        "kind": "TFJob",
                        "name": name,
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": pod_spec,
            "status": {"phase": "Pending"},
        }
        self.pods[pod_name] = pod
        self.runs[pod_name] = _PodRun(replica=(replica_type, index))

    def _update_job_status(self, job: dict[str, Any], specs: dict[str, dict[str, Any]], status: dict[str, Any]) -> None:
        """UpdateJobStatus (tfjob_controller.go:373-519): with a Chief/Master, its pods decide; else Worker 0's
        success (default successPolicy) or all workers' succeeds the job; any failed replica fails it unless the
        job is restarting."""
        name, namespace = job["metadata"]["name"], self.namespace
        restarting = next((c for c in status.get("conditions") or () if c["type"] == "Restarting"), None)
        worker0 = self.pods.get(f"{name}-worker-0")
        worker0_done = "Worker" not in specs or bool(
            worker0
            and worker0["status"]["phase"] == "Succeeded"
            and worker0["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
        )
        has_chief = any(kind in specs for kind in ("Chief", "Master"))
        all_workers = job["spec"].get("successPolicy") == "AllWorkers"
        for replica_type in REPLICA_TYPE_ORDER:
            if replica_type not in specs:
                continue
            counts = status["replicaStatuses"][replica_type]
            expected = int(specs[replica_type].get("replicas", 1)) - counts.get("succeeded", 0)
            running, failed = counts.get("active", 0), counts.get("failed", 0)
            running_message = f"TFJob {namespace}/{name} is running."
            done_message = f"TFJob {namespace}/{name} successfully completed."
            if has_chief and replica_type in ("Chief", "Master"):
                if running > 0:
                    set_condition(status, "Running", "True", "TFJobRunning", running_message, self.now())
                if expected == 0:
                    status.setdefault("completionTime", self.now())
                    set_condition(status, "Succeeded", "True", "TFJobSucceeded", done_message, self.now())
            elif not has_chief and replica_type == "Worker":
                if expected == 0 or (worker0_done and not all_workers):
                    status.setdefault("completionTime", self.now())
                    set_condition(status, "Succeeded", "True", "TFJobSucceeded", done_message, self.now())
                elif running > 0:
                    set_condition(status, "Running", "True", "TFJobRunning", running_message, self.now())
            if failed > 0:
                if restarting is not None:
                    set_condition(status, "Restarting", "True", restarting["reason"], restarting["message"], self.now())
                else:
                    message = f"TFJob {namespace}/{name} has failed because {failed} {replica_type} replica(s) failed."
                    status.setdefault("completionTime", self.now())
                    set_condition(status, "Failed", "True", "TFJobFailed", message, self.now())


def replica_specs(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict((job.get("spec") or {}).get("tfReplicaSpecs") or {})
