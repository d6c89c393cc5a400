"""EdgeExporter: the executor's Do() on artifacts in a tmp dir (no pipeline run), the component and the summary."""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from edge_fixtures import needs_mediapipe, shared_model, write_dataset
from pydantic import ValidationError
from tfx import types
from tfx.types import standard_artifacts
from typer.testing import CliRunner

from components.edge_exporter.artifacts import EdgeBlessing, EdgeModel
from components.edge_exporter.component import EdgeExporter
from components.edge_exporter.executor import Executor
from components.edge_exporter.summary import edge_summary
from edge.app_client import ClientResult, read_metadata
from edge.errors import EdgeError
from edge.options import EdgeOptions
from pipeline.cli import app
from pipeline.cli.console import console
from pipeline.cli.run import _print_summary

# MediaPipe (edge.app_client) has tests of its own below, which need .venv-mediapipe.
OPTIONS: dict[str, Any] = {
    "mode": "int8",
    "io_dtype": "uint8",
    "representative_samples": 64,
    "max_accuracy_drop": 0.02,
    "app_client": "none",
}


@pytest.fixture(scope="module")
def model_artifact(tmp_path_factory: pytest.TempPathFactory) -> standard_artifacts.Model:
    uri = tmp_path_factory.mktemp("trainer") / "model"
    shutil.copytree(shared_model(tmp_path_factory), uri / "Format-Serving")
    model = standard_artifacts.Model()
    model.uri = str(uri)
    return model


def _examples(root: Path, train_brightness: float = 1.0) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(write_dataset(root, train_brightness=train_brightness, tfx_layout=True))
    examples.splits = ["train", "eval"]
    return examples


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> standard_artifacts.Examples:
    return _examples(tmp_path_factory.mktemp("example_gen") / "examples")


def _blessing(tmp_path: Path, blessed: bool) -> standard_artifacts.ModelBlessing:
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(tmp_path / "blessing")
    blessing.set_int_custom_property("blessed", int(blessed))
    return blessing


def _run(
    tmp_path: Path,
    model: types.Artifact,
    examples: types.Artifact,
    blessing: types.Artifact | None = None,
    run: str = "1",
    **overrides: Any,
) -> tuple[EdgeModel, EdgeBlessing]:
    edge_model, edge_blessing = EdgeModel(), EdgeBlessing()
    edge_model.uri = str(tmp_path / "EdgeExporter" / "edge_model" / run)
    edge_blessing.uri = str(tmp_path / "EdgeExporter" / "edge_blessing" / run)
    inputs: dict[str, list[types.Artifact]] = {"model": [model], "examples": [examples]}
    if blessing is not None:
        inputs["model_blessing"] = [blessing]
    parameters = {
        "options": EdgeOptions(**{**OPTIONS, **overrides}).model_dump_json(),
        "push_base": str(tmp_path / "edge" / "digits"),
        "label_offset": 0,
    }
    Executor().Do(inputs, {"edge_model": [edge_model], "edge_blessing": [edge_blessing]}, parameters)
    return edge_model, edge_blessing


