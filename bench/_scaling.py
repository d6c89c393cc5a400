"""Multi-worker scaling runs of the Trainer, for `bench/train_throughput.py --workers N1 N2 ...`.

Each run is one whole Trainer run (`run_fn`: set-up, fit, evaluate, export) the way `trainer.workers: N` trains
locally: N = 1 is `run_fn` in a fresh process without TF_CONFIG; N ≥ 2 goes through `LocalWorkers`, the real
launcher (N processes of `python -m components.trainer.worker` with TF_CONFIG, MultiWorkerMirroredStrategy).
What a run measures is what its chief wrote into `training_metrics.json`.

Run as a script, this file is the one-worker child: `python bench/_scaling.py FN_ARGS_JSON`.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import command_line, machine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# After the sys.path entry. None of these imports TensorFlow: the parent process never starts it.
from components.multinode.launch import check_exported  # noqa: E402
from components.multinode.local_workers import LocalWorkers  # noqa: E402
from components.multinode.worker_args import (  # noqa: E402
    FN_ARGS_FILE,
    WorkerFnArgs,
    WorkersError,
    read_fn_args,
    write_fn_args,
)
from components.trainer.options import RunOptions, TrainerOptions  # noqa: E402
from foundation.contract import TRAINING_METRICS_FILE  # noqa: E402

# components.trainer.callbacks.ThroughputCallback leaves a run's first 5 steps out of images/s (tracing, the
# input pipeline filling): a run trains this many steps more than the timed ones.
THROUGHPUT_SKIP_STEPS = 5
LOG_TAIL_LINES = 40
IMAGES_PER_SECOND_COUNTS = (
    "global images per second: trainer.batch_size × every replica of every worker, per second of the chief's "
    "step time (training_metrics.json `images_per_second`, components/trainer/callbacks.py ThroughputCallback)"
)
# What each run keeps from its chief's training_metrics.json.
KEPT_METRICS = (
    "images_per_second",
    "workers",
    "replicas",
    "strategy",
    "global_batch",
    "measured_steps",
    "step_time_ms_p50",
    "final_accuracy",
)


def scaling_trainer(base: TrainerOptions, steps: int, workers: int) -> TrainerOptions:
    """`base` trained for `steps` timed steps, all in one epoch (no backup between epochs), on `workers` workers.

    Raises:
        pydantic.ValidationError: `workers` is out of range (`trainer.workers`).
    """
    train_steps = steps + THROUGHPUT_SKIP_STEPS
    changes = {"train_steps": train_steps, "steps_per_epoch": train_steps, "workers": workers, "strategy": "auto"}
    return TrainerOptions.model_validate({**base.model_dump(mode="json"), **changes})


def fn_args_for(data_dir: Path, run_dir: Path, trainer: TrainerOptions) -> WorkerFnArgs:
    """The FnArgs the TFX Trainer would pass `run_fn` for the data set at `data_dir` (train/, eval/, labels.txt),
    with the outputs under `run_dir`."""
    run = RunOptions(trainer=trainer, labels_path=str(data_dir / "labels.txt"))
    return WorkerFnArgs(
        custom_config=run.model_dump(mode="json"),
        train_steps=trainer.train_steps,
        train_files=[str(data_dir / "train" / "*")],
        eval_files=[str(data_dir / "eval" / "*")],
        serving_model_dir=str(run_dir / "Model" / "Format-Serving"),
        model_run_dir=str(run_dir / "model_run" / "1"),
    )


def run_trainer(workers: int, args: WorkerFnArgs) -> float:
    """Trains as `trainer.workers: workers` does locally; returns the wall seconds (process start to export).

    Logs: `<model_run>/workers/worker-<i>.log` (`LocalWorkers`), `<model_run>/workers/trainer.log` for one worker.

    Raises:
        WorkersError: a process failed (names it and the end of its log), or no SavedModel was exported.
    """
    model_run = Path(args.model_run_dir)
    model_run.mkdir(parents=True, exist_ok=True)
    fn_args_uri = write_fn_args(args, str(model_run / FN_ARGS_FILE))
    log_dir = model_run / "workers"
    started = time.perf_counter()
    if workers == 1:
        log_dir.mkdir()
        _run_one_process(fn_args_uri, log_dir / "trainer.log")
    else:
        LocalWorkers(workers, str(log_dir)).run(fn_args_uri)
    seconds = time.perf_counter() - started
    check_exported(args.serving_model_dir, workers)
    return seconds


def _run_one_process(fn_args_uri: str, log_path: Path) -> None:
    environment = {name: value for name, value in os.environ.items() if name != "TF_CONFIG"}
    command = [sys.executable, str(Path(__file__).resolve()), fn_args_uri]
    with log_path.open("w", encoding="utf-8") as log:
        code = subprocess.run(command, env=environment, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]
        tail = "\n".join(f"  {line}" for line in lines) or "  (no output)"
        raise WorkersError(f"the one-process Trainer run failed (exit code {code}); its log ({log_path}) ends:\n{tail}")


def measure_workers(
    counts: list[int], data_dir: Path, base: TrainerOptions, steps: int, rounds: int, work: Path
) -> dict[int, list[dict[str, Any]]]:
    """One Trainer run per worker count and round (the counts rotated each round); per count, what each run's
    chief recorded (`KEPT_METRICS`), its wall `seconds` and its `fit_seconds`.

    Raises:
        WorkersError: a run failed.
    """
    runs: dict[int, list[dict[str, Any]]] = {count: [] for count in counts}
    for round_index in range(rounds):
        shift = round_index % len(counts)
        for count in counts[shift:] + counts[:shift]:
            run_dir = work / f"round{round_index}-workers{count}"
            args = fn_args_for(data_dir, run_dir, scaling_trainer(base, steps, count))
            seconds = run_trainer(count, args)
            metrics = json.loads((Path(args.model_run_dir) / TRAINING_METRICS_FILE).read_text(encoding="utf-8"))
            run = {"seconds": seconds, "fit_seconds": metrics["phase_seconds"]["fit"]}
            run.update({key: metrics[key] for key in KEPT_METRICS})
            runs[count].append(run)
            print(
                f"round {round_index + 1}/{rounds}: {count} worker(s), {run['replicas']} replica(s): "
                f"{run['images_per_second']:.0f} img/s, {seconds:.1f} s",
                flush=True,
            )
    return runs


def scaling_report(
    runs: dict[int, list[dict[str, Any]]], trainer: TrainerOptions, steps: int, rounds: int, data: str
) -> dict[str, Any]:
    """The JSON report: per N its runs, the medians and E(N) = T(N) / (N · T(1)); `runs` must hold N = 1."""
    images = {count: statistics.median(run["images_per_second"] for run in each) for count, each in runs.items()}
    seconds = {count: statistics.median(run["seconds"] for run in each) for count, each in runs.items()}
    cores = os.cpu_count() or 1
    return {
        "benchmark": "train_throughput",
        "mode": "workers",
        "command": command_line(),
        "machine": machine(),
        "host_cores": cores,
        "data": data,
        "trainer": trainer.model_dump(mode="json"),
        "trainer_note": "the N = 1 run's trainer section; the N-worker run sets trainer.workers = N, nothing else",
        "per_replica_batch": trainer.batch_size,
        "timed_steps": steps,
        "rounds": rounds,
        "images_per_second_counts": IMAGES_PER_SECOND_COUNTS,
        "seconds_count": "wall seconds of the whole Trainer run: process start-up, set-up, fit, evaluate, export",
        "runs": {str(count): each for count, each in runs.items()},
        "median_images_per_second": {str(count): value for count, value in images.items()},
        "median_seconds": {str(count): value for count, value in seconds.items()},
        "scaling_efficiency_formula": "E(N) = T(N) / (N · T(1)), T = median_images_per_second of this run",
        "scaling_efficiency": {str(count): images[count] / (count * images[1]) for count in runs},
        "note": (
            f"all workers share this host's {cores} cores ({cores} / N each) and all-reduce over loopback gRPC "
            "(ring): E(N) measures that sharing, not N nodes with their own GPUs and NCCL"
        ),
    }


def main(fn_args_uri: str) -> None:
    """The one-worker child: the Trainer's `run_fn` on the FnArgs at `fn_args_uri`, in this process."""
    from types import SimpleNamespace

    from components.trainer.run_fn import run_fn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_fn(SimpleNamespace(**vars(read_fn_args(fn_args_uri))))


if __name__ == "__main__":
    main(sys.argv[1])
