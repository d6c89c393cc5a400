"""TfJobClient against the Kubernetes API double (tests/support/k8s_api_double.py), through the real `kubernetes`
client.

The double plays the Training Operator v1.9 (tests/support/training_operator_double.py); time is a fake clock shared
by the
client and the double, so deadlines of minutes pass in milliseconds.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from import_probe import heavy_modules_loaded
from k8s_api_double import (
    FN_ARGS_URI,
    NAMESPACE,
    K8sApiDouble,
    Scenario,
    missing_service_account,
    pod_security_violation,
    quota_exceeded,
    serve,
    tfjob_manifest,
)
from training_operator_double import Exit

from components.multinode.tfjob_client import TfJobClient, in_cluster, task_pod_owner, task_service_account
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
    TfJobUnansweredError,
)
from components.multinode.tfjob_follow import UNANSWERED_POLLS
from components.multinode.tfjob_rbac import RBAC_RULES

NAME = "tfxp-train"
GPU_EVENT = (
    "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: "
    "8 No preemption victims found for incoming pod."
)


class FakeTime:
    """A clock that moves only when the client sleeps; the double stamps its objects with it too."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@contextlib.contextmanager
def connected(
    scenario: Scenario, *, namespace: str = NAMESPACE, **double_options: Any
) -> Iterator[tuple[K8sApiDouble, TfJobClient, list[str], FakeTime]]:
    fake = FakeTime()
    double = K8sApiDouble(scenario, clock=fake.clock, **double_options)
    lines: list[str] = []
    with serve(double) as url:
        api = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=url))
        client = TfJobClient(api, namespace, poll_seconds=5.0, log=lines.append, clock=fake.clock, sleep=fake.sleep)
        try:
            yield double, client, lines, fake
        finally:
            api.close()


def run(
    client: TfJobClient,
    manifest: dict[str, Any] | None = None,
    *,
    timeout_seconds: float = 3600.0,
    schedule_timeout_seconds: float = 600.0,
    keep_on_success: bool = False,
) -> Any:
    return client.run(
        manifest or tfjob_manifest(NAME, workers=4),
        timeout_seconds=timeout_seconds,
        schedule_timeout_seconds=schedule_timeout_seconds,
        keep_on_success=keep_on_success,
    )


def deletes(double: K8sApiDouble) -> list[Any]:
    return [request.body for request in double.calls("DELETE", f"/tfjobs/{NAME}")]


# -- success ---------------------------------------------------------------------------------------------------


def test_success_logs_each_change_once_and_deletes_the_job() -> None:
    scenario = Scenario.succeeds(workers=4, run_ticks=3)
    scenario.start_delays = {3: 2}
    with connected(scenario) as (double, client, lines, _):
        outcome = run(client)
        polls = len(double.calls("GET", f"/tfjobs/{NAME}"))
    assert lines == [
        "tfjob tfxp-train: created in namespace kubeflow-user (4 Worker)",
        "tfjob tfxp-train: Created (Worker: 4 pending)",
        "tfjob tfxp-train: Running (Worker: 3 active, 1 pending)",
        "tfjob tfxp-train: Running (Worker: 4 active)",
        "tfjob tfxp-train: Succeeded (Worker: 4 succeeded)",
        "tfjob tfxp-train: succeeded; deleted it (its pods go with it)",
    ]
    assert polls > len(lines)  # unchanged polls said nothing
    assert outcome.replicas["Worker"].succeeded == 4 and outcome.restarts == 0 and outcome.deleted
    assert outcome.message == f"TFJob {NAMESPACE}/{NAME} successfully completed."
    [body] = deletes(double)
    assert body == {"propagationPolicy": "Background", "preconditions": {"uid": outcome.uid}}
    assert not double.cluster.jobs and not double.cluster.pods


def test_pods_of_an_earlier_job_of_the_same_name_are_ignored() -> None:
    # A deleted job's pods may linger (terminating) with the same labels; the operator ignores pods another
    # controller owns (tfjob_controller.go:292), and so does the client.
    with connected(Scenario.succeeds(workers=2)) as (double, client, lines, _):
        stale = {
            "metadata": {
                "name": "tfxp-train-worker-1-old",
                "uid": "old-pod",
                "labels": {
                    "training.kubeflow.org/job-name": NAME,
                    "training.kubeflow.org/operator-name": "tfjob-controller",
                    "training.kubeflow.org/replica-type": "worker",
                    "training.kubeflow.org/replica-index": "1",
                },
                "ownerReferences": [{"kind": "TFJob", "name": NAME, "uid": "earlier-job", "controller": True}],
            },
            "status": {
                "phase": "Failed",
                "containerStatuses": [{"name": "tensorflow", "state": {"terminated": {"exitCode": 137}}}],
            },
        }
        double.cluster.add_pod(stale, ("Worker", 1))
        outcome = run(client, tfjob_manifest(NAME, workers=2))
    assert outcome.deleted and not any("137" in line for line in lines)
    assert "tfjob tfxp-train: Created (Worker: 2 pending)" in lines


def test_keep_on_success_leaves_the_job() -> None:
    with connected(Scenario.succeeds(workers=2)) as (double, client, _, _):
        outcome = run(client, tfjob_manifest(NAME, workers=2), keep_on_success=True)
    assert not outcome.deleted and not deletes(double) and NAME in double.cluster.jobs


