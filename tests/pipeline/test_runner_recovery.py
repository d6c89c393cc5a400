"""One `tfxp run` per output at a time, and the executions a killed run left RUNNING (issue 15, item 10)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ml_metadata.proto import metadata_store_pb2
from mlmd_fixtures import PIPELINE, FakeRunStore
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.runners.recovery import LOCK_FILE, OutputInUseError, cancel_stale_executions, run_lock

REPO = Path(__file__).resolve().parents[2]


def _state(store: FakeRunStore, execution_id: int) -> int:
    (execution,) = store.store.get_executions_by_id([execution_id])
    return int(execution.last_known_state)


def test_a_running_execution_is_canceled_and_only_its_empty_output_dirs_removed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = FakeRunStore(tmp_path / "metadata.db")
    run = store.start_run()
    done = store.add_execution(run, "ImportExampleGen", state="complete")
    killed = store.add_execution(run, "Trainer", state="running")
    (root / "Trainer" / "model" / str(killed) / "Format-Serving").mkdir(parents=True)  # empty tree
    (root / "Trainer" / "model_run" / str(killed)).mkdir(parents=True)
    (root / "Trainer" / "model_run" / str(killed) / "events.out").write_text("logs")
    (root / "Trainer" / "model_run" / "backup-0123").mkdir()  # the resume point lives outside
    (root / "Trainer" / ".system" / str(killed)).mkdir(parents=True)
    (root / "ImportExampleGen" / "examples" / str(done)).mkdir(parents=True)

    stale = cancel_stale_executions(str(tmp_path / "metadata.db"), PIPELINE, str(root))

    assert [(s.execution_id, s.component, s.removed) for s in stale] == [
        (killed, "Trainer", (f"Trainer/model/{killed}",))
    ]
    assert "Trainer (execution" in stale[0].describe() and "marked CANCELED" in stale[0].describe()
    assert _state(store, killed) == metadata_store_pb2.Execution.CANCELED
    assert _state(store, done) == metadata_store_pb2.Execution.COMPLETE
    assert not (root / "Trainer" / "model" / str(killed)).exists()
    assert (root / "Trainer" / "model_run" / str(killed) / "events.out").exists()
    assert (root / "Trainer" / "model_run" / "backup-0123").is_dir()
    assert (root / "Trainer" / ".system" / str(killed)).is_dir()
    assert (root / "ImportExampleGen" / "examples" / str(done)).is_dir()
    assert cancel_stale_executions(str(tmp_path / "metadata.db"), PIPELINE, str(root)) == []  # nothing twice


def test_other_pipelines_and_a_missing_store_are_left_alone(tmp_path: Path) -> None:
    assert cancel_stale_executions(str(tmp_path / "none.db"), PIPELINE, str(tmp_path)) == []
    store = FakeRunStore(tmp_path / "metadata.db", pipeline_name="other")
    running = store.add_execution(store.start_run(), "Trainer", state="running")

    assert cancel_stale_executions(str(tmp_path / "metadata.db"), PIPELINE, str(tmp_path)) == []
    assert _state(store, running) == metadata_store_pb2.Execution.RUNNING
    assert not (tmp_path / "none.db").exists()


def test_a_second_lock_on_the_same_output_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with run_lock(tmp_path / "p") as path:
        assert path == tmp_path / "p" / LOCK_FILE
        refused = rf"another `tfxp run` \(pid {os.getpid()}, started .*\) is using"
        with pytest.raises(OutputInUseError, match=refused), run_lock(tmp_path / "p"):
            pass
    with run_lock(tmp_path / "p"):  # released
        pass


def test_the_lock_of_a_killed_process_is_free(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from pipeline.runners.recovery import run_lock\n"
            "with run_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(60)",
            str(tmp_path / "p"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputInUseError, match=f"pid {holder.pid}"), run_lock(tmp_path / "p"):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    with run_lock(tmp_path / "p"):
        pass


def test_tfxp_run_on_an_output_in_use_exits_2_before_any_work(digits_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with run_lock(out / "tfxp-digits"):
        result = CliRunner().invoke(
            app, ["run", "--set", f"data.path={digits_dir}", "--output", str(out)], env={"COLUMNS": "200"}
        )

    assert result.exit_code == 2, result.output
    assert f"is using {out / 'tfxp-digits'}; wait for it to end, or pass another --output" in result.output
    assert sorted(p.name for p in (out / "tfxp-digits").iterdir()) == [LOCK_FILE]
