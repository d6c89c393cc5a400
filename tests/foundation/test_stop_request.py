"""foundation/stop_request.py and the places that turn SIGTERM/SIGINT into cleanup through it.

The TFJob client's cases are in test_tfjob_client_sigterm.py; here: the recorder itself, `with_deadline`'s
abandoned call, and the local worker launcher stopped at random moments of its start-up and wait (its workers
are stand-ins that only sleep, so each case takes a second, not a training run).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from foundation.deadline import with_deadline
from foundation.stop_request import StopRequest, StopRequested

REPO = Path(__file__).resolve().parents[2]


def test_a_signal_is_recorded_not_raised_and_wakes_the_wait() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        assert stop.installed and stop.requested is None and not stop.wait(0.01)
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        started = time.monotonic()
        assert stop.wait(30.0)  # woken by the signal, not by the 30 s
        assert time.monotonic() - started < 5.0
        assert stop.requested == signal.SIGTERM and stop.exit_status == 143
        os.kill(os.getpid(), signal.SIGINT)  # a second signal: recorded already, the first one stays
        assert stop.requested == signal.SIGTERM
        with pytest.raises(StopRequested) as raised:
            stop.raise_if_requested()
        assert raised.value.signum == signal.SIGTERM and raised.value.exit_status == 143
    assert signal.getsignal(signal.SIGTERM) is previous


def test_off_the_main_thread_nothing_is_installed() -> None:
    seen: dict[str, object] = {}

    def elsewhere() -> None:
        with StopRequest() as stop:
            seen["installed"] = stop.installed
            seen["woke"] = stop.wait(0.01)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen == {"installed": False, "woke": False}


def test_with_deadline_abandons_the_call_on_a_stop_signal() -> None:
    release = threading.Event()
    with StopRequest() as stop:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        started = time.monotonic()
        with pytest.raises(StopRequested):
            with_deadline(lambda: release.wait(60), 60.0, TimeoutError("late"), stop=stop)
        assert time.monotonic() - started < 5.0
        with pytest.raises(StopRequested):  # and a stop already received starts no call at all
            with_deadline(lambda: pytest.fail("called after the stop"), 60.0, TimeoutError("late"), stop=stop)
    release.set()


def test_without_a_stop_the_deadline_alone_ends_the_wait() -> None:
    with pytest.raises(TimeoutError, match="late"):
        with_deadline(lambda: time.sleep(5), 0.2, TimeoutError("late"))


LAUNCHER = """
import sys
from components.multinode.local_workers import LocalWorkers

class Sleepers(LocalWorkers):
    def command(self, fn_args_uri):
        return [sys.executable, "-c", "import os, sys, time; open(os.path.join(sys.argv[1], str(os.getpid())), 'w');"
                " time.sleep(120)", sys.argv[2]]

print("launcher ready", flush=True)
Sleepers(2, sys.argv[1]).run("unused")
print("run returned", flush=True)
"""


@pytest.mark.parametrize("seed", range(int(os.environ.get("TFXP_SIGTERM_RANDOM_RUNS", "6"))))
def test_the_local_worker_launcher_stopped_at_any_moment_leaves_no_worker(tmp_path: Path, seed: int) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(tmp_path / "logs"), str(pids)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        time.sleep(random.Random(seed).uniform(0.0, 2.5))
        launcher.send_signal(signal.SIGTERM)
        output, _ = launcher.communicate(timeout=30)  # the workers get SIGTERM, then SIGKILL after 10 s
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode in (143, -signal.SIGTERM), output
    assert "Traceback" not in output and "run returned" not in output, output
    left = []
    for entry in pids.iterdir():
        try:
            process = psutil.Process(int(entry.name))
        except psutil.NoSuchProcess:
            continue
        _, alive = psutil.wait_procs([process], timeout=15)
        left += alive
    for process in left:
        process.kill()
    assert not left, f"workers left behind: {left}\n{output}"


TASK_RUNNER = """
import sys
from pathlib import Path
from foundation.stop_request import StopRequested
from pipeline.kubeflow.emulator.local_task import run_command

task = ("import signal, sys, time\\n"
        "def stop(*_):\\n    print('task got SIGTERM', flush=True)\\n    sys.exit(143)\\n"
        "signal.signal(signal.SIGTERM, stop)\\nprint('task running', flush=True)\\ntime.sleep(120)\\n")
try:
    run_command([sys.executable, "-c", task], Path(sys.argv[1]))
except StopRequested as stop:
    print(f"run_command: {stop}", flush=True)
    sys.exit(stop.exit_status)
print("run_command returned", flush=True)
"""


def test_run_spec_stops_its_running_task_as_kubernetes_stops_a_pod(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    runner = subprocess.Popen(
        [sys.executable, "-c", TASK_RUNNER, str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 60
        while "task running" not in (log.read_text() if log.exists() else ""):
            assert runner.poll() is None and time.monotonic() < deadline, runner.communicate()[0]
            time.sleep(0.05)
        runner.send_signal(signal.SIGTERM)
        output, _ = runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 143 and "run_command: SIGTERM" in output, output
    assert "task got SIGTERM" in log.read_text()  # the task was told, and had its grace period to end
