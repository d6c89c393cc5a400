"""The input fingerprint that keys KFP's cache, the task that computes it, and the run record the exit handler reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from components.data.fingerprint import data_files, data_fingerprint, fingerprinted_spans, selected_patterns
from components.kfp import fingerprint_task
from components.notify.notice import notice_text, parse_final_status, run_outcome
from components.notify.run_record import RunRecord, produced_by_run, read_run_record, run_dir_of, write_run_record
from foundation.data.spans import SpanError
from foundation.records import RecordError

SPLITS = ["span-*/train/*", "span-*/eval/*"]


def _span(root: Path, span: int, files: int = 2) -> None:
    for split in ("train", "eval"):
        folder = root / f"span-{span}" / split
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(files):
            (folder / f"part-{index:05d}.tfrecord.gz").write_bytes(b"x" * (10 + span + index))


def test_the_fingerprint_follows_the_selected_spans_files(tmp_path: Path) -> None:
    _span(tmp_path, 1)
    first = data_fingerprint(str(tmp_path), SPLITS, "all")
    assert first.startswith("spans 1: 4 files, ")
    assert data_fingerprint(str(tmp_path), SPLITS, "all") == first  # nothing changed: the same key

    _span(tmp_path, 2)
    assert data_fingerprint(str(tmp_path), SPLITS, "all").startswith("spans 1,2: 8 files")
    assert data_fingerprint(str(tmp_path), SPLITS, "latest").startswith("spans 2: 4 files")
    # A file rewritten in place (same name) changes it: its size or modification time.
    latest = data_fingerprint(str(tmp_path), SPLITS, "latest")
    target = tmp_path / "span-2" / "train" / "part-00000.tfrecord.gz"
    target.write_bytes(b"y" * 99)
    assert data_fingerprint(str(tmp_path), SPLITS, "latest") != latest
    # Folders that are not spans, and files outside the patterns, do not count.
    (tmp_path / "span-next").mkdir()
    (tmp_path / "span-2" / "README").write_text("x")
    assert data_files(str(tmp_path), SPLITS, "latest").spans == (2,)
    assert fingerprinted_spans(data_fingerprint(str(tmp_path), SPLITS, "all")) == "1,2"


def test_data_without_spans(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "a.gz").write_bytes(b"1234")
    assert selected_patterns(str(tmp_path), ["train/*"], "none") == ([], [f"{tmp_path}/train/*"])
    assert data_fingerprint(str(tmp_path), ["train/*"], "none").startswith("1 files, 4 bytes, sha256 ")


def test_an_incomplete_span_is_refused_before_any_pod_starts(tmp_path: Path) -> None:
    _span(tmp_path, 1)
    (tmp_path / "span-2" / "train").mkdir(parents=True)  # a span still being copied: no eval files yet
    (tmp_path / "span-2" / "train" / "part-00000.tfrecord.gz").write_bytes(b"x")
    with pytest.raises(SpanError, match=r"span folder .*span-2/eval has no files matching \*; every span"):
        data_fingerprint(str(tmp_path), SPLITS, "all")


def test_a_missing_folder_or_no_spans_are_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"is not a folder \(data\.path\)"):
        data_fingerprint(str(tmp_path / "missing"), SPLITS, "all")
    with pytest.raises(SpanError, match="there are no span folders"):
        data_fingerprint(str(tmp_path), SPLITS, "all")


def _executor_input(tmp_path: Path, **parameters: str) -> str:
    executor_input = pipeline_spec_pb2.ExecutorInput()
    for name, value in parameters.items():
        executor_input.inputs.parameter_values[name].string_value = value
    for name in (fingerprint_task.DATA_OUTPUT, fingerprint_task.SERVED_OUTPUT, fingerprint_task.LABELS_OUTPUT):
        executor_input.outputs.parameters[name].output_file = str(tmp_path / "outputs" / name)
    return json_format.MessageToJson(executor_input)


def test_the_task_writes_its_outputs_where_the_driver_said(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _span(data, 1)
    serving = tmp_path / "serving"
    (serving / "1700000000").mkdir(parents=True)
    (serving / "1700000000" / "saved_model.pb").write_bytes(b"pb")
    config = json.dumps({"splits": [{"name": "train", "pattern": SPLITS[0]}, {"name": "eval", "pattern": SPLITS[1]}]})

    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\n")
    trainer = json.dumps({"labels_path": str(labels)})

    def run() -> None:
        fingerprint_task.main(["--executor_input", _executor_input(
            tmp_path, input_base=str(data), input_config=config, spans="all", serving_base=str(serving),
            trainer_custom_config=trainer)])  # fmt: skip

    run()
    outputs = tmp_path / "outputs"
    assert (outputs / "tfxp_cache_data").read_text() == data_fingerprint(str(data), SPLITS, "all")
    assert (outputs / "tfxp_cache_served").read_text().startswith("1700000000:")
    # A class renamed in the label map changes the Trainer's cache key on Kubeflow too.
    before = (outputs / "tfxp_cache_labels").read_text()
    labels.write_text("cat\nwolf\n")
    run()
    assert (outputs / "tfxp_cache_labels").read_text() != before


def test_the_task_fails_naming_data_path(tmp_path: Path) -> None:
    args = _executor_input(tmp_path, input_base=str(tmp_path / "none"), input_config='{"splits": []}', spans="none")
    with pytest.raises(fingerprint_task.FingerprintTaskError, match=r"cannot fingerprint the data under data\.path="):
        fingerprint_task.main(["--executor_input", args])


# --- the run record and the notice ---

RUN = "7d0c1e2f-0000-4000-8000-000000000000"
OLD = "11111111-0000-4000-8000-000000000000"


def _uri(run: str, task: str, key: str) -> str:
    return f"minio://mlpipeline/v2/artifacts/tfxp-digits/{run}/{task}/ab12/{key}"


RUN_DIR = f"minio://mlpipeline/v2/artifacts/tfxp-digits/{RUN}"


def _record(run: str, blessed: bool, version: str | None) -> RunRecord:
    return RunRecord.of(
        RUN_DIR,
        RUN,
        examples_uri=_uri(run, "ImportExampleGen", "examples"),
        model_uri=_uri(run, "Trainer", "model"),
        blessed=blessed,
        pushed_uri=_uri(run, "Pusher", "pushed_model"),
        pushed_version=version,
        pushed_path=f"/serving/{version}" if version else None,
    )


def test_the_record_tells_a_cached_night_from_a_trained_one(tmp_path: Path) -> None:
    trained = _record(RUN, True, "1796")
    assert (trained.new_data, trained.trained, trained.decision) == (True, True, "pushed version 1796")
    cached = _record(OLD, True, "1796")  # every artifact from an earlier run: KFP's cache
    assert cached.decision.startswith("no new data") and cached.pushed_version is None
    assert _record(RUN, False, None).decision == "not blessed: nothing pushed"
    # This run's Pusher found the version published (the Trainer was served from the cache): nothing pushed now.
    rerun = RunRecord.of(RUN_DIR, RUN, _uri(RUN, "ImportExampleGen", "examples"), _uri(RUN, "Trainer", "model"),
                         True, _uri(RUN, "Pusher", "pushed_model"), "1796", "/p/1796", published_now=False)  # fmt: skip
    assert rerun.pushed_version is None and rerun.decision == "blessed; not pushed (this model is already served)"
    # The run's folder, from the RunReport's own output: KFP <root>/<pipeline>/<run>/RunReport/<uuid>/report, also as
    # the launcher's local copy; Vertex AI <root>/<project>/<job>/RunReport_<id>/report.
    assert run_dir_of(_uri(RUN, "RunReport", "report"), "RunReport") == RUN_DIR
    assert run_dir_of(f"/minio/mlpipeline/v2/artifacts/tfxp-digits/{RUN}/RunReport/ab/report", "RunReport") == (
        f"/minio/mlpipeline/v2/artifacts/tfxp-digits/{RUN}"
    )
    assert (
        run_dir_of("gs://b/r/123/tfxp-digits-2026/RunReport_42/report", "RunReport") == "gs://b/r/123/tfxp-digits-2026"
    )
    assert not produced_by_run(f"{RUN_DIR}x/T/u/k", RUN_DIR) and produced_by_run(f"{RUN_DIR}/T/u/k", RUN_DIR)

    path = write_run_record(str(tmp_path / "runs"), cached)
    assert Path(path).name == f"{RUN}.json"
    assert read_run_record(str(tmp_path / "runs"), RUN) == cached
    assert read_run_record(str(tmp_path / "runs"), OLD) is None


@pytest.mark.parametrize(
    ("state", "status"),
    [("COMPLETE", "succeeded"), ("CACHED", "succeeded"), ("FAILED", "failed"), ("CANCELED", "cancelled"),
     ("SUCCEEDED", "succeeded"), ("PIPELINE_STATE_SUCCEEDED", "succeeded"), ("RUNNING", "unknown")],
)  # fmt: skip
def test_final_states_as_kfp_and_vertex_send_them(state: str, status: str) -> None:
    # Open-source KFP: MLMD's execution states (driver/resolve.go:472); Vertex AI: PipelineState names.
    assert run_outcome(parse_final_status({"state": state, "error": {}})).status == status


def test_a_no_new_data_notice() -> None:
    outcome = run_outcome(parse_final_status({"state": "COMPLETE"}), run_id=RUN, blessed=True,
                          decision="no new data: nothing trained")  # fmt: skip
    assert notice_text("tfxp-digits", outcome) == (
        f":white_check_mark: tfxp-digits run {RUN} succeeded: no new data: nothing trained"
    )
    assert "unknown" not in notice_text("tfxp-digits", outcome)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"run_id": 5}', r"run_id: Input should be a valid string"),  # a RunRecord of Nones and 5 before
        ("[1]", r"the document: Input should be"),
        (None, r"cannot read run record .*\(not a regular file\)"),  # a FIFO: blocked the exit handler before
    ],
    ids=["other-types", "list", "fifo"],
)
def test_a_damaged_run_record_is_one_message(tmp_path: Path, text: str | None, said: str) -> None:
    path = tmp_path / "runs" / f"{RUN}.json"
    path.parent.mkdir()
    if text is None:
        os.mkfifo(path)
    else:
        path.write_text(text)
    with pytest.raises(RecordError, match=rf"{said}.*remove it; the notice then reads the run's outputs"):
        read_run_record(str(tmp_path / "runs"), RUN)
