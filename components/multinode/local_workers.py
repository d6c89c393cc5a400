"""Training on several workers: what each worker receives, and the local launcher that plays the operator.

With `trainer.workers` > 1 the Trainer's own process does not train. It writes the `FnArgs` the workers need
(`WorkerFnArgs`, a JSON file in the Trainer's output) and starts N processes of one worker entrypoint,
`python -m components.trainer.worker --fn-args URI`, each with the `TF_CONFIG` that names the whole cluster and
its own place in it. Locally `LocalWorkers` starts them on this host (what `make test` exercises on CPU); on
Kubeflow the Training Operator starts them as the pods of a TFJob and sets `TF_CONFIG` itself
(`components.multinode.tfjob_launch`). Either way each worker runs the single-process `run_fn`, which sees
`TF_CONFIG` and trains under MultiWorkerMirroredStrategy; worker 0 is the chief and exports the model.

Example:
    args = WorkerFnArgs.from_fn_args(fn_args)
    LocalWorkers(workers=2, log_dir="/tmp/logs").run(write_fn_args(args, "/tmp/run/fn_args.json"))
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from components.multinode.worker_args import WORKER_ENV, WORKER_MODULE, WorkersError
from foundation.stop_request import StopRequest, StopRequested

logger = logging.getLogger(__name__)

PARENT_ENV = "TFXP_WORKERS_PARENT"
"""The local launcher's pid: a local worker ends itself when that process is gone (`die_with_launcher`)."""
LOG_TAIL_LINES = 40
# After one worker fails, the others block on their next collective: give them a moment to flush, then stop them.
STOP_GRACE_SECONDS = 5.0


def free_ports(count: int, host: str = "localhost") -> list[int]:
    """`count` distinct TCP ports free on `host` now (bound once, then released for the workers to take)."""
    sockets = []
    try:
        for _ in range(count):
            bound = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            bound.bind((host, 0))
            sockets.append(bound)
        return [bound.getsockname()[1] for bound in sockets]
    finally:
        for bound in sockets:
            bound.close()


def local_tf_configs(workers: int, host: str = "localhost") -> list[str]:
    """One `TF_CONFIG` per worker of a cluster on this host: worker 0 is the chief (no separate chief task, as
    in the TFJob tfxp submits)."""
    cluster = {"worker": [f"{host}:{port}" for port in free_ports(workers, host)]}
    return [json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}) for index in range(workers)]


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[str]
    log_path: Path
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_TAIL_LINES))
    reader: threading.Thread | None = None