def test_a_restarted_worker_is_followed_to_success() -> None:
    # restartPolicy ExitCode: 137 is retryable (>= 128), so the operator recreates the pod (pod.go:350-366).
    scenario = Scenario.succeeds(workers=2).worker_fails(1, 137, "OOMKilled", "killed")
    with connected(scenario) as (_, client, lines, _):
        outcome = run(client, tfjob_manifest(NAME, workers=2, restart_policy="ExitCode"))
    assert outcome.restarts == 1 and outcome.deleted
    # The operator deleted the failed pod within the tick it failed; its event names the exit.
    assert (
        f"tfjob tfxp-train: the operator recorded: Pod: {NAMESPACE}.tfxp-train-worker-1 exited with code 137" in lines
    )
    assert any(
        line.startswith("tfjob tfxp-train: Restarting (") and "is restarting because Worker" in line for line in lines
    )
    # Worker 0 finished first and its success succeeds the job (tfjob_controller.go:467) while the restarted
    # worker 1 still counts as active.
    assert lines[-2] == "tfjob tfxp-train: Succeeded (Worker: 1 active, 1 succeeded)"


def test_an_unavailable_api_server_is_retried() -> None:
    scenario = Scenario.succeeds(workers=2)
    scenario.unavailable_reads = 2
    with connected(scenario) as (_, client, lines, _):
        outcome = run(client, tfjob_manifest(NAME, workers=2))
    assert outcome.deleted
    trouble = [line for line in lines if "did not answer" in line]
    assert trouble == [
        "tfjob tfxp-train: the Kubernetes API did not answer (503 the server is currently unable to handle the "
        "request); trying again"
    ]
    assert "tfjob tfxp-train: the Kubernetes API answers again" in lines


@pytest.mark.parametrize(
    "odd",
    [
        ("text/html", b"<html><body>502 from the proxy</body></html>"),
        ("application/json", b'{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metad'),
        ("application/json", b'["not", "an", "object"]'),
        ("application/json", b"x" * (33 * 1024 * 1024)),
    ],
    ids=["html", "cut-off-json", "json-list", "oversized"],
)
def test_an_unreadable_answer_is_retried_and_never_deletes_the_job(odd: tuple[str, bytes]) -> None:
    """A 200 that is not the API server's answer is no decision about the job: the next poll asks again."""
    with connected(Scenario.succeeds(workers=2, run_ticks=5)) as (double, client, lines, _):
        double.odd_reads = [odd, odd]
        outcome = run(client, tfjob_manifest(NAME, workers=2))
    assert outcome.deleted and len(deletes(double)) == 1  # only the deletion after success
    trouble = [line for line in lines if "did not answer" in line]
    assert len(trouble) == 1 and "UnreadableAnswerError" in trouble[0], lines
    assert "tfjob tfxp-train: the Kubernetes API answers again" in lines


def _job(**fields: Any) -> bytes:
    """A TFJob answer: tfxp-train with a uid, and `fields` on top (a wrong shape in one of them)."""
    job: dict[str, Any] = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": NAME, "uid": "u"}}
    job.update(fields)
    return json.dumps(job).encode()


WRONG_SHAPES = {
    "no-metadata": b'{"apiVersion": "kubeflow.org/v1", "kind": "TFJob"}',
    "null-metadata": b'{"metadata": null}',
    "uid-not-text": _job(metadata={"name": NAME, "uid": 5}),
    "another-jobs-name": _job(metadata={"name": "someone-else", "uid": "u"}),
    "conditions-not-a-list": _job(status={"conditions": "Running"}),
    "condition-not-an-object": _job(status={"conditions": ["Running"]}),
    "replicas-not-a-number": _job(spec={"tfReplicaSpecs": {"Worker": {"replicas": "two"}}}),
    "replica-status-not-counts": _job(status={"replicaStatuses": {"Worker": {"active": "all"}}}),
}


