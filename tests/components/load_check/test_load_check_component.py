"""LoadCheck: the executor's Do() on artifacts in a tmp dir (no pipeline run), with the edge tests' small trained
model served by tfxp's server in a child process; its InfraBlessing is what TFX's InfraValidator writes, and TFX's
Pusher (ours is its subclass) skips the push when it is not blessed, leaving the published versions as they were."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from edge_fixtures import shared_model, write_dataset
from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components.load_check.blessing import read_result
from components.load_check.component import LoadCheck
from components.load_check.executor import Executor
from components.pusher.executor import AtomicPusherExecutor
from foundation.publish import list_versions


def _model(uri: Path, saved_model: Path) -> standard_artifacts.Model:
    shutil.copytree(saved_model, uri / "Format-Serving")
    model = standard_artifacts.Model()
    model.uri = str(uri)
    return model


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(write_dataset(tmp_path_factory.mktemp("examples"), tfx_layout=True))
    examples.splits = ["train", "eval"]
    return examples


def _check(
    model: standard_artifacts.Model, examples: standard_artifacts.Examples, out: Path
) -> standard_artifacts.InfraBlessing:
    blessing = standard_artifacts.InfraBlessing()
    blessing.uri = str(out / "LoadCheck" / "blessing" / "1")
    Executor().Do(
        {"model": [model], "examples": [examples]},
        {"blessing": [blessing]},
        {"model_name": "digits", "samples": 16, "timeout_seconds": 60.0, "atol": 1e-4},
    )
    return blessing


@pytest.mark.slow  # a server in a child process
def test_a_model_that_serves_like_in_process_is_infra_blessed(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, examples: standard_artifacts.Examples
) -> None:
    model = _model(tmp_path / "Trainer" / "model" / "1", shared_model(tmp_path_factory))
    blessing = _check(model, examples, tmp_path)
    assert blessing.get_int_custom_property("blessed") == 1
    assert sorted(path.name for path in Path(blessing.uri).iterdir()) == ["INFRA_BLESSED", "load_check.json"]
    result = read_result(blessing.uri)
    assert result.passed and result.examples_compared == 16, result.reason
    assert blessing.get_string_custom_property("reason") == result.reason
    assert blessing.get_string_custom_property("server") == result.server == "tfxp local server"


@pytest.mark.slow  # a server in a child process
def test_a_model_whose_warmup_fails_is_not_blessed_and_not_pushed(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, examples: standard_artifacts.Examples
) -> None:
    model = _model(tmp_path / "Trainer" / "model" / "2", shared_model(tmp_path_factory))
    warmup = Path(model.uri) / "Format-Serving" / "assets.extra" / "tf_serving_warmup_requests"
    warmup.parent.mkdir()
    warmup.write_bytes(b"\x00 not a TFRecord file")
    blessing = _check(model, examples, tmp_path)

    assert blessing.get_int_custom_property("blessed") == 0
    assert (Path(blessing.uri) / "INFRA_NOT_BLESSED").is_file() and not (Path(blessing.uri) / "INFRA_BLESSED").exists()
    reason = blessing.get_string_custom_property("reason")
    assert reason.startswith("the model did not load: version 1 of digits in tfxp local server")
    assert "tf_serving_warmup_requests: not a TFRecord file of PredictionLog protos" in reason
    assert json.loads((Path(blessing.uri) / "load_check.json").read_text())["passed"] is False

    # The Evaluator blessed it; the Pusher still skips it, and the version served before stays as it was.
    base = tmp_path / "serving" / "digits"
    (base / "100").mkdir(parents=True)
    (base / "100" / "saved_model.pb").write_bytes(b"the served model")
    model_blessing = standard_artifacts.ModelBlessing()
    model_blessing.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "Pusher" / "pushed_model" / "3")
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(base)))
    AtomicPusherExecutor().Do(
        {"model": [model], "model_blessing": [model_blessing], "infra_blessing": [blessing]},
        {"pushed_model": [pushed]},
        {"push_destination": proto_utils.proto_to_json(destination), "custom_config": "null"},
    )
    assert pushed.get_int_custom_property("pushed") == 0
    assert list_versions(str(base)) == [str(base / "100")]
    assert (base / "100" / "saved_model.pb").read_bytes() == b"the served model"


def test_the_component_wires_model_and_examples_to_an_infra_blessing() -> None:
    from tfx import types

    model = types.Channel(type=standard_artifacts.Model)
    examples = types.Channel(type=standard_artifacts.Examples)
    component = LoadCheck(model=model, examples=examples, model_name="digits")
    assert set(component.inputs) == {"model", "examples"}
    assert component.outputs["blessing"].type == standard_artifacts.InfraBlessing
    assert component.exec_properties == {"model_name": "digits", "samples": 64, "timeout_seconds": 300.0, "atol": 1e-4}
