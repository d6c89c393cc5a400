"""Files tfxp wrote and reads back, damaged (issue 35, classes 3 and 8; third adversarial pass, B2, B5, B6): each is
one error line and exit 2, never a traceback, and a FIFO in a record's place is refused at once, not waited on."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from pipeline.cli import app

CANARY = ("--set", "serving.rollout=canary", "--set", "serving.version_policy=specific", "--serving-base")


def _one_error(args: list[str], fifo: Path | None = None) -> str:
    """The one error line of `tfxp ARGS` (exit 2, no traceback); with `fifo`, a reader blocked on that FIFO fails
    the test after 60 s instead of hanging it (the FIFO is then opened for writing, so the reader ends)."""
    results: list[Result] = []
    worker = threading.Thread(target=lambda: results.append(CliRunner().invoke(app, args)), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the blocked open gets its writer, then EOF
        worker.join(60)
        pytest.fail(f"tfxp {' '.join(args)} blocked on the FIFO {fifo}")
    (result,) = results
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def _summary(**fields: object) -> str:
    return json.dumps({"status": "succeeded", "blessed": True, "metrics": {"accuracy": 0.9}, **fields})


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # An OverflowError traceback before (B2): 1e999 is a valid JSON number that reads as infinity.
        (_summary(wall_seconds=1e999).replace("Infinity", "1e999"), "(wall_seconds: Input should be a finite number)"),
        (_summary(metrics={"accuracy": float("nan")}), "(metrics.accuracy: Input should be a finite number)"),
        (
            _summary(components={"Trainer": {"status": "complete", "seconds": "-1e999"}}),
            "(components.Trainer.seconds: Input should be a finite",
        ),
    ],
    ids=["infinite-wall-time", "nan-accuracy", "text-seconds"],
)
def test_a_run_summary_with_numbers_that_are_not_finite_is_one_error(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "run-summary.json").write_text(text)
    output = _one_error(["report", str(tmp_path), "--out", str(tmp_path / "r.html")])
    assert f"run summary {tmp_path}/run-summary.json is not a record as tfxp writes one {said}" in output
    assert "rerun `tfxp run` to write it again" in output


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _big(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(3 << 30)  # sparse: 3 GiB to a reader that reads it whole (5.5 GB of memory before)
    return path


def _written(text: str) -> Callable[[Path], Path]:
    def write(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return write


def _decision(**fields: object) -> str:
    labels = {"stable": 5, "canary": None}
    body = {"sequence": 1, "action": "hold", "by": "x", "reason": "y", "before": labels, "after": labels, **fields}
    return json.dumps({**body, "time": "2026-01-01T00:00:00Z"})


@pytest.mark.parametrize(
    ("make", "file", "args", "said"),
    [
        # B6: `tfxp report` blocked forever on a FIFO run summary.
        (_fifo, "out/run-summary.json", ["report", "{tmp}/out"], "cannot read run summary {path} (not a regular file)"),
        (_big, "out/run-summary.json", ["report", "{tmp}/out"], "run summary {path} is larger than 32 MiB"),
        # B5: a decision FIFO hung `tfxp rollout status`; a 3 GiB state was read whole; a decision of another shape
        # and a state that is a list ended in a TypeError traceback and "pop expected at most 1 argument".
        (_fifo, "b/tfxp_rollout/decisions/00000001.json", ["rollout", "status", *CANARY, "{tmp}/b"], "not a regular"),
        (_big, "b/tfxp_rollout/state.json", ["rollout", "status", *CANARY, "{tmp}/b"], "is larger than 32 MiB"),
        (
            _written('{"x": 1}'),
            "b/tfxp_rollout/decisions/00000001.json",
            ["rollout", "status", *CANARY, "{tmp}/b"],
            "the rollout decision {path} is not a record as tfxp writes one (sequence: Field required)",
        ),
        (
            _written("[1]"),
            "b/tfxp_rollout/state.json",
            ["rollout", "status", *CANARY, "{tmp}/b"],
            "the rollout state {path} is not a record as tfxp writes one (the document: Input should be a valid dict",
        ),
        (
            _written('{"schema": 1, "stable": "3"}'),
            "b/tfxp_rollout/state.json",
            ["rollout", "status", *CANARY, "{tmp}/b"],
            "(stable: Input should be a valid integer)",
        ),
        # N5 (fourth pass): a decision whose `before` lacks "canary" ended in `KeyError: 'canary'` where it was shown.
        (
            _written(_decision(before={"stable": 5})),
            "b/tfxp_rollout/decisions/00000001.json",
            ["rollout", "status", *CANARY, "{tmp}/b"],
            "the rollout decision {path} is not a record as tfxp writes one (before.canary: Field required)",
        ),
        (
            _written(_decision(after={"stable": -9, "canary": None})),
            "b/tfxp_rollout/decisions/00000001.json",
            ["rollout", "status", *CANARY, "{tmp}/b"],
            "(after.stable: Input should be greater than or equal to 0)",
        ),
    ],
    ids=[
        "summary-fifo",
        "summary-3gib",
        "decision-fifo",
        "state-3gib",
        "decision-shape",
        "state-list",
        "state-text",
        "decision-no-canary",
        "decision-negative",
    ],
)
def test_a_damaged_record_is_one_error_and_a_fifo_is_not_waited_on(
    tmp_path: Path, make: Callable[[Path], Path], file: str, args: list[str], said: str
) -> None:
    path = make(tmp_path / file)
    output = _one_error([arg.format(tmp=tmp_path) for arg in args], fifo=path)
    assert said.format(path=path) in output
    assert "restore it" in output or "rerun `tfxp run`" in output


def test_a_summary_tfxp_writes_with_a_nan_metric_still_reads_back(tmp_path: Path) -> None:
    # A diverged model's NaN accuracy is written as null ("no number"), so the report of that run still reads.
    from components.report.summary import RunSummary

    summary = RunSummary.start({})
    summary.metrics.accuracy = float("nan")
    summary.wall_seconds = float("inf")
    (tmp_path / "run-summary.json").write_text(json.dumps(summary.to_json_dict()))

    result = CliRunner().invoke(app, ["report", str(tmp_path), "--out", str(tmp_path / "r.html")])

    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run-summary.json").read_text())["metrics"]["accuracy"] is None