@pytest.mark.parametrize("body", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_one_answer_of_the_wrong_shape_is_retried_and_the_run_finishes(body: bytes) -> None:
    """JSON that is not a TFJob as the API server sends one is no answer (retried), never a crash that deletes."""
    with connected(Scenario.succeeds(workers=2, run_ticks=5)) as (double, client, lines, _):
        double.odd_reads = [("application/json", body)]
        outcome = run(client, tfjob_manifest(NAME, workers=2))
    assert outcome.deleted and len(deletes(double)) == 1  # only the deletion after success
    [trouble] = [line for line in lines if "did not answer" in line]
    assert "UnreadableAnswerError" in trouble and "the Kubernetes API answers again" in " ".join(lines)


@pytest.mark.parametrize(
    "body",
    [b'{"items": "none"}', b'{"kind": "PodList"}', b'{"items": [{"metadata": {"name": 7}}]}', b'{"items": [3]}'],
    ids=["items-not-a-list", "no-items", "name-not-text", "item-not-an-object"],
)
def test_one_pod_list_of_the_wrong_shape_is_retried(body: bytes) -> None:
    with connected(Scenario.succeeds(workers=2, run_ticks=5)) as (double, client, _, _):
        double.odd_pod_lists = [("application/json", body)]
        outcome = run(client, tfjob_manifest(NAME, workers=2))
    assert outcome.deleted and len(deletes(double)) == 1


def _recording_sleeps(client: TfJobClient, fake: FakeTime) -> list[float]:
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        fake.sleep(seconds)

    client._sleep = sleep
    return sleeps


@pytest.mark.parametrize("garbage", ["html", "503"])
def test_an_api_that_never_answers_readably_ends_the_wait_and_leaves_the_job(garbage: str) -> None:
    scenario = Scenario.succeeds(workers=2, run_ticks=10_000)
    scenario.unavailable_reads = 1000 if garbage == "503" else 0
    with connected(scenario) as (double, client, lines, fake):
        if garbage == "html":
            double.odd_reads = [("text/html", b"<html>502 from the proxy</html>")] * 1000
        sleeps = _recording_sleeps(client, fake)
        with pytest.raises(TfJobUnansweredError) as caught:
            run(client, tfjob_manifest(NAME, workers=2), timeout_seconds=86_400, schedule_timeout_seconds=86_400)
    text = str(caught.value)
    assert f"gave no readable answer about TFJob {NAMESPACE}/{NAME} on {UNANSWERED_POLLS} polls in a row" in text
    assert "left it running" in text and f"`kubectl -n {NAMESPACE} delete tfjob {NAME}`" in text
    assert not deletes(double) and NAME in double.cluster.jobs
    assert len(double.calls("GET", f"/tfjobs/{NAME}")) == UNANSWERED_POLLS
    assert sleeps == sorted(sleeps) and sleeps[0] == 5.0 and sleeps[1] == 10.0 and max(sleeps) <= 60.0  # backoff
    assert any("left running" in line for line in lines)


def test_an_answer_between_troubles_starts_the_count_again() -> None:
    html: tuple[str, bytes] | None = ("text/html", b"<html>502</html>")
    with connected(Scenario.succeeds(workers=2, run_ticks=5)) as (double, client, _, _):
        double.odd_reads = ([html] * (UNANSWERED_POLLS - 1) + [None]) * 2  # None: answered as usual
        outcome = run(client, tfjob_manifest(NAME, workers=2), timeout_seconds=86_400, schedule_timeout_seconds=86_400)
    assert outcome.deleted and len(deletes(double)) == 1


def test_an_unexpected_error_leaves_the_job_running_and_says_how_to_delete_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from components.multinode import tfjob_status

    with connected(Scenario.succeeds(workers=2, run_ticks=10)) as (double, client, lines, _):

        def broken(*args: Any) -> str:
            raise RuntimeError("a bug in the status line")

        monkeypatch.setattr(tfjob_status, "status_line", broken)
        with pytest.raises(TfJobError) as caught:
            run(client, tfjob_manifest(NAME, workers=2))
    text = str(caught.value)
    assert "unexpected RuntimeError: a bug in the status line" in text
    assert f"TFJob {NAMESPACE}/{NAME} was left running" in text
    assert f"`kubectl -n {NAMESPACE} delete tfjob {NAME}`" in text
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert not deletes(double) and NAME in double.cluster.jobs
    assert any("left running" in line for line in lines)


# -- failure ---------------------------------------------------------------------------------------------------


def test_a_failed_worker_names_replica_exit_reason_and_log_tail() -> None:
    log = "\n".join(f"step {i}" for i in range(1, 51)) + "\nResourceExhausted: OOM when allocating tensor"
    scenario = Scenario.succeeds(workers=4).worker_fails(index=2, exit_code=137, reason="OOMKilled", log=log)
    with connected(scenario) as (double, client, _, _):
        with pytest.raises(
            TfJobFailedError, match=r"Worker 2 \(pod tfxp-train-worker-2\) exited with code 137 \(OOMKilled\)"
        ) as caught:
            run(client)
        [log_request] = double.calls("GET", "/pods/tfxp-train-worker-2/log")
    error = caught.value
    assert (error.replica_type, error.replica_index, error.exit_code, error.reason) == ("Worker", 2, 137, "OOMKilled")
    tail = error.log_tail.splitlines()
    assert len(tail) == 40 and tail[-1] == "ResourceExhausted: OOM when allocating tensor" and tail[0] == "step 12"
    assert log_request.query == {"container": ["tensorflow"], "tailLines": ["40"], "previous": ["False"]}
    text = str(error)
    assert "trainer.batch_size" in text and "has failed because 1 Worker replica(s) failed" in text
    assert f"The TFJob {NAMESPACE}/{NAME} was deleted." in text.splitlines()[0]
    assert text.endswith("ResourceExhausted: OOM when allocating tensor")
    assert len(deletes(double)) == 1 and not double.cluster.pods


def test_the_backoff_limit_failure_reads_the_previous_container_log() -> None:
    # restartPolicy OnFailure: the kubelet restarts the container in place, the operator fails the job once the
    # restartCounts reach backoffLimit (core/job.go:95-132).
    scenario = Scenario.succeeds(workers=2).worker_fails(1, 1, "Error", "Traceback\nValueError: bad shard", times=5)
    manifest = tfjob_manifest(NAME, workers=2, restart_policy="OnFailure", run_policy={"backoffLimit": 2})
    with (
        connected(scenario) as (double, client, _, _),
        pytest.raises(TfJobFailedError, match=r"exited with code 1 \(Error\)") as caught,
    ):
        run(client, manifest)
    previous_reads = [
        r for r in double.calls("GET", "/pods/tfxp-train-worker-1/log") if r.query["previous"] == ["True"]
    ]
    assert previous_reads
    assert caught.value.log_tail.endswith("ValueError: bad shard")
    assert "reached the specified backoff limit" in str(caught.value) and "kubeflow.workers.backoff_limit" in str(
        caught.value
    )
    assert deletes(double)


def test_the_first_failure_is_named_and_the_later_ones_listed() -> None:
    # A busy operator lets a poll see worker 1's failed pod (137, retryable under ExitCode) before it restarts it;
    # worker 0 then fails for good (2 < 128), as a MultiWorkerMirroredStrategy peer of a crashed worker does.
    scenario = Scenario.succeeds(workers=2).worker_fails(1, 137, "OOMKilled", "oom", after_ticks=2)
    scenario.exits[("Worker", 0)] = [Exit(code=2, reason="Error", log="CollectiveTimeout: peer lost", ticks=4)]
    scenario.operator_every = 2
    with connected(scenario) as (_, client, lines, _), pytest.raises(TfJobFailedError) as caught:
        run(client, tfjob_manifest(NAME, workers=2, restart_policy="ExitCode"))
    assert "tfjob tfxp-train: Worker 1 (pod tfxp-train-worker-1) exited with code 137 (OOMKilled)" in lines
    # The operator's replicaStatuses lag the pods by a reconcile; the counts follow the pods.
    assert "tfjob tfxp-train: Created (Worker: 2 active)" in lines
    error = caught.value
    assert (error.replica_index, error.exit_code, error.log_tail) == (1, 137, "oom")
    assert "Then: Worker 0 (pod tfxp-train-worker-0) exited with code 2 (Error)." in str(error)
    assert error.detail.endswith("tfxp-train-worker-0's tensorflow log:\nCollectiveTimeout: peer lost")


def test_the_operator_deadline_is_a_timeout_not_a_worker_failure() -> None:
    scenario = Scenario.succeeds(workers=2, run_ticks=10_000)
    manifest = tfjob_manifest(NAME, workers=2, run_policy={"activeDeadlineSeconds": 60})
    with (
        connected(scenario) as (double, client, _, _),
        pytest.raises(TfJobTimeoutError, match=r"activeDeadlineSeconds.*kubeflow.workers.job_deadline_seconds"),
    ):
        run(client, manifest)
    assert deletes(double)


# -- deadlines -------------------------------------------------------------------------------------------------


def test_never_scheduled_names_pending_pods_and_the_newest_event() -> None:
    scenario = Scenario.never_scheduled(GPU_EVENT, workers=4, pending=frozenset({2, 3}))
    with connected(scenario) as (double, client, lines, fake):
        stale = {"involvedObject": {"kind": "Pod", "name": "tfxp-train-worker-2"}, "reason": "FailedScheduling"}
        double.cluster.events.append(
            {
                **stale,
                "type": "Warning",
                "message": "0/8 nodes are available: 8 node(s) had untolerated taint.",
                "metadata": {"name": "old"},
                "eventTime": "2024-12-31T00:00:00.000000Z",
                "lastTimestamp": None,
            }
        )
        started = time.monotonic()
        with pytest.raises(TfJobNotScheduledError) as caught:
            run(client, schedule_timeout_seconds=600)
        real_seconds = time.monotonic() - started
    error = caught.value
    assert error.pending_pods == ("tfxp-train-worker-2", "tfxp-train-worker-3")
    assert error.event == GPU_EVENT
    assert "2 of 4 replicas did not start within 600 s (kubeflow.workers.schedule_timeout_seconds)" in str(error)
    assert "untolerated taint" not in str(error)
    assert 600 <= fake.now < 610 and real_seconds < 10
    assert "tfjob tfxp-train: pod tfxp-train-worker-2 (not scheduled: Unschedulable: " + GPU_EVENT + ")" in lines
    assert deletes(double) and not double.cluster.pods


def test_gang_scheduling_that_never_admits_names_the_podgroup_event() -> None:
    event = "0/8 nodes are unavailable: 8 Insufficient nvidia.com/gpu."
    with (
        connected(Scenario.never_scheduled(event, workers=4, gang=True)) as (double, client, _, _),
        pytest.raises(TfJobNotScheduledError, match=r"created none of its 4 pods.*PodGroup tfxp-train") as caught,
    ):
        run(client)
    assert caught.value.pending_pods == () and caught.value.event == event
    assert deletes(double)


def test_an_image_that_never_arrives_is_reported_at_once_and_at_the_deadline() -> None:
    message = 'Back-off pulling image "registry.example.com/tfxp:0.1.0"'
    scenario = Scenario.succeeds(workers=2).image_pull_fails(1, message)
    with (
        connected(scenario) as (_, client, lines, _),
        pytest.raises(
            TfJobNotScheduledError, match=r"tfxp-train-worker-1 scheduled, waiting \(ImagePullBackOff: Back-off"
        ),
    ):
        run(client, tfjob_manifest(NAME, workers=2))
    assert sum("ImagePullBackOff" in line for line in lines) == 1


def test_a_missing_operator_is_named() -> None:
    with (
        connected(Scenario.no_operator()) as (double, client, _, _),
        pytest.raises(TfJobNotScheduledError, match=r"did not pick it up.*training-operator"),
    ):
        run(client, tfjob_manifest(NAME, workers=2))
    assert deletes(double)


def test_a_job_still_running_at_the_deadline_times_out_with_the_chief_log() -> None:
    with (
        connected(Scenario.succeeds(workers=2, run_ticks=10_000)) as (double, client, _, fake),
        pytest.raises(
            TfJobTimeoutError, match=r"still Running after 3600 s \(kubeflow.workers.job_deadline_seconds\)"
        ) as caught,
    ):
        run(client, tfjob_manifest(NAME, workers=2), timeout_seconds=3600)
    assert "tfxp-train-worker-0's log" in caught.value.detail and 3600 <= fake.now < 3610
    assert deletes(double)


# -- pods the API server refuses --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cause", "indices", "pod", "kind", "hint"),
    [
        (
            missing_service_account(NAMESPACE, "pipeline-runner"),
            None,
            "tfxp-train-worker-0",
            "service-account",
            r"run as service account pipeline-runner .*namespace kubeflow-user has no such account: check "
            r"kubeflow.service_account and kubeflow.namespace",
        ),
        (
            pod_security_violation("restricted:latest", 'hostPath volumes (volume "scratch")'),
            None,
            "tfxp-train-worker-0",
            "pod-security",
            r"enforces the Pod Security level restricted:latest \(its label pod-security.kubernetes.io/enforce\)",
        ),
        (
            # The quota holds two of the four workers: the operator creates those and is refused the third.
            quota_exceeded("team-gpus", "requests.nvidia.com/gpu", "8", "16", "16"),
            {2, 3},
            "tfxp-train-worker-2",
            "quota",
            r"ResourceQuota team-gpus has no room for the workers: lower trainer.workers",
        ),
    ],
)
def test_a_pod_the_api_server_keeps_refusing_fails_the_wait_at_once(
    cause: str, indices: set[int] | None, pod: str, kind: str, hint: str
) -> None:
    scenario = Scenario.succeeds(workers=4).pods_refused(cause, indices=indices)
    with (
        connected(scenario) as (double, client, lines, fake),
        pytest.raises(TfJobPodsRejectedError, match=hint) as caught,
    ):
        run(client, schedule_timeout_seconds=1800)
    error = caught.value
    assert isinstance(error, TfJobRejectedError) and (error.pod, error.cause) == (pod, kind)
    assert error.event == f'Error creating: pods "{pod}" is forbidden: {cause}'
    # Seen on the first poll and still so on the next one, not at the schedule timeout (1800 s).
    assert fake.now == client.poll_seconds
    assert [line for line in lines if "could not create" in line] == [
        f"tfjob {NAME}: the operator could not create {pod}: {error.event}"
    ]
    assert f"tfjob {NAME}: its pods could not be created. The TFJob {NAMESPACE}/{NAME} was deleted." in lines
    assert deletes(double) and not double.cluster.jobs and not double.cluster.pods


