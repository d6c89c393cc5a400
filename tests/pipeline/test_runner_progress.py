"""The local runner's progress and failure attribution from ML Metadata, without running TFX."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ml_metadata.proto import metadata_store_pb2
from mlmd_fixtures import FakeRunStore

from pipeline.mlmd import ExecutionRecord
from pipeline.runners.progress import SETUP, ProgressReporter, failed_component, watch_run

Call = tuple[str, str, float]
COMPONENTS = ["ImportExampleGen", "StatisticsGen", "SchemaGen", "Trainer", "Evaluator"]


def record(component: str, status: str, seconds: float = 0.0) -> ExecutionRecord:
    return ExecutionRecord(component, status, seconds, metadata_store_pb2.Execution())


def test_reporter_reports_each_start_and_end_once() -> None:
    calls: list[Call] = []
    reporter = ProgressReporter(lambda *call: calls.append(call))

    reporter.update([record("ImportExampleGen", "running")])
    assert calls == [("ImportExampleGen", "running", 0.0)]

    # A cached component seen only once it is done still starts, then finishes.
    snapshot = [record("ImportExampleGen", "complete", 2.5), record("StatisticsGen", "cached", 0.1)]
    reporter.update(snapshot)
    reporter.update(snapshot)  # nothing new
    assert calls[1:] == [
        ("ImportExampleGen", "finished", 2.5),
        ("StatisticsGen", "running", 0.0),
        ("StatisticsGen", "finished", 0.1),
    ]

    # A failed component started but never finished: the runner reports the failure.
    reporter.update([*snapshot, record("Trainer", "failed", 4.0)])
    assert calls[4:] == [("Trainer", "running", 0.0)]


def test_reporter_without_callback_only_watches() -> None:
    ProgressReporter(None).update([record("Trainer", "complete", 1.0)])


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (None, SETUP),  # the run never registered: compiling or creating the pipeline failed
        ([record("ImportExampleGen", "complete"), record("StatisticsGen", "failed")], "StatisticsGen"),
        ([record("ImportExampleGen", "running")], "ImportExampleGen"),  # its driver raised: never published
        ([record("ImportExampleGen", "cached"), record("StatisticsGen", "complete")], "SchemaGen"),  # no execution
        ([record(name, "complete") for name in COMPONENTS], SETUP),
    ],
)
def test_the_failure_belongs_to_the_component_that_did_not_finish(
    records: list[ExecutionRecord] | None, expected: str
) -> None:
    assert failed_component(records, COMPONENTS) == expected


def _wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the watcher did not report in time"
        time.sleep(0.02)


def test_watch_reports_a_run_live_from_sqlite_mlmd(tmp_path: Path) -> None:
    metadata = tmp_path / "metadata.db"
    calls: list[Call] = []
    store = FakeRunStore(metadata)
    old = store.start_run()
    store.add_execution(old, "Pusher", "complete")  # an earlier run: never reported
    time.sleep(0.01)
    since_ms = int(time.time() * 1000)
    time.sleep(0.01)

    with watch_run(str(metadata), store.pipeline_name, since_ms, lambda *call: calls.append(call), 0.02) as watch:
        run = store.start_run()
        example_gen = store.add_execution(run, "ImportExampleGen")
        _wait_for(lambda: ("ImportExampleGen", "running", 0.0) in calls)
        assert not any(state == "finished" for _, state, _ in calls)
        time.sleep(0.05)
        store.set_state(example_gen, "complete")
        store.add_execution(run, "StatisticsGen", "cached")
        trainer = store.add_execution(run, "Trainer")
        store.set_state(trainer, "failed")
    # On exit the last read has reported everything the run ended with.
    assert [(component, state) for component, state, _ in calls] == [
        ("ImportExampleGen", "running"),
        ("ImportExampleGen", "finished"),
        ("StatisticsGen", "running"),
        ("StatisticsGen", "finished"),
        ("Trainer", "running"),
    ]
    assert calls[1][2] >= 0.05  # MLMD's own registration-to-publish time
    assert watch.records is not None
    assert [(each.component, each.status) for each in watch.records] == [
        ("ImportExampleGen", "complete"),
        ("StatisticsGen", "cached"),
        ("Trainer", "failed"),
    ]
    assert failed_component(watch.records, COMPONENTS) == "Trainer"


def test_watch_of_a_run_that_never_registered_records_nothing(tmp_path: Path) -> None:
    calls: list[Call] = []
    with watch_run(str(tmp_path / "metadata.db"), "tfxp-digits", 0, lambda *call: calls.append(call), 0.02) as watch:
        time.sleep(0.1)  # no store file at all: the watcher waits
    assert calls == [] and watch.records is None
    assert failed_component(watch.records, COMPONENTS) == SETUP