def _forward(worker: _Worker, stream: IO[str]) -> None:
    with worker.log_path.open("a", encoding="utf-8") as log:
        for line in stream:
            log.write(line)
            log.flush()
            worker.tail.append(line.rstrip("\n"))


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class LocalWorkers:
    """Runs N worker processes on this host with `TF_CONFIG`, the way the Training Operator runs TFJob pods.

    Each worker's output goes to `<log_dir>/worker-<i>.log` (the Trainer's model_run folder in a local run). When
    one worker fails the others are stopped (they would block on their next collective),
    and the error names it with the end of its log. Stopping this process (SIGTERM, Ctrl-C) stops them too.
    """

    def __init__(self, workers: int, log_dir: str, timeout_seconds: float | None = None) -> None:
        if workers < 2:
            raise ValueError(f"LocalWorkers needs at least 2 workers, got {workers}")
        cores = os.cpu_count() or 1
        if workers > max(cores, 2):
            raise WorkersError(
                f"trainer.workers={workers} local processes on a host with {cores} cores would only compete for "
                f"them; use at most {max(cores, 2)} here (several workers are meant for several nodes: Kubeflow)"
            )
        self.workers = workers
        self.log_dir = Path(log_dir)
        self.timeout_seconds = timeout_seconds

    def command(self, fn_args_uri: str) -> list[str]:
        """The worker entrypoint's command line (the same one the TFJob's pods run)."""
        return [sys.executable, "-m", WORKER_MODULE, "--fn-args", fn_args_uri]

    def run(self, fn_args_uri: str) -> float:
        """Starts the workers, waits for all of them; returns the seconds they took.

        Raises:
            WorkersError: a worker failed (names it, its exit status and its log's end), or the deadline passed.
        """
        self.log_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        running: list[_Worker] = []
        # SIGTERM/SIGINT are recorded (foundation/stop_request.py), not raised mid-Popen: the loop below stops the
        # workers it started and exits as the signal would have (143 for SIGTERM, KeyboardInterrupt for Ctrl-C).
        with StopRequest() as stop:
            try:
                for index, tf_config in enumerate(local_tf_configs(self.workers)):
                    stop.raise_if_requested()
                    running.append(self._start(index, tf_config, fn_args_uri))
                logger.info("trainer: %d local workers started (logs in %s)", self.workers, self.log_dir)
                self._wait(running, started, stop)
            except StopRequested as request:
                logger.warning("trainer: %s received; stopping the %d local workers", request, len(running))
                if request.signum == signal.SIGINT:
                    raise KeyboardInterrupt from None
                raise SystemExit(request.exit_status) from None
            finally:
                _stop(running)
        return time.monotonic() - started

    def _start(self, index: int, tf_config: str, fn_args_uri: str) -> _Worker:
        log_path = self.log_dir / f"worker-{index}.log"
        log_path.write_text("", encoding="utf-8")
        env = {**os.environ, "TF_CONFIG": tf_config, WORKER_ENV: "1", PARENT_ENV: str(os.getpid())}
        process = subprocess.Popen(
            self.command(fn_args_uri),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # a Ctrl-C reaches this process, which stops the workers in order
        )
        worker = _Worker(index=index, process=process, log_path=log_path)
        assert process.stdout is not None
        worker.reader = threading.Thread(target=_forward, args=(worker, process.stdout), daemon=True)
        worker.reader.start()
        return worker

    def _wait(self, running: list[_Worker], started: float, stop: StopRequest) -> None:
        while True:
            stop.raise_if_requested()
            codes = [worker.process.poll() for worker in running]
            failed = [worker for worker, code in zip(running, codes, strict=True) if code not in (None, 0)]
            if failed:
                time.sleep(STOP_GRACE_SECONDS if any(code is None for code in codes) else 0)
                raise self._failure(failed[0], running)
            if all(code == 0 for code in codes):
                for worker in running:
                    if worker.reader is not None:
                        worker.reader.join(timeout=10)
                return
            if self.timeout_seconds is not None and time.monotonic() - started > self.timeout_seconds:
                raise WorkersError(
                    f"trainer: the {self.workers} local workers did not finish within {self.timeout_seconds:.0f} s; "
                    f"they were stopped. Their logs: {self.log_dir}"
                )
            stop.wait(0.2)

    def _failure(self, worker: _Worker, running: list[_Worker]) -> WorkersError:
        if worker.reader is not None:
            worker.reader.join(timeout=5)
        code = worker.process.returncode
        tail = "\n".join(f"  {line}" for line in worker.tail) or "  (no output)"
        others = ", ".join(str(other.index) for other in running if other is not worker)
        return WorkersError(
            f"trainer: worker {worker.index} of {self.workers} failed ({_describe_exit(code)}); workers {others} were "
            f"stopped. Its log ({worker.log_path}) ends:\n{tail}"
        )


def die_with_launcher(env: Mapping[str, str] = os.environ) -> None:
    """In a local worker: have the kernel send SIGTERM when the launcher dies, even by SIGKILL (Linux prctl(2),
    PR_SET_PDEATHSIG), and end now if it already died. Called first thing in the worker's own process: a
    `preexec_fn` would run between fork and exec of a process whose other threads (TensorFlow's) may hold locks."""
    parent = env.get(PARENT_ENV)
    if not parent:
        return  # a TFJob pod: the operator and the kubelet own its life
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != int(parent):
        raise SystemExit(f"components.trainer.worker: the launcher (pid {parent}) is gone; stopping")


def _stop(running: Sequence[_Worker]) -> None:
    """SIGTERM every worker still running, then SIGKILL what is left after a grace period."""
    alive = [worker for worker in running if worker.process.poll() is None]
    for worker in alive:
        _signal_group(worker.process, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for worker in alive:
        try:
            worker.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _signal_group(worker.process, signal.SIGKILL)
            worker.process.wait()


def _signal_group(process: subprocess.Popen[str], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)