def test_a_refused_pod_is_not_a_missing_operator() -> None:
    # The operator fails its Reconcile before it writes any status (job.go:338-342), so the job shows no condition,
    # as if no operator ran; the event says otherwise.
    scenario = Scenario.succeeds(workers=2).pods_refused(missing_service_account(NAMESPACE, "pipeline-runner"))
    with connected(scenario) as (_, client, lines, _), pytest.raises(TfJobPodsRejectedError) as caught:
        run(client, tfjob_manifest(NAME, workers=2))
    assert "tfjob tfxp-train: Submitted (Worker: no pods yet)" in lines
    assert "did not pick it up" not in str(caught.value)


def test_a_pod_refused_once_is_created_on_the_operators_retry_and_the_job_runs() -> None:
    # Every worker's first create is refused (a webhook timing out, a quota still counting a pod that is going).
    scenario = Scenario.succeeds(workers=2).pods_refused(missing_service_account(NAMESPACE, "x"), times=1)
    with connected(scenario) as (double, client, lines, _):
        outcome = run(client, tfjob_manifest(NAME, workers=2))
    assert outcome.deleted and outcome.replicas["Worker"].succeeded == 2
    assert sum("could not create" in line for line in lines) == 1
    assert sum(event["reason"] == "FailedCreatePod" for event in double.cluster.events) == 2


