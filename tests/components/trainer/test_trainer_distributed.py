"""The Trainer under distribution strategies, mixed precision, XLA and a kill -9, each in fresh processes.

Device layout (two logical CPUs) and MultiWorkerMirroredStrategy must be set before TensorFlow initializes,
so these tests run `train_and_export` in child processes: this file doubles as the child script.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import load_config

TINY = {
    "image_size": 8,
    "channels": 1,
    "width": 4,
    "batch_size": 16,
    "train_steps": 8,
    "steps_per_epoch": 4,
    "schedule": {"warmup_steps": 2},
    "deterministic": True,
    "cache": True,
}
CHILD_TIMEOUT = 240


def _child_command(job: dict[str, Any]) -> list[str]:
    return [sys.executable, __file__, json.dumps(job)]


def _child_env(**extra: str) -> dict[str, str]:
    repo = str(Path(__file__).resolve().parents[3])
    return {**os.environ, "PYTHONPATH": repo, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


def run_child(job: dict[str, Any], **env: str) -> list[dict[str, Any]]:
    """Runs the child in a fresh process; returns the metrics of each training it ran."""
    result = subprocess.run(
        _child_command(job), env=_child_env(**env), capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False
    )
    assert result.returncode == 0, f"child failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return _metrics(result.stdout)


def _metrics(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix("METRICS ")) for line in stdout.splitlines() if line.startswith("METRICS ")]


def _job(digits_dir: Path, out: Path, **trainer: Any) -> dict[str, Any]:
    return {"data": str(digits_dir), "out": str(out), "trainer": {**TINY, **trainer}}


@pytest.fixture(scope="module")
def one_process_runs(digits_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Four trainings in one child process with two logical CPU devices (one TensorFlow start-up for all)."""
    out = tmp_path_factory.mktemp("strategies")
    runs = {
        # Same global batch (1 × 32 vs 2 × 16), seed and data order: only BatchNorm's per-replica statistics differ.
        "single": _job(digits_dir, out / "single", batch_size=32, strategy="default"),
        "mirrored": _job(digits_dir, out / "mirrored", batch_size=16, strategy="mirrored"),
        # bfloat16 and XLA apart: XLA-compiling bfloat16 graphs on CPU takes ~40 s, each alone a few seconds.
        "bfloat16": _job(digits_dir, out / "bfloat16", precision="mixed_bfloat16", strategy="default"),
        "xla": _job(digits_dir, out / "xla", xla="on", strategy="default"),
    }
    metrics = run_child({"logical_cpus": 2, "runs": list(runs.values())})
    return {name: {**each, "out": runs[name]["out"]} for name, each in zip(runs, metrics, strict=True)}


@pytest.mark.slow
def test_mirrored_over_two_cpus_trains_close_to_single_device(one_process_runs: dict[str, dict[str, Any]]) -> None:
    single, mirrored = one_process_runs["single"], one_process_runs["mirrored"]
    assert (single["replicas"], mirrored["replicas"]) == (1, 2)
    assert mirrored["strategy"] == "mirrored" and mirrored["global_batch"] == single["global_batch"] == 32
    assert mirrored["xla"] is False  # xla=auto is off with several CPU replicas
    assert mirrored["final_train_loss"] == pytest.approx(single["final_train_loss"], rel=0.15)
    assert (Path(mirrored["out"]) / "model" / "saved_model.pb").exists()


@pytest.mark.slow
def test_xla_on_one_cpu_device_trains(one_process_runs: dict[str, dict[str, Any]]) -> None:
    import numpy as np

    xla = one_process_runs["xla"]
    assert xla["xla"] is True and xla["replicas"] == 1 and np.isfinite(xla["final_loss"])


@pytest.mark.slow
def test_mixed_bfloat16_on_cpu_keeps_float32_head_and_signatures(one_process_runs: dict[str, dict[str, Any]]) -> None:
    import numpy as np
    import tensorflow as tf

    bf16 = one_process_runs["bfloat16"]
    assert bf16["precision"] == "mixed_bfloat16"
    assert bf16["head_dtypes"] == ["float32", "float32"] and bf16["body_compute_dtype"] == "bfloat16"
    assert bf16["loss_scaling"] is False  # Keras scales losses for float16 only; bfloat16 has float32's range
    assert np.isfinite(bf16["final_loss"])
    loaded = tf.saved_model.load(str(Path(bf16["out"]) / "model"))
    outputs = loaded.signatures["serving_preprocessed"](images=tf.zeros([2, 8, 8, 1]))
    assert outputs["probabilities"].dtype == tf.float32
    graph_dtypes = {
        attr.type
        for function in loaded.signatures["serving_preprocessed"].graph.as_graph_def().library.function
        for node in function.node_def
        for attr in node.attr.values()
    }
    assert tf.bfloat16.as_datatype_enum not in graph_dtypes  # exported in float32: nothing for serving to emulate


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


# What TF's coordination service reports when a worker misses its heartbeats. On a loaded 2-core VM that
# happened once in a full-suite CI run (the chief's first collective after fit aborted); a real bug fails twice.
HEARTBEAT_LOSS = "stopped sending heartbeats"


