"""Four nights of the digits pipeline on the emulated open-source KFP backend with `tfxp run-spec`: the first
trains and pushes, then KFP's cache decides what runs again. A file of its own (minutes: each task is a process of
its own importing TFX), so that pytest-xdist runs it beside the other run-spec e2e tests, not after them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from run_spec_e2e import Receiver, compile_digits, run_spec_record, task_states

NIGHTLY_TASKS = [
    "InputFingerprint",
    "ImportExampleGen",
    "ServedBaseline",
    "StatisticsGen",
    "SchemaGen",
    "ExampleValidator",
    "Trainer",
    "Evaluator",
    "Pusher",
    "RunReport",
    "RunNotice",
]


@pytest.mark.e2e(seconds=300)  # four runs, a process per task
def test_nightly_runs_on_open_source_kfp(tmp_path: Path, receiver: Receiver) -> None:
    """Four nights on the emulated open-source backend (root minio://, KFP's cache): train and push; no new data
    (the cached model is gated against the newly served one); nothing new at all (even the Evaluator cached); a
    new span (retrain)."""
    from components.data.digits import write_digit_spans

    data = tmp_path / "data"
    write_digit_spans(data, spans=2, only=1)
    spec = compile_digits(tmp_path, data, receiver.url, "data.spans=all")
    state = tmp_path / "state"
    serving = tmp_path / "out" / "serving" / "digits"

    first, output, first_seconds = run_spec_record(spec, state)

    assert first["state"] == "SUCCEEDED" and first["pipeline_root"] == "minio://mlpipeline/v2/artifacts"
    assert [task["name"] for task in first["tasks"]] == NIGHTLY_TASKS
    assert set(task_states(first).values()) == {"SUCCEEDED"}
    tasks = {task["name"]: task for task in first["tasks"]}
    assert tasks["Evaluator"]["outputs"]["blessing"]["metadata"]["blessed"] == 1.0
    # Every artifact went through the object store at KFP's layout, <root>/<pipeline>/<run>/<task>/<uuid>/<key>.
    model_uri = tasks["Trainer"]["outputs"]["model"]["uri"]
    assert re.fullmatch(
        rf"minio://mlpipeline/v2/artifacts/tfxp-digits/{first['run_id']}/Trainer/[0-9a-f]+/model", model_uri
    )
    model_dir = state / "object-store" / "minio" / model_uri.removeprefix("minio://")
    metrics = json.loads((model_dir / "training_metrics.json").read_text())
    assert metrics["steps"] == 60 and metrics["final_accuracy"] >= 0.8
    pushed = tasks["Pusher"]["outputs"]["pushed_model"]["metadata"]
    version_dir = Path(pushed["pushed_destination"])
    assert version_dir == serving / pushed["pushed_version"]
    assert (version_dir / "saved_model.pb").is_file()
    report = tasks["RunReport"]["outputs"]["report"]
    assert report["metadata"]["problems"] == 0  # TFMA, statistics, anomalies and scalars were all read
    page = (serving / "reports" / f"{pushed['pushed_version']}.html").read_text()
    assert f"Pushed version {pushed['pushed_version']}" in page
    assert f"pushed version {pushed['pushed_version']}" in output
    [post] = receiver.posts
    assert post["json"]["status"] == "succeeded" and post["json"]["state"] == "COMPLETE"
    assert (post["json"]["blessed"], post["json"]["pushed_version"]) == (True, pushed["pushed_version"])
    assert post["json"]["run_id"] == first["run_id"]

    # Night 2, no new data: the data is KFP's cache hit up to the Trainer; the served model changed (night 1
    # pushed it), so the baseline, the Evaluator and the Pusher run; nothing new is pushed.
    second, _, second_seconds = run_spec_record(spec, state)
    states = task_states(second)
    assert {name for name, value in states.items() if value == "CACHED"} == {
        "ImportExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Trainer",
    }  # fmt: skip
    assert [version.name for version in serving.iterdir() if version.name.isdigit()] == [pushed["pushed_version"]]
    notice = receiver.posts[-1]["json"]
    assert notice["status"] == "succeeded" and notice["decision"].startswith("no new data")
    assert notice["pushed_version"] is None and "no new data" in notice["text"]

    # Night 3, nothing changed at all: everything is a cache hit, the Evaluator (TFMA) included.
    third, _, third_seconds = run_spec_record(spec, state)
    assert {name for name, value in task_states(third).items() if value != "CACHED"} == {
        "InputFingerprint", "RunReport", "RunNotice",
    }  # fmt: skip
    assert receiver.posts[-1]["json"]["decision"].startswith("no new data")

    # Night 4, a new span: the fingerprint changes, ImportExampleGen reads span 2 and the Trainer retrains.
    write_digit_spans(data, spans=2, only=2)
    fourth, _, fourth_seconds = run_spec_record(spec, state)
    states = task_states(fourth)
    assert states["ImportExampleGen"] == states["Trainer"] == states["Evaluator"] == "SUCCEEDED"
    examples = {task["name"]: task for task in fourth["tasks"]}["ImportExampleGen"]["outputs"]["examples"]
    assert examples["metadata"]["spans"] == "1,2"
    assert (
        receiver.posts[-1]["json"]["decision"] != second["tasks"]
        and receiver.posts[-1]["json"]["status"] == "succeeded"
    )
    assert not receiver.posts[-1]["json"]["decision"].startswith("no new data")
    print(
        f"run-spec --backend kfp, digits: first run {first_seconds:.0f} s, no new data {second_seconds:.0f} s, "
        f"nothing changed {third_seconds:.0f} s, new span {fourth_seconds:.0f} s"
    )