def test_a_refused_pod_of_an_earlier_job_of_the_same_name_is_not_this_jobs() -> None:
    # Events outlive their job (an hour by default); the recorder names the job with its uid.
    scenario = Scenario.succeeds(workers=2)
    scenario.operator_every = 3  # two polls before the operator creates the pods
    with connected(scenario) as (double, client, lines, _):
        double.cluster.record_event(
            {"kind": "TFJob", "apiVersion": "kubeflow.org/v1", "name": NAME, "uid": "an-earlier-job"},
            "FailedCreatePod",
            f'Error creating: pods "{NAME}-worker-0" is forbidden: {missing_service_account(NAMESPACE, "x")}',
            kind="Warning",
        )
        outcome = run(client, tfjob_manifest(NAME, workers=2))
    assert outcome.deleted and not any("could not create" in line for line in lines)


# -- refusals --------------------------------------------------------------------------------------------------


def test_no_crd_says_to_install_the_training_operator() -> None:
    with (
        connected(Scenario.no_crd()) as (double, client, _, _),
        pytest.raises(TfJobCrdMissingError, match=r"Install the Training Operator v1\.9 .*trainer\.workers=1"),
    ):
        run(client)
    assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in double.requests] == [("POST", "tfjobs")]


def test_a_missing_namespace_is_not_a_missing_crd() -> None:
    with (
        connected(Scenario.succeeds(), namespace="nowhere") as (_, client, _, _),
        pytest.raises(TfJobError, match="namespace nowhere does not exist") as caught,
    ):
        run(client)
    assert not isinstance(caught.value, TfJobCrdMissingError)


def test_forbidden_create_names_verb_resource_namespace_and_service_account() -> None:
    with (
        connected(Scenario.succeeds().forbidden("create")) as (double, client, _, _),
        pytest.raises(TfJobForbiddenError, match=r"pipeline.rbac.yaml") as caught,
    ):
        run(client)
    error = caught.value
    assert (error.verb, error.resource, error.namespace) == ("create", "tfjobs.kubeflow.org", NAMESPACE)
    assert error.service_account == "kubeflow-user/pipeline-runner"
    assert (
        "service account kubeflow-user/pipeline-runner to create tfjobs.kubeflow.org in namespace kubeflow-user"
        in str(error)
    )
    assert not double.calls("DELETE")