def _two_workers(digits_dir: Path, root: Path) -> list[tuple[int, str, str]]:
    """Runs the two-worker job under `root`; (return code, stdout, stderr) per worker."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    # The multinode config's recipe (LARS, polynomial decay, label smoothing) on the tiny model: the recipe
    # across MultiWorkerMirroredStrategy, its trust ratio on all-reduced gradients.
    multinode = load_config(Path(__file__).resolve().parents[3] / "configs/imagenet_a100_multinode.yaml").trainer
    recipe = {
        "optimizer": multinode.optimizer.model_dump(mode="json"),
        "schedule": {**multinode.schedule.model_dump(mode="json"), "warmup_epochs": 0, "warmup_steps": 2},
        "label_smoothing": multinode.label_smoothing,
    }
    job = _job(digits_dir, root / "shared", strategy="auto", **recipe)
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
        scratch = root / f"tmp{index}"
        scratch.mkdir(parents=True)
        processes.append(
            subprocess.Popen(
                _child_command(job),
                env=_child_env(TF_CONFIG=tf_config, TMPDIR=str(scratch)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [process.communicate(timeout=CHILD_TIMEOUT) for process in processes]
    return [(process.returncode, *output) for process, output in zip(processes, outputs, strict=True)]


@pytest.mark.slow
def test_multi_worker_two_processes_only_chief_exports(digits_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "attempt1"
    results = _two_workers(digits_dir, root)
    if any(code != 0 and HEARTBEAT_LOSS in stderr for code, _, stderr in results):
        root = tmp_path / "attempt2"  # a starved machine, not the trainer: once more
        results = _two_workers(digits_dir, root)
    outputs = [(stdout, stderr) for _, stdout, stderr in results]
    for code, stdout, stderr in results:
        assert code == 0, f"worker failed:\n{stdout[-3000:]}\n{stderr[-5000:]}"
    (chief,), (other,) = (_metrics(stdout) for stdout, _ in outputs)
    assert chief["strategy"] == other["strategy"] == "multi_worker"
    assert chief["replicas"] == 2 and chief["global_batch"] == 32
    assert chief["recipe"]["optimizer_class"] == "Lars" and chief["recipe"]["schedule"]["name"] == "polynomial"
    assert chief["final_loss"] == pytest.approx(other["final_loss"], rel=1e-5)  # one synchronous model
    assert chief["chief"] is True and other["chief"] is False
    shared = root / "shared"
    assert (shared / "model" / "saved_model.pb").exists()
    assert json.loads((shared / "run" / "training_metrics.json").read_text())["final_loss"] == chief["final_loss"]
    # The non-chief exported into a temp dir that is gone again; no worker left a backup behind.
    assert not list((root / "tmp1").iterdir())
    assert not list(shared.glob("backup/*"))


@pytest.mark.slow
def test_killed_training_resumes_from_its_last_epoch(digits_dir: Path, tmp_path: Path) -> None:
    job = _job(digits_dir, tmp_path)
    process = subprocess.Popen(
        _child_command({**job, "hang_after_epoch": 1}),
        env=_child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + CHILD_TIMEOUT
    for line in process.stdout:  # the child prints HANGING once epoch 1 (0-based 0) is backed up
        if line.startswith("HANGING") or time.monotonic() > deadline:
            break
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert list((tmp_path / "backup").iterdir()), "the killed run left its backup"

    (resumed,) = run_child(job)
    assert resumed["start_epoch"] == 1  # 0-based: the second epoch, not a fresh start
    assert resumed["steps"] == TINY["train_steps"] - TINY["steps_per_epoch"]  # only the remaining steps ran
    assert not (tmp_path / "backup").exists()  # a finished run leaves no stale backup


# ---- the child process ----


def _child(job: dict[str, Any]) -> None:
    import tensorflow as tf

    if job.get("logical_cpus"):
        (cpu,) = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * job["logical_cpus"])
    import tf_keras as keras

    from components.trainer.options import RunOptions, TrainerOptions
    from components.trainer.training import TrainerPaths, train_and_export

    class Inspect(keras.callbacks.Callback):
        """Records the trained model's layer dtypes; optionally hangs after an epoch (to be killed)."""

        def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
            layers = [self.model.get_layer("logits"), self.model.get_layer("probabilities")]
            self.head = [layer.dtype_policy.name for layer in layers]
            self.body = self.model.get_layer("stem_conv").compute_dtype

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            if job.get("hang_after_epoch") == epoch + 1:
                print("HANGING", flush=True)
                time.sleep(CHILD_TIMEOUT)

    for each in job.get("runs", [job]):
        data, out = Path(each["data"]), Path(each["out"])
        trainer = TrainerOptions.model_validate(each["trainer"])
        run = RunOptions(trainer=trainer, labels_path=str(data / "labels.txt"), warmup_requests=2)
        paths = TrainerPaths(
            train_files=[str(data / "train" / "*")],
            eval_files=[str(data / "eval" / "*")],
            serving_model_dir=str(out / "model"),
            model_run_dir=str(out / "run"),
            backup_dir=str(out / "backup"),
        )
        inspect = Inspect()
        metrics = train_and_export(run, paths, extra_callbacks=[inspect])
        metrics.update(head_dtypes=inspect.head, body_compute_dtype=inspect.body)
        print("METRICS " + json.dumps(metrics), flush=True)


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
