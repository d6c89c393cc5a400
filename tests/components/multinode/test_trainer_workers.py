"""Multi-worker training's own logic: the workers' FnArgs, the local launcher (which plays the Training Operator),
and what the Trainer does with `trainer.workers` > 1. The whole pipeline with two workers is in
tests/pipeline/test_pipeline_e2e.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from components.multinode.local_workers import LocalWorkers, local_tf_configs
from components.multinode.worker_args import WORKER_ENV, WorkerFnArgs, WorkersError, read_fn_args, write_fn_args
from components.trainer import run_fn as run_fn_module
from components.trainer import worker
from components.trainer.options import RunOptions, TrainerOptions
from components.trainer.strategy import cluster_workers, resolve_strategy, worker_index

TINY = {"image_size": 8, "channels": 1, "width": 4, "batch_size": 16, "train_steps": 400, "steps_per_epoch": 50}


def fn_args(digits_dir: Path, out: Path, **trainer: Any) -> WorkerFnArgs:
    run = RunOptions(trainer=TrainerOptions(**{**TINY, **trainer}), labels_path=str(digits_dir / "labels.txt"))
    return WorkerFnArgs(
        custom_config=run.model_dump(mode="json"),
        train_steps=None,
        train_files=[str(digits_dir / "train" / "*")],
        eval_files=[str(digits_dir / "eval" / "*")],
        serving_model_dir=str(out / "model" / "Format-Serving"),
        model_run_dir=str(out / "model_run"),
    )


def test_fn_args_survive_the_file_the_workers_read(tmp_path: Path) -> None:
    args = WorkerFnArgs({"trainer": {"workers": 2}}, 7, ["a/*"], ["b/*"], "/m/Format-Serving", "/m/run")
    assert read_fn_args(write_fn_args(args, str(tmp_path / "fn_args.json"))) == args


def test_malformed_or_missing_fn_args_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "fn_args.json"
    bad.write_text(json.dumps({"custom_config": {}, "unexpected": 1}))
    with pytest.raises(WorkersError, match=r"fn_args.json: not the workers' FnArgs"):
        read_fn_args(str(bad))
    with pytest.raises(WorkersError, match=r"no such file.*same storage"):
        read_fn_args(str(tmp_path / "missing.json"))


def test_local_cluster_names_every_worker_once_and_each_its_own_index() -> None:
    configs = local_tf_configs(3)
    clusters = {json.dumps(json.loads(config)["cluster"]) for config in configs}
    assert len(clusters) == 1  # every worker sees the same cluster
    addresses = json.loads(configs[0])["cluster"]["worker"]
    assert len(set(addresses)) == 3
    assert [cluster_workers(config) for config in configs] == [3, 3, 3]
    assert [worker_index(config) for config in configs] == [0, 1, 2]


def test_the_trainer_starts_workers_instead_of_training_itself(
    monkeypatch: pytest.MonkeyPatch, digits_dir: Path, tmp_path: Path
) -> None:
    launched: list[tuple[int, WorkerFnArgs]] = []
    monkeypatch.setattr(run_fn_module, "launch_workers", lambda workers, tfjob, args: launched.append((workers, args)))
    monkeypatch.setattr(run_fn_module, "train_here", lambda run, args: pytest.fail("trained in the Trainer"))
    monkeypatch.setenv("TF_CONFIG", local_tf_configs(2)[0])  # left in the user's shell: not a reason to train here
    monkeypatch.delenv("TFXP_WORKER", raising=False)
    args = fn_args(digits_dir, tmp_path, workers=2)
    run_fn_module.run_fn(SimpleNamespace(**{**vars(args), "train_steps": 123}))
    assert [workers for workers, _ in launched] == [2]
    assert launched[0][1].train_steps == 123  # the run parameter reaches the workers


def test_a_worker_in_a_cluster_of_another_size_refuses_to_train(
    monkeypatch: pytest.MonkeyPatch, digits_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(run_fn_module, "train_here", lambda run, args: pytest.fail("trained in the wrong cluster"))
    monkeypatch.setenv("TF_CONFIG", local_tf_configs(3)[0])
    monkeypatch.setenv("TFXP_WORKER", "1")
    with pytest.raises(WorkersError, match=r"trainer.workers=2, but TF_CONFIG names 3 workers"):
        run_fn_module.run_fn(SimpleNamespace(**vars(fn_args(digits_dir, tmp_path, workers=2))))


def test_the_worker_entrypoint_needs_tf_config(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert worker.main(["--fn-args", "/nowhere/fn_args.json"]) == 2
    assert "TF_CONFIG is not set" in capsys.readouterr().err


def _worker_processes() -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process().children(recursive=True)
        if "components.trainer.worker" in " ".join(child.cmdline())
    ]


def _wait_for(condition: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_killed_worker_stops_the_others_and_is_named_with_its_log(digits_dir: Path, tmp_path: Path) -> None:
    args = fn_args(digits_dir, tmp_path, workers=2)
    uri = write_fn_args(args, str(tmp_path / "fn_args.json"))
    launcher = LocalWorkers(2, str(tmp_path / "logs"))
    outcome: dict[str, BaseException] = {}

    def launch() -> None:
        try:
            launcher.run(uri)
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=launch)
    thread.start()
    log = tmp_path / "logs" / "worker-1.log"
    _wait_for(lambda: log.exists() and "MultiWorkerMirroredStrategy" in log.read_text())
    (victim,) = [p for p in _worker_processes() if json.loads(p.environ()["TF_CONFIG"])["task"]["index"] == 1]
    victim.send_signal(signal.SIGKILL)
    thread.join(timeout=60)
    assert not thread.is_alive()
    error = outcome["error"]
    assert isinstance(error, WorkersError)
    assert "worker 1 of 2 failed (killed by SIGKILL); workers 0 were stopped" in str(error)
    assert str(log) in str(error) and "MultiWorkerMirroredStrategy" in str(error)  # the log's end
    assert _worker_processes() == []  # worker 0 did not stay behind, blocked on a collective
    assert not (tmp_path / "model" / "Format-Serving" / "saved_model.pb").exists()


LAUNCHER_SCRIPT = """
import sys
from components.multinode.local_workers import LocalWorkers
LocalWorkers(2, sys.argv[2]).run(sys.argv[1])
"""


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_stopping_the_trainer_stops_its_workers(digits_dir: Path, tmp_path: Path, stop: signal.Signals) -> None:
    uri = write_fn_args(fn_args(digits_dir, tmp_path, workers=2), str(tmp_path / "fn_args.json"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    trainer = subprocess.Popen([sys.executable, "-c", LAUNCHER_SCRIPT, uri, str(tmp_path / "logs")], env=env)
    try:
        parent = psutil.Process(trainer.pid)
        _wait_for(lambda: len(parent.children()) == 2)
        workers = parent.children()
        trainer.send_signal(stop)
        assert trainer.wait(timeout=60) != 0
        _gone, alive = psutil.wait_procs(workers, timeout=30)
        assert alive == [], f"workers left behind after {stop.name}: {alive}"
    finally:
        trainer.kill()


STRAY = '{"cluster": {"worker": ["a:1", "b:2", "c:3"]}, "task": {"type": "worker", "index": 1}}'


@pytest.mark.parametrize(
    ("trainer", "env", "dropped"),
    [
        ({}, {"TF_CONFIG": STRAY}, True),  # one worker, strategy auto: would wait for b and c forever
        ({}, {"TF_CONFIG": "not json"}, True),
        # found by the second adversarial pass over issue 35: JSON of another shape ended the Trainer in an
        # AttributeError / TypeError / RecursionError instead of this warning
        ({}, {"TF_CONFIG": '{"cluster": [1]}'}, True),
        ({}, {"TF_CONFIG": '{"cluster": {"worker": 5}}'}, True),
        ({}, {"TF_CONFIG": "[" * 100_000 + "]" * 100_000}, True),
        ({"strategy": "multi_worker"}, {"TF_CONFIG": STRAY}, False),  # asked for the cluster it names
        ({"workers": 2}, {"TF_CONFIG": STRAY}, False),  # the launcher's business (it sets its own)
        ({}, {"TF_CONFIG": STRAY, WORKER_ENV: "1"}, False),  # a worker tfxp started
        ({}, {}, False),
    ],
    ids=[
        "auto",
        "malformed",
        "cluster-a-list",
        "workers-a-number",
        "nested-deep",
        "multi_worker",
        "two-workers",
        "a-worker",
        "none",
    ],
)
def test_a_stray_tf_config_is_ignored_for_one_worker_with_a_warning(
    trainer: dict[str, Any], env: dict[str, str], dropped: bool
) -> None:
    run = RunOptions(trainer=TrainerOptions(**{**TINY, **trainer}), labels_path="labels.txt")
    before = dict(env)
    warning = run_fn_module.drop_stray_tf_config(run, env)
    assert (warning is not None) == dropped
    if dropped:
        assert "TF_CONFIG" not in env and "trainer.workers is 1" in (warning or "")
    else:
        assert env == before


def test_a_one_worker_trainer_with_a_stray_two_worker_tf_config_trains_on_one_device(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, digits_dir: Path, tmp_path: Path
) -> None:
    # Left in the shell from a two-worker run: `strategy: auto` would wait in MultiWorkerMirroredStrategy for a
    # peer at 127.0.0.1 that never comes.
    monkeypatch.setenv("TF_CONFIG", local_tf_configs(2)[0])
    monkeypatch.delenv(WORKER_ENV, raising=False)
    seen: list[str | None] = []
    monkeypatch.setattr(run_fn_module, "train_here", lambda run, args: seen.append(os.environ.get("TF_CONFIG")))
    with caplog.at_level("WARNING", logger=run_fn_module.__name__):
        run_fn_module.run_fn(SimpleNamespace(**vars(fn_args(digits_dir, tmp_path))))
    assert seen == [None]
    assert resolve_strategy("auto", seen[0], num_gpus=0)[0] == "default"
    (warning,) = [record.getMessage() for record in caplog.records if "TF_CONFIG" in record.getMessage()]
    assert "ignoring the TF_CONFIG in this process's environment (it names 2 worker(s)" in warning
    assert "unset TF_CONFIG" in warning