def test_forbidden_says_to_bind_the_pods_own_account_which_no_config_key_changes() -> None:
    with (
        connected(Scenario.succeeds().forbidden("create"), service_account="default-editor") as (_, client, _, _),
        pytest.raises(TfJobForbiddenError) as caught,
    ):
        run(client)
    text = str(caught.value)
    assert "as its own pod's service account, kubeflow-user/default-editor, which no config key changes" in text
    assert (
        "compile with `--set kubeflow.namespace=kubeflow-user --set kubeflow.service_account=default-editor` "
        "(those keys decide which account pipeline.rbac.yaml binds) and `kubectl apply -n kubeflow-user -f "
        "pipeline.rbac.yaml`, or edit the RoleBinding's subject in pipeline.rbac.yaml to that account" in text
    )
    assert "set kubeflow.service_account to an account" not in text


def test_forbidden_pod_list_fails_the_wait_and_still_deletes_the_job() -> None:
    with (
        connected(Scenario.succeeds().forbidden("list", "pods")) as (double, client, _, _),
        pytest.raises(TfJobForbiddenError, match="to list pods in namespace") as caught,
    ):
        run(client)
    assert caught.value.verb == "list" and deletes(double)


def test_a_webhook_denial_is_a_rejected_manifest_not_missing_rbac() -> None:
    manifest = tfjob_manifest(NAME, container_name="main")
    with (
        connected(Scenario.succeeds()) as (_, client, _, _),
        pytest.raises(TfJobRejectedError, match=r"admission webhook.*container with name tensorflow") as caught,
    ):
        run(client, manifest)
    assert not isinstance(caught.value, TfJobForbiddenError)


def test_a_manifest_the_crd_schema_refuses_names_the_field() -> None:
    manifest = tfjob_manifest(NAME)
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "four"
    with (
        connected(Scenario.succeeds()) as (_, client, _, _),
        pytest.raises(TfJobRejectedError, match=r"422 Invalid.*spec.tfReplicaSpecs.Worker.replicas"),
    ):
        run(client, manifest)


def test_the_rbac_rules_are_enough_and_all_used() -> None:
    used: set[tuple[str, str]] = set()
    for scenario, expected in (
        (Scenario.succeeds(workers=2).worker_fails(0, 1, "Error", "boom"), TfJobFailedError),
        (Scenario.never_scheduled(GPU_EVENT, workers=2), TfJobNotScheduledError),
    ):
        scenario.rbac = RBAC_RULES
        with connected(scenario) as (double, client, _, _), pytest.raises(expected):
            run(client, tfjob_manifest(NAME, workers=2))
        used |= {(request.verb, request.resource) for request in double.requests}
    granted = {(verb, resource) for rule in RBAC_RULES for resource in rule["resources"] for verb in rule["verbs"]}
    assert used == granted


# -- AlreadyExists ---------------------------------------------------------------------------------------------


def test_a_lost_create_answer_adopts_the_job_it_created() -> None:
    scenario = Scenario.succeeds(workers=2)
    scenario.lose_create_answer = True
    with connected(scenario) as (double, client, lines, _):
        outcome = run(client, tfjob_manifest(NAME, workers=2))
    assert len(double.calls("POST")) == 2 and outcome.deleted
    assert any(
        "already exists and belongs to this task (Pod tfxp-trainer-pod (uid pod-uid-1))" in line for line in lines
    )


OTHER_URI = "gs://bucket/another-run/Trainer/model_run/fn_args.json"
EARLIER_POD_UID = "pod-uid-of-the-first-attempt"


@pytest.mark.parametrize(
    ("existing", "mine", "running"),
    [
        ({"owner_uid": "pod-uid-of-another-run", "fn_args_uri": OTHER_URI}, {}, f"running --fn-args {OTHER_URI}"),
        ({"owner_uid": None, "fn_args_uri": OTHER_URI}, {"owner_uid": None}, f"running --fn-args {OTHER_URI}"),
        # Manifests without arguments prove no sameness.
        ({"owner_uid": "pod-uid-of-another-run", "fn_args_uri": None}, {"fn_args_uri": None}, "no worker arguments"),
    ],
)
def test_an_existing_job_of_other_work_is_refused_and_left_alone(
    existing: dict[str, Any], mine: dict[str, Any], running: str
) -> None:
    with connected(Scenario.succeeds()) as (double, client, _, _):
        double.add_job(tfjob_manifest(NAME, **existing))
        with pytest.raises(
            TfJobConflictError, match="already exists in namespace kubeflow-user and is not this task's"
        ) as caught:
            run(client, tfjob_manifest(NAME, **mine))
    assert running in str(caught.value)
    assert not double.calls("DELETE") and NAME in double.cluster.jobs


