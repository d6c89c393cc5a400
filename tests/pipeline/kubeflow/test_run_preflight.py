"""`tfxp run`'s pre-flight: every check that needs no TensorFlow answers before TensorFlow or TFX is imported, and
the data probe (examples read through TensorFlow) runs once per run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("tensorflow", "tfx")
# The console script's entry point in a fresh interpreter; at exit (after the CLI's own exit) the last line of
# stderr says which of HEAVY were imported.
ENTRY_POINT = f"""
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr))
sys.argv[0] = "tfxp"
from pipeline.cli import main
main()
"""


def _tfxp(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "300"}
    result = subprocess.run(
        [sys.executable, "-c", ENTRY_POINT, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    return result, json.loads(result.stderr.strip().splitlines()[-1])


def test_a_missing_data_path_is_said_before_tensorflow_is_imported(tmp_path: Path) -> None:
    result, imported = _tfxp(tmp_path, "run", "--set", "data.path=/nonexistent", "--output", str(tmp_path / "out"))

    assert result.returncode != 0
    assert "data.path /nonexistent is not a directory" in " ".join(result.stderr.split())
    assert imported == []


def test_a_missing_label_map_is_said_before_tensorflow_is_imported(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for split in ("train", "eval"):
        (data / split).mkdir(parents=True)
    result, imported = _tfxp(tmp_path, "run", "--set", f"data.path={data}", "--output", str(tmp_path / "out"))

    assert result.returncode != 0
    assert "labels.txt" in result.stderr
    assert imported == []


def test_the_data_probe_reads_the_examples_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`data.label_offset: auto` reads the first examples through TensorFlow: once, in the pre-flight."""
    import foundation.data.probe as probe
    import pipeline.runners.local as local
    from pipeline.cli import app

    data = tmp_path / "data"
    for split in ("train", "eval"):
        (data / split).mkdir(parents=True)
    (data / "labels.txt").write_text("0\n1\n")
    calls: list[str] = []

    def counted(pattern: str, count: int = 64) -> list[Any]:
        calls.append(pattern)
        return []

    def no_pipeline(config: Any, layout: Any, *_: Any) -> local.LocalRun:
        assert config.data.label_offset == 0  # resolved by the pre-flight, not again here
        return local.LocalRun(config, layout, wall_seconds=0.1, started_at=0.0)

    monkeypatch.setattr(probe, "sample_label_evidence", counted)
    monkeypatch.setattr(local, "_run_locked", no_pipeline)
    result = CliRunner().invoke(app, ["run", "--set", f"data.path={data}", "--output", str(tmp_path / "out")])

    assert result.exit_code == 0, result.output
    assert calls == [f"{data}/train/*"]


def test_run_local_refuses_a_config_the_pre_flight_did_not_resolve() -> None:
    from pipeline.config import TfxpConfig
    from pipeline.runners.local import run_local

    with pytest.raises(ValueError, match="resolve_local_paths"):
        run_local(TfxpConfig())