def test_blessed_model_is_converted_gated_and_pushed(tmp_path: Path, model_artifact, examples) -> None:
    edge_model, edge_blessing = _run(tmp_path, model_artifact, examples, _blessing(tmp_path, blessed=True))

    versions = list((tmp_path / "edge" / "digits").iterdir())
    assert len(versions) == 1 and versions[0].name.isdigit()
    pushed = versions[0]
    assert sorted(path.name for path in pushed.iterdir()) == [
        "edge_metadata.json",
        "labels.txt",
        "model.tflite",
        "release.json",
        "tfxp_push.json",
    ]
    assert (pushed / "model.tflite").read_bytes() == (Path(edge_model.uri) / "model.tflite").read_bytes()
    assert edge_model.get_int_custom_property("blessed") == 1
    assert edge_model.get_string_custom_property("pushed_path") == str(pushed)
    assert edge_model.get_string_custom_property("mode") == "int8"
    assert edge_blessing.get_int_custom_property("blessed") == 1
    assert (Path(edge_blessing.uri) / "BLESSED").exists()

    listed = CliRunner().invoke(app, ["edge", "versions", str(tmp_path)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert re.search(rf"digits\s+│\s+{pushed.name}\s+│\s+int8\s+│\s+uint8 1×16×16×3", listed.output)
    release = json.loads((pushed / "release.json").read_text())
    assert release["sha256"] == hashlib.sha256((pushed / "model.tflite").read_bytes()).hexdigest()

    fields = edge_summary(edge_model.uri)
    assert fields["edge_model_path"] == f"{pushed}/model.tflite"
    assert fields["edge"]["status"] == "pushed"
    assert fields["edge"]["io_dtype"] == "uint8"
    metrics = fields["metrics"]
    assert metrics["edge_accuracy_drop"] <= 0.02
    assert metrics["edge_accuracy"] == pytest.approx(
        metrics["edge_saved_model_accuracy"] - metrics["edge_accuracy_drop"]
    )
    assert metrics["edge_size_bytes"] == (pushed / "model.tflite").stat().st_size
    assert 0 < metrics["edge_latency_p50_ms"] <= metrics["edge_latency_p99_ms"]


def test_a_rerun_over_the_same_inputs_reuses_the_version_without_converting(
    tmp_path: Path, model_artifact, examples, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = {"eval_samples": 8}
    random.seed(1), np.random.seed(1), tf.random.set_seed(1)  # as a Trainer run in this process sets them
    first, _ = _run(tmp_path, model_artifact, examples, run="1", **quick)
    random.seed(7), np.random.seed(7), tf.random.set_seed(7)  # a cached Trainer: other process-wide seeds

    def no_conversion(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("the model was converted again")

    monkeypatch.setattr("edge.export.convert", no_conversion)
    second, second_blessing = _run(tmp_path, model_artifact, examples, run="2", **quick)

    versions = list((tmp_path / "edge" / "digits").iterdir())
    assert len(versions) == 1
    assert second.get_string_custom_property("pushed_path") == first.get_string_custom_property("pushed_path")
    assert second.get_string_custom_property("reused_version") == versions[0].name
    assert (Path(second.uri) / "model.tflite").read_bytes() == (versions[0] / "model.tflite").read_bytes()
    assert (Path(second_blessing.uri) / "BLESSED").exists()
    fields = edge_summary(second.uri)
    assert fields["edge"]["status"] == "already_published"
    assert fields["edge"]["version"] == versions[0].name
    assert fields["edge"]["reason"].startswith(f"already published as version {versions[0].name}")
    assert fields["metrics"] == edge_summary(first.uri)["metrics"]
    summary = {"components": {}, "status": "succeeded", "metrics": fields["metrics"], "wall_seconds": 1.0, **fields}
    with console.capture() as printed:
        _print_summary(summary, "run-summary.json")
    assert f"edge (int8): already published as version {versions[0].name}\n" in printed.get()


def test_another_edge_mode_publishes_another_version(tmp_path: Path, model_artifact, examples) -> None:
    first, _ = _run(tmp_path, model_artifact, examples, run="1", eval_samples=8)
    second, _ = _run(tmp_path, model_artifact, examples, run="2", mode="dynamic", eval_samples=8)

    assert len(list((tmp_path / "edge" / "digits").iterdir())) == 2
    assert second.get_string_custom_property("pushed_path") != first.get_string_custom_property("pushed_path")
    assert edge_summary(second.uri)["edge"]["status"] == "pushed"


@needs_mediapipe
@pytest.mark.parametrize("mode", ["int8", "none"])
def test_the_pushed_model_carries_its_metadata_and_mediapipe_agrees_with_litert(
    tmp_path: Path, model_artifact, examples, mode: str
) -> None:
    edge_model, _ = _run(tmp_path, model_artifact, examples, mode=mode, app_client="mediapipe")

    metadata = json.loads((Path(edge_model.uri) / "edge_metadata.json").read_text())
    check = metadata["app_client"]
    print(f"{mode}: {check['reason']}; {metadata['size_bytes']} bytes")
    assert edge_model.get_int_custom_property("pushed") == 1, metadata["reason"]
    assert check["passed"] and check["agreement"] >= 0.99 and check["labels_from_metadata"]
    assert check["count"] == 120 and check["mediapipe"] == "1.2.2"
    # As apps feed it: the 16×16 eval images at their own size and at 240×240, resized by MediaPipe itself.
    assert check["sizes"]["camera"]["frame_size"] == [240, 240] and check["sizes"]["own"]["frame_size"] == "own"
    assert all(size["passed"] for size in check["sizes"].values()), check["reason"]
    assert "on frames at 240×240 (MediaPipe resizes them)" in check["reason"]
    pushed = Path(edge_model.get_string_custom_property("pushed_path")) / "model.tflite"
    inside = read_metadata(pushed.read_bytes())
    assert inside["files"]["labels.txt"]["lines"] == ["top", "bottom", "left", "right"]
    assert inside["metadata"]["name"] == "digits"
    assert f"edge.mode {mode}" in inside["metadata"]["version"]
    (tensor,) = inside["metadata"]["subgraph_metadata"][0]["input_tensor_metadata"]
    assert tensor["content"]["content_properties"]["color_space"] == "RGB"
    assert tensor["process_units"][0]["options"] == {"mean": [0.0], "std": [1.0]}  # frames as they are
    assert "RGB frame [1, 16, 16, 3], uint8" in tensor["description"]


def test_a_client_that_disagrees_with_litert_blocks_the_push(
    tmp_path: Path, model_artifact, examples, monkeypatch: pytest.MonkeyPatch
) -> None:
    def wrong_answers(
        tflite: bytes, sets: dict[str, Any], spec: object, already_cropped: Any
    ) -> dict[str, ClientResult]:
        answers = {}
        for name, chunks in sets.items():
            count = sum(len(chunk) for chunk in chunks)
            indices = np.zeros(count, np.int64)  # "top" for every frame
            answers[name] = ClientResult(indices, np.ones(count, np.float32), ("top",) * count, "1.2.2")
        return answers

    monkeypatch.setattr("edge.export.with_model_metadata", lambda tflite, labels, spec: tflite)
    monkeypatch.setattr("edge.gate.classify_sets", wrong_answers)
    edge_model, edge_blessing = _run(tmp_path, model_artifact, examples, app_client="mediapipe", eval_samples=40)

    assert not (tmp_path / "edge").exists()
    assert (Path(edge_blessing.uri) / "NOT_BLESSED").exists()
    reason = edge_model.get_string_custom_property("reason")
    assert "MediaPipe 1.2.2 ImageClassifier agrees with LiteRT on 0.2" in reason
    assert reason.endswith("not pushed")


def test_model_not_blessed_by_the_evaluator_is_skipped(tmp_path: Path, model_artifact, examples) -> None:
    edge_model, edge_blessing = _run(tmp_path, model_artifact, examples, _blessing(tmp_path, blessed=False))

    assert not (tmp_path / "edge").exists()
    assert sorted(path.name for path in Path(edge_model.uri).iterdir()) == ["edge_metadata.json"]
    assert (Path(edge_blessing.uri) / "NOT_BLESSED").exists()
    assert edge_blessing.get_int_custom_property("blessed") == 0
    fields = edge_summary(edge_model.uri)
    assert fields["edge_model_path"] is None
    assert fields["edge"]["status"] == "skipped"
    assert "the Evaluator did not bless the model" in fields["edge"]["reason"]
    assert fields["metrics"] == {}


def test_accuracy_drop_above_the_gate_is_not_blessed_nor_pushed(tmp_path: Path, model_artifact) -> None:
    # Calibrating on 5%-brightness train images saturates the int8 input on normal eval images.
    dark_train = _examples(tmp_path / "examples", train_brightness=0.05)

    edge_model, edge_blessing = _run(tmp_path, model_artifact, dark_train, max_accuracy_drop=0.01)

    assert not (tmp_path / "edge").exists()
    assert (Path(edge_model.uri) / "model.tflite").exists()  # kept in the artifact for inspection
    assert (Path(edge_blessing.uri) / "NOT_BLESSED").exists()
    assert edge_blessing.get_float_custom_property("accuracy_drop") > 0.2
    fields = edge_summary(edge_model.uri)
    assert fields["edge_model_path"] is None
    assert fields["edge"]["status"] == "not_blessed"
    assert "exceeds edge.max_accuracy_drop 1.00 points, by" in fields["edge"]["reason"]
    assert fields["metrics"]["edge_accuracy_drop"] > 0.2


def test_conversion_errors_fail_the_component(tmp_path: Path, model_artifact, examples) -> None:
    empty = standard_artifacts.Examples()
    empty.uri = str(tmp_path / "no-examples")

    with pytest.raises(EdgeError, match=r"no `train` examples under .*no-examples"):
        _run(tmp_path, model_artifact, empty)


def test_component_wires_channels_and_carries_the_edge_section_as_json(tmp_path: Path) -> None:
    model = types.Channel(type=standard_artifacts.Model)
    examples = types.Channel(type=standard_artifacts.Examples)
    blessing = types.Channel(type=standard_artifacts.ModelBlessing)
    options = EdgeOptions(mode="dynamic", threads=4)

    component = EdgeExporter(
        model=model,
        examples=examples,
        model_blessing=blessing,
        push_base=str(tmp_path),
        options=options,
        label_offset=1,
    )

    assert component.outputs["edge_model"].type is EdgeModel
    assert component.outputs["edge_blessing"].type is EdgeBlessing
    assert set(component.exec_properties) == {"options", "push_base", "label_offset"}
    assert EdgeOptions.model_validate_json(component.exec_properties["options"]) == options
    assert component.exec_properties["push_base"] == str(tmp_path)
    assert component.exec_properties["label_offset"] == 1
    default = EdgeExporter(model=model, examples=examples, push_base=str(tmp_path))
    assert EdgeOptions.model_validate_json(default.exec_properties["options"]) == EdgeOptions()


def test_edge_options_check_mode_ops_and_io_dtype() -> None:
    with pytest.raises(ValidationError, match=r"unknown quantization mode; registered: dynamic, float16, int8, none"):
        EdgeOptions(mode="int4")
    with pytest.raises(ValidationError, match=r"supported_ops"):
        EdgeOptions(supported_ops="everything")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"edge.io_dtype=int8 applies to edge.mode=int8 only.*uint8 \(the"):
        EdgeOptions(mode="float16", io_dtype="int8")
    assert EdgeOptions(mode="float16").io_dtype == EdgeOptions().io_dtype == "uint8"
    with pytest.raises(ValidationError, match=r"edge.io_dtype=int8 makes a model MediaPipe cannot feed"):
        EdgeOptions(io_dtype="int8")
    assert EdgeOptions(io_dtype="int8", app_client="none").io_dtype == "int8"


def test_edge_summary_of_a_missing_artifact_says_so(tmp_path: Path) -> None:
    with pytest.raises(EdgeError, match=r"cannot read the EdgeExporter's .*edge_metadata.json.*was the EdgeExporter"):
        edge_summary(tmp_path)
    (tmp_path / "edge_metadata.json").write_text(json.dumps({"skipped": True, "reason": "r"}))
    assert edge_summary(tmp_path)["edge"]["status"] == "skipped"