def test_an_earlier_attempts_job_being_deleted_is_a_conflict() -> None:
    with connected(Scenario.succeeds()) as (double, client, _, _):
        double.add_job(tfjob_manifest(NAME, owner_uid=EARLIER_POD_UID))
        double.cluster.jobs[NAME]["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
        with pytest.raises(TfJobConflictError, match="it is being deleted"):
            run(client)
    assert not double.calls("DELETE")


def earlier_attempt(double: K8sApiDouble, *, ticks: int) -> dict[str, Any]:
    """The job a first attempt of the Trainer task created (its pod is gone, SIGKILLed or lost with its node), run
    `ticks` ticks of the cluster; the retry's manifest has the same name and FnArgs, another owner pod."""
    job = double.add_job(tfjob_manifest(NAME, workers=2, owner_uid=EARLIER_POD_UID))
    with double.lock:
        for _ in range(ticks):
            double.cluster.tick()
    return job


def _job_state(double: K8sApiDouble) -> list[str]:
    conditions = double.cluster.jobs[NAME]["status"]["conditions"]
    return [c["type"] for c in conditions if c["status"] == "True"]


def test_a_kfp_retry_follows_the_earlier_attempts_running_job() -> None:
    with connected(Scenario.succeeds(workers=2, run_ticks=3)) as (double, client, lines, _):
        earlier = earlier_attempt(double, ticks=2)
        assert _job_state(double)[-1] == "Running"
        outcome = run(client, tfjob_manifest(NAME, workers=2, owner_uid="pod-uid-of-the-retry"))
    uid = earlier["metadata"]["uid"]
    assert outcome.uid == uid and outcome.deleted and len(double.calls("POST")) == 1
    # The same pods trained on: each worker's container ran once, in the earlier attempt's job.
    assert double.cluster.attempts == {(uid, "Worker", 0): 1, (uid, "Worker", 1): 1}
    [adopted] = [line for line in lines if "already exists" in line]
    assert adopted == (
        f"tfjob {NAME}: already exists, created {earlier['metadata']['creationTimestamp']} by an earlier attempt of "
        f"this task (Pod tfxp-trainer-pod (uid {EARLIER_POD_UID})) for the same work (--fn-args {FN_ARGS_URI}): "
        "Running; following the earlier attempt's job"
    )
    assert [body["preconditions"]["uid"] for body in deletes(double)] == [uid]


def test_a_kfp_retry_of_an_already_succeeded_job_returns_at_once() -> None:
    with connected(Scenario.succeeds(workers=2, run_ticks=3)) as (double, client, lines, fake):
        earlier = earlier_attempt(double, ticks=8)
        assert "Succeeded" in _job_state(double)
        outcome = run(client, tfjob_manifest(NAME, workers=2, owner_uid="pod-uid-of-the-retry"))
    assert outcome.uid == earlier["metadata"]["uid"] and outcome.replicas["Worker"].succeeded == 2
    assert fake.now == 0 and outcome.seconds == 0  # no poll waited
    assert any(line.endswith(": Succeeded; following the earlier attempt's job") for line in lines)
    assert outcome.deleted and len(double.calls("POST")) == 1


def test_a_kfp_retry_replaces_the_earlier_attempts_failed_job_once() -> None:
    scenario = Scenario.succeeds(workers=2).worker_fails(1, 137, "OOMKilled", "killed")
    with connected(scenario) as (double, client, lines, _):
        earlier = earlier_attempt(double, ticks=4)
        assert "Failed" in _job_state(double)
        scenario.exits.clear()  # the node that ran out of memory is gone: the job anew runs through
        outcome = run(client, tfjob_manifest(NAME, workers=2, owner_uid="pod-uid-of-the-retry"))
    old_uid = earlier["metadata"]["uid"]
    assert outcome.uid != old_uid and outcome.replicas["Worker"].succeeded == 2
    assert len(double.calls("POST")) == 2
    assert [body["preconditions"]["uid"] for body in deletes(double)] == [old_uid, outcome.uid]
    [replaced] = [line for line in lines if "already exists" in line]
    assert replaced.endswith(
        f"and it Failed (TFJob {NAMESPACE}/{NAME} has failed because 1 Worker replica(s) failed.); deleted it, "
        "creating it anew"
    )
    assert f"tfjob {NAME}: created in namespace {NAMESPACE} (2 Worker)" in lines


def test_a_failed_job_found_again_after_replacing_one_is_followed_not_replaced_again() -> None:
    scenario = Scenario.succeeds(workers=2).worker_fails(1, 137, "OOMKilled", "killed", times=10)
    with connected(scenario) as (double, client, lines, _):
        earlier = earlier_attempt(double, ticks=4)
        failed = double.cluster.jobs[NAME]
        delete_job = double.cluster.delete_job
        deletions: list[str] = []

        def delete_and_reappear(name: str) -> None:
            # Someone puts the failed job back as soon as it is first deleted (a client that replaced it each time
            # would then create its own and succeed).
            delete_job(name)
            deletions.append(name)
            if len(deletions) == 1:
                double.cluster.jobs[name] = json.loads(json.dumps(failed))

        double.cluster.delete_job = delete_and_reappear  # type: ignore[method-assign]
        with pytest.raises(TfJobFailedError, match="has failed because 1 Worker replica"):
            run(client, tfjob_manifest(NAME, workers=2, owner_uid="pod-uid-of-the-retry"))
    assert len(double.calls("POST")) == 2
    assert sum("creating it anew" in line for line in lines) == 1
    assert any(line.endswith("Failed; following the earlier attempt's job") for line in lines)
    assert all(body["preconditions"]["uid"] == earlier["metadata"]["uid"] for body in deletes(double))


# -- cancel ----------------------------------------------------------------------------------------------------


def test_delete_is_idempotent_and_spares_a_newer_job_of_the_same_name() -> None:
    with connected(Scenario.succeeds()) as (double, client, _, _):
        client.submit(tfjob_manifest(NAME))
        assert client.delete(NAME) is True
        assert client.delete(NAME) is False
        newer = double.add_job(tfjob_manifest(NAME))
        assert client.delete(NAME) is False  # the uid precondition: not the job this client created
        assert double.cluster.jobs[NAME]["metadata"]["uid"] == newer["metadata"]["uid"]


def test_an_interrupt_during_submit_deletes_the_job_the_lost_answer_created() -> None:
    scenario = Scenario.succeeds()
    scenario.lose_create_answer = True  # stored, answered 504; the client waits before sending it again
    with connected(scenario) as (double, client, lines, _):

        def interrupt(seconds: float) -> None:
            raise KeyboardInterrupt

        client._sleep = interrupt
        with pytest.raises(KeyboardInterrupt):
            run(client)
    assert len(double.calls("POST")) == 1 and deletes(double) and not double.cluster.jobs
    assert f"tfjob {NAME}: interrupted. The TFJob {NAMESPACE}/{NAME} was deleted." in lines


def test_keyboard_interrupt_deletes_the_job_and_propagates() -> None:
    with connected(Scenario.succeeds(run_ticks=10_000)) as (double, client, lines, fake):

        def interrupt(seconds: float) -> None:
            fake.now += seconds
            if fake.now > 20:
                raise KeyboardInterrupt

        client._sleep = interrupt
        with pytest.raises(KeyboardInterrupt):
            run(client)
    assert deletes(double) and f"tfjob {NAME}: interrupted. The TFJob {NAMESPACE}/{NAME} was deleted." in lines


def test_a_job_deleted_meanwhile_ends_the_wait() -> None:
    with connected(Scenario.succeeds(run_ticks=10_000)) as (double, client, _, fake):

        def someone_deletes(seconds: float) -> None:
            fake.now += seconds
            with double.lock:
                double.cluster.jobs.pop(NAME, None)

        client._sleep = someone_deletes
        with pytest.raises(TfJobGoneError, match="was deleted while the task waited"):
            run(client)


def test_run_restores_the_previous_sigterm_handler() -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with connected(Scenario.succeeds(workers=2)) as (_, client, _, _):
            run(client, tfjob_manifest(NAME, workers=2))
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- in the task's pod -----------------------------------------------------------------------------------------


def test_task_pod_owner_reads_kfp_pod_name_and_uid() -> None:
    env = {"KFP_POD_NAME": "tfxp-digits-abc-system-container-impl-123", "KFP_POD_UID": "0f1e-uid"}
    owner = task_pod_owner(env)
    assert owner is not None and owner.to_dict() == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "tfxp-digits-abc-system-container-impl-123",
        "uid": "0f1e-uid",
        "controller": False,
        "blockOwnerDeletion": False,
    }
    assert task_pod_owner({}) is None
    with pytest.raises(TfJobError, match="KFP_POD_UID is not set while KFP_POD_NAME is"):
        task_pod_owner({"KFP_POD_NAME": "x"})


