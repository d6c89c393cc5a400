"""SIGTERM at every moment of TfJobClient.run's life: it never hangs and never leaves the TFJob behind.

Each case runs the client in a process of its own against the Kubernetes API double (tests/support/k8s_api_double.py),
through the real `kubernetes` client, and sends SIGTERM at a chosen moment: while the create is in flight, while
its answer was lost and the client waits to send it again, while a poll's GET or LIST is in flight, while an
answer trickles in one byte at a time (no socket timeout trips), while the deletion is in flight (a second
SIGTERM), while a deletion never answers, and at random moments. The process must exit with 143 within
STOP_BOUND_SECONDS of the signal, with no traceback, and the job must be gone (or the log must say it could not
be deleted, with the command that does it).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from k8s_api_double import K8sApiDouble, Scenario, serve

from components.multinode.tfjob_client import SIGTERM_EXIT_STATUS, STOP_BOUND_SECONDS

# A client process per case, and bounds of seconds: out of `make unit`.
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
DELETED = "The TFJob kubeflow-user/tfxp-train was deleted."
SCRIPT = """
import sys
import kubernetes
sys.path.insert(0, sys.argv[2])
from k8s_api_double import tfjob_manifest
from components.multinode.tfjob_client import TfJobClient

api = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=sys.argv[1]))
client = TfJobClient(api, "kubeflow-user", poll_seconds=0.05, log=lambda line: print(line, flush=True))
print("client ready", flush=True)
client.run(tfjob_manifest("tfxp-train", workers=2), timeout_seconds=600, schedule_timeout_seconds=600)
print("run returned", flush=True)
"""


@dataclass
class Stopped:
    code: int
    output: str
    exit_seconds: float  # from the (last) SIGTERM to the process's exit
    double: K8sApiDouble


def stop_at(
    moment: Callable[[K8sApiDouble, subprocess.Popen[str]], None],
    *,
    scenario: Scenario | None = None,
    prepare: Callable[[K8sApiDouble], None] = lambda double: None,
    again: Callable[[K8sApiDouble], None] | None = None,
) -> Stopped:
    """Starts the client, waits for `moment(double, process)` to return, sends SIGTERM (and a second one once
    `again(double)` returns), and waits for the process to end."""
    double = K8sApiDouble(scenario or Scenario.succeeds(workers=2, run_ticks=10**9))
    prepare(double)
    with serve(double) as url:
        process = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, url, str(REPO / "tests" / "support")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            moment(double, process)
            process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            if again is not None:
                again(double)
                process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=STOP_BOUND_SECONDS + 10)
            exit_seconds = time.monotonic() - signalled
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    return Stopped(process.returncode, output, exit_seconds, double)


def until(condition: Callable[[], bool], process: subprocess.Popen[str], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"the client ended before {what}: {process.communicate()[0]}"
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds} s"
        time.sleep(0.01)


def running(double: K8sApiDouble) -> bool:
    with double.lock:
        jobs = list(double.cluster.jobs.values())
    return any(
        c["type"] == "Running" and c["status"] == "True"
        for job in jobs
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def when_running(then: Callable[[K8sApiDouble], Any] | None = None) -> Callable[..., None]:
    """The moment: the job runs, then (optionally) `then(double)` makes the next answers slow and returns the
    SlowAnswer whose start is the moment."""

    def moment(double: K8sApiDouble, process: subprocess.Popen[str]) -> None:
        until(lambda: running(double), process, "the job running")
        if then is not None:
            slow = then(double)
            until(slow.started.is_set, process, "the slow answer starting")
            time.sleep(0.2)  # well inside the slow answer

    return moment


def assert_stopped_cleanly(stopped: Stopped, *, note: str = DELETED) -> None:
    assert stopped.code == SIGTERM_EXIT_STATUS, stopped.output
    assert "Traceback" not in stopped.output and "run returned" not in stopped.output, stopped.output
    assert f"SIGTERM (the run is being stopped). {note}" in stopped.output, stopped.output
    assert stopped.exit_seconds < STOP_BOUND_SECONDS, f"exited {stopped.exit_seconds:.1f} s after SIGTERM"
    with stopped.double.lock:
        assert not stopped.double.cluster.jobs, stopped.output


def test_the_bound_is_inside_kubernetes_default_grace_period() -> None:
    assert STOP_BOUND_SECONDS <= 25  # terminationGracePeriodSeconds defaults to 30


def test_sigterm_while_the_create_is_in_flight_waits_for_it_and_deletes_the_job() -> None:
    slow = {}

    def prepare(double: K8sApiDouble) -> None:
        slow["create"] = double.slow_answer("create", seconds=2.0, times=1)

    def moment(double: K8sApiDouble, process: subprocess.Popen[str]) -> None:
        until(slow["create"].started.is_set, process, "the create in flight")

    stopped = stop_at(moment, prepare=prepare)
    assert_stopped_cleanly(stopped)
    assert stopped.exit_seconds >= 1.0  # the create's answer was waited for, not abandoned


def test_sigterm_while_a_lost_create_waits_to_be_sent_again_deletes_the_job_it_made() -> None:
    scenario = Scenario.succeeds(workers=2, run_ticks=10**9)
    scenario.lose_create_answer = True  # stored, but answered 504: the client waits 1 s, then sends it again

    def moment(double: K8sApiDouble, process: subprocess.Popen[str]) -> None:
        until(lambda: bool(double.calls("POST")), process, "the first create")
        time.sleep(0.3)

    stopped = stop_at(moment, scenario=scenario)
    assert_stopped_cleanly(stopped)
    assert len(stopped.double.calls("POST")) == 1 and stopped.exit_seconds < 3.0


@pytest.mark.parametrize(
    ("verb", "resource", "trickle"),
    [("get", "tfjobs", False), ("get", "tfjobs", True), ("list", "pods", False), ("list", "pods", True)],
    ids=["get-silent", "get-trickled", "list-silent", "list-trickled"],
)
def test_sigterm_during_a_poll_abandons_the_read_and_deletes_at_once(verb: str, resource: str, trickle: bool) -> None:
    stopped = stop_at(when_running(lambda d: d.slow_answer(verb, resource, seconds=120.0, trickle=trickle)))
    assert_stopped_cleanly(stopped)
    assert stopped.exit_seconds < 5.0  # not the read's 40 s deadline
    [delete] = stopped.double.calls("DELETE")
    assert delete.body["propagationPolicy"] == "Background" and not stopped.double.cluster.pods


def test_a_second_sigterm_during_the_deletion_changes_nothing() -> None:
    slow = {}

    def moment(double: K8sApiDouble, process: subprocess.Popen[str]) -> None:
        when_running()(double, process)
        slow["delete"] = double.slow_answer("delete", seconds=2.0)

    stopped = stop_at(moment, again=lambda double: slow["delete"].started.wait(30))
    assert_stopped_cleanly(stopped)
    assert len(stopped.double.calls("DELETE")) == 1


def test_a_deletion_that_never_answers_ends_within_the_bound_and_says_so() -> None:
    def moment(double: K8sApiDouble, process: subprocess.Popen[str]) -> None:
        when_running()(double, process)
        double.slow_answer("delete", seconds=120.0, trickle=True)

    stopped = stop_at(moment)
    assert stopped.code == SIGTERM_EXIT_STATUS and "Traceback" not in stopped.output, stopped.output
    assert "could not be deleted" in stopped.output and "kubectl -n kubeflow-user delete tfjob tfxp-train" in (
        stopped.output
    )
    assert stopped.exit_seconds < STOP_BOUND_SECONDS


@pytest.mark.parametrize("seed", range(int(os.environ.get("TFXP_SIGTERM_RANDOM_RUNS", "6"))))
def test_sigterm_at_a_random_moment_never_hangs_and_never_leaves_the_job(seed: int) -> None:
    """Anywhere from start-up to the job running; slow answers on every call make the in-flight moments likely."""
    chance = random.Random(seed)
    delay = chance.uniform(0.0, 3.0)

    def prepare(double: K8sApiDouble) -> None:
        for verb, resource in (("create", "tfjobs"), ("get", "tfjobs"), ("list", "pods")):
            double.slow_answer(verb, resource, seconds=chance.uniform(0.0, 0.4), trickle=chance.random() < 0.5)

    def moment(double: K8sApiDouble, process: subprocess.Popen[str]) -> None:
        time.sleep(delay)

    stopped = stop_at(moment, prepare=prepare)
    assert "Traceback" not in stopped.output, stopped.output
    assert stopped.exit_seconds < STOP_BOUND_SECONDS
    if "client ready" in stopped.output and stopped.code == SIGTERM_EXIT_STATUS:
        assert "SIGTERM (the run is being stopped)" in stopped.output or not stopped.double.calls("POST")
    else:  # stopped before `run` caught SIGTERM: killed by it, nothing was created
        assert stopped.code in (-signal.SIGTERM, SIGTERM_EXIT_STATUS), stopped.output
        assert not stopped.double.calls("POST"), stopped.output
    with stopped.double.lock:
        assert not stopped.double.cluster.jobs, f"after {delay:.2f} s: {stopped.output}"