def _token(claims: dict[str, Any]) -> str:
    """A JWT as the API server signs one (the signature is not checked by the reader)."""

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'kid': 'key-1'})}.{part(claims)}.c2lnbmF0dXJl"


def _bound_token_claims(namespace: str, name: str) -> dict[str, Any]:
    return {
        "aud": ["https://kubernetes.default.svc.cluster.local"],
        "exp": 1767225600,
        "iss": "https://kubernetes.default.svc.cluster.local",
        "kubernetes.io": {
            "namespace": namespace,
            "pod": {"name": "tfxp-trainer-pod", "uid": "pod-uid-1"},
            "serviceaccount": {"name": name, "uid": "sa-uid-1"},
        },
        "sub": f"system:serviceaccount:{namespace}:{name}",
    }


def test_task_service_account_reads_the_tokens_subject(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    unpadded = set()
    for name in ("default-editor", "default-editor1", "default-editor12"):  # every base64 padding length
        token = _token(_bound_token_claims("kubeflow-user-example-com", name))
        unpadded.add(len(token.split(".")[1]) % 4)
        token_file.write_text(token)
        assert task_service_account(token_file) == ("kubeflow-user-example-com", name)
    assert unpadded == {0, 2, 3}
    assert task_service_account(tmp_path / "no-token") is None


@pytest.mark.parametrize(
    ("token", "said"),
    [
        (
            _token({"sub": "alice@example.com", "iss": "https://accounts.example.com"}),
            "its subject is 'alice@example.com'",
        ),
        (_token({"aud": ["x"]}), "its subject is None"),
        ("opaque-bearer-token", "a JWT has 3 dot-separated parts, this has 1"),
        ("e30.bm90IGpzb24.c2ln", "its payload is not JSON"),
    ],
)
def test_task_service_account_refuses_a_token_that_is_not_a_service_accounts(
    tmp_path: Path, token: str, said: str
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(token)
    with pytest.raises(TfJobError, match=rf"is not a service account token: {re.escape(said)}"):
        task_service_account(token_file)


def test_in_cluster_outside_a_cluster_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(TfJobError, match="not running inside a Kubernetes pod"):
        in_cluster()


def test_in_cluster_reads_the_pod_namespace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def fake_load(client_configuration: Any) -> None:
        client_configuration.host = "https://10.0.0.1:443"

    monkeypatch.setattr(kubernetes.config, "load_incluster_config", fake_load)
    namespace_file = tmp_path / "namespace"
    namespace_file.write_text("kubeflow-user-example-com\n")
    api, namespace = in_cluster(namespace_file=namespace_file)
    assert namespace == "kubeflow-user-example-com" and api.configuration.host == "https://10.0.0.1:443"
    assert in_cluster("given", namespace_file=tmp_path / "missing")[1] == "given"
    with pytest.raises(TfJobError, match="cannot tell which namespace"):
        in_cluster(namespace_file=tmp_path / "missing")


def test_a_manifest_for_another_namespace_is_refused_before_any_call() -> None:
    manifest = tfjob_manifest(NAME)
    manifest["metadata"]["namespace"] = "elsewhere"
    with (
        connected(Scenario.succeeds()) as (double, client, _, _),
        pytest.raises(ValueError, match="names namespace elsewhere"),
    ):
        run(client, manifest)
    assert not double.requests


def test_the_module_loads_no_ml_framework() -> None:
    assert (
        heavy_modules_loaded("import components.multinode.tfjob_client", ["tensorflow", "tfx", "kfp", "pipeline"]) == []
    )
