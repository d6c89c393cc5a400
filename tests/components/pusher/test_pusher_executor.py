"""AtomicPusherExecutor: a blessed model becomes one version; a re-run over the same model artifact reuses it."""

from __future__ import annotations

import json
from pathlib import Path

from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components.pusher.executor import AtomicPusherExecutor
from foundation.model_identity import MODEL_IDENTITY_PROPERTY, model_identity
from foundation.publish import PUSH_RECORD, list_versions, publish_version, read_push_record


def _model(tmp_path: Path, run: str) -> standard_artifacts.Model:
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "Trainer" / "model" / run)
    serving = Path(model.uri) / "Format-Serving"
    serving.mkdir(parents=True)
    (serving / "saved_model.pb").write_bytes(f"model {run}".encode())
    return model


def _identity(pushed: standard_artifacts.PushedModel) -> str:
    return str(pushed.get_string_custom_property(MODEL_IDENTITY_PROPERTY))


def _push(
    tmp_path: Path,
    model: standard_artifacts.Model,
    run: str,
    blessed: bool = True,
    base: str | None = None,
    spans: str = "",
) -> standard_artifacts.PushedModel:
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(tmp_path / "Evaluator" / "blessing" / run)
    blessing.set_int_custom_property("blessed", int(blessed))
    if spans:  # what the Evaluator copies from the Examples (components.baseline.evaluator.record_spans)
        blessing.set_string_custom_property("spans", spans)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "Pusher" / "pushed_model" / run)
    destination = pusher_pb2.PushDestination(
        filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=base or str(tmp_path / "serving" / "digits"))
    )
    AtomicPusherExecutor().Do(
        {"model": [model], "model_blessing": [blessing]},
        {"pushed_model": [pushed]},
        {"push_destination": proto_utils.proto_to_json(destination), "custom_config": json.dumps({})},
    )
    return pushed


def test_a_rerun_over_the_same_model_artifact_reuses_its_version(tmp_path: Path) -> None:
    model = _model(tmp_path, "5")
    first = _push(tmp_path, model, "7")
    again = _push(tmp_path, model, "8")
    retrained = _push(tmp_path, _model(tmp_path, "6"), "9")

    base = tmp_path / "serving" / "digits"
    pushed_to = [artifact.get_string_custom_property("pushed_destination") for artifact in (first, again, retrained)]
    assert pushed_to[0] == pushed_to[1] != pushed_to[2]
    assert list_versions(base) == [pushed_to[2], pushed_to[0]]
    assert first.get_int_custom_property("pushed") == again.get_int_custom_property("pushed") == 1
    # Whether this execution created the version (the run record's "pushed version N" vs "no new data").
    published_now = [artifact.get_int_custom_property("published_now") for artifact in (first, again, retrained)]
    assert published_now == [1, 0, 1]
    assert first.get_string_custom_property("pushed_version") == Path(pushed_to[0]).name
    record = json.loads((Path(pushed_to[0]) / PUSH_RECORD).read_text())
    assert record["identity"] == model_identity(f"{model.uri}/Format-Serving") == _identity(first)
    assert record["saved_model"] == f"{model.uri}/Format-Serving"
    assert (Path(pushed_to[0]) / "saved_model.pb").read_bytes() == b"model 5"


def test_a_model_not_blessed_is_not_pushed(tmp_path: Path) -> None:
    pushed = _push(tmp_path, _model(tmp_path, "5"), "7", blessed=False)
    assert pushed.get_int_custom_property("pushed") == 0
    assert not (tmp_path / "serving").exists()


def test_a_bucket_serving_base_gets_a_numbered_version_with_a_push_record_once(tmp_path: Path) -> None:
    import tensorflow as tf

    # TensorFlow's in-memory file system stands in for gs://: a remote URI, read and written through tf.io.gfile.
    base = f"ram://{tmp_path.name}/serving/digits"
    model = _model(tmp_path, "5")

    first = _push(tmp_path, model, "7", base=base)
    again = _push(tmp_path, model, "8", base=base)

    destination = first.get_string_custom_property("pushed_destination")
    assert destination.startswith(f"{base}/") and destination.rsplit("/", 1)[1].isdigit()
    assert again.get_string_custom_property("pushed_destination") == destination
    assert list_versions(base) == [destination]  # pushed once
    assert list_versions(base, required_file="saved_model.pb") == [destination]
    with tf.io.gfile.GFile(f"{destination}/{PUSH_RECORD}") as handle:
        assert json.loads(handle.read())["identity"] == model_identity(f"{model.uri}/Format-Serving")
    with tf.io.gfile.GFile(f"{destination}/saved_model.pb", "rb") as handle:
        assert handle.read() == b"model 5"


def test_the_push_record_keeps_the_spans_the_model_was_trained_on(tmp_path: Path) -> None:
    from components.baseline.evaluator import record_spans
    from components.baseline.served import find_served_model

    # The Evaluator copies the Examples' spans onto the blessing; the Pusher writes them into the push record.
    examples, blessing = standard_artifacts.Examples(), standard_artifacts.ModelBlessing()
    examples.set_string_custom_property("spans", "1,2,3")
    record_spans({"examples": [examples]}, {"blessing": [blessing]})
    assert blessing.get_string_custom_property("spans") == "1,2,3"

    base = tmp_path / "serving" / "digits"
    pushed = _push(tmp_path, _model(tmp_path, "5"), "7", spans="1,2,3")
    record = json.loads((Path(pushed.get_string_custom_property("pushed_destination")) / PUSH_RECORD).read_text())
    assert record["spans"] == [1, 2, 3]
    served = find_served_model(str(base))
    assert served is not None and served.trained_spans == (1, 2, 3)
    # Data without spans: nothing recorded, so the drift checks judge against every earlier span.
    _push(tmp_path, _model(tmp_path, "6"), "8")
    served = find_served_model(str(base))
    assert served is not None and served.trained_spans is None


def test_a_new_model_at_a_path_an_earlier_run_used_is_a_new_version(tmp_path: Path) -> None:
    """The pipeline root and its ML Metadata removed, `serving/` kept: execution ids restart and the retrained
    model lands at the path of the served one. The path is no identity: the new model is published."""
    model = _model(tmp_path, "5")
    first = _push(tmp_path, model, "7")
    (Path(model.uri) / "Format-Serving" / "saved_model.pb").write_bytes(b"model 5, retrained after rm -rf root")

    again = _push(tmp_path, model, "7")

    old, new = (Path(artifact.get_string_custom_property("pushed_destination")) for artifact in (first, again))
    assert new != old and again.get_int_custom_property("published_now") == 1
    assert (new / "saved_model.pb").read_bytes() == b"model 5, retrained after rm -rf root"
    assert (old / "saved_model.pb").read_bytes() == b"model 5"
    assert _identity(again) != _identity(first)
    assert (read_push_record(str(new)) or {}).get("identity") == _identity(again)


def test_a_renamed_class_is_a_new_model(tmp_path: Path) -> None:
    model = _model(tmp_path, "5")
    assets = Path(model.uri) / "Format-Serving" / "assets"
    assets.mkdir()
    (assets / "labels.txt").write_text("cat\ndog\n")
    first = _push(tmp_path, model, "7")
    (assets / "labels.txt").write_text("cat\nwolf\n")

    renamed = _push(tmp_path, model, "8")

    version = Path(renamed.get_string_custom_property("pushed_destination"))
    assert version != Path(first.get_string_custom_property("pushed_destination"))
    assert (version / "assets" / "labels.txt").read_text() == "cat\nwolf\n"


def test_versions_pushed_before_the_identity_are_compared_by_their_content(tmp_path: Path) -> None:
    """A push record from before names the SavedModel's path as its identity: the version's own files say what
    it holds, so the same model from another path is found, and another model at that path is not."""
    base = tmp_path / "serving" / "digits"
    model = _model(tmp_path, "5")
    old = publish_version(f"{model.uri}/Format-Serving", base, identity=f"{model.uri}/Format-Serving")

    moved = _model(tmp_path, "9")  # the same bytes ("model 5") at another path
    (Path(moved.uri) / "Format-Serving" / "saved_model.pb").write_bytes(b"model 5")
    assert _push(tmp_path, moved, "7").get_string_custom_property("pushed_destination") == old

    (Path(model.uri) / "Format-Serving" / "saved_model.pb").write_bytes(b"another model at the old path")
    assert _push(tmp_path, model, "8").get_string_custom_property("pushed_destination") != old
    assert len(list_versions(base)) == 2


def test_a_version_whose_files_changed_since_the_push_is_not_taken_for_the_model(tmp_path: Path) -> None:
    """adv3 B16: the served version's labels.txt edited after the push; its push record still names the model. The
    record is not trusted: the model is pushed again as a new version, and the PushedModel says why."""
    model = _model(tmp_path, "5")
    assets = Path(model.uri) / "Format-Serving" / "assets"
    assets.mkdir()
    (assets / "labels.txt").write_text("0\n1\n")
    first = _push(tmp_path, model, "7")
    served = Path(first.get_string_custom_property("pushed_destination"))
    (served / "assets" / "labels.txt").write_text("zero\n1\n")

    again = _push(tmp_path, model, "8")

    version = Path(again.get_string_custom_property("pushed_destination"))
    assert version != served and again.get_int_custom_property("published_now") == 1
    assert (version / "assets" / "labels.txt").read_text() == "0\n1\n"
    assert (served / "assets" / "labels.txt").read_text() == "zero\n1\n"  # left as the user made it
    assert again.get_string_custom_property("push_note") == (
        f"version {served.name} no longer holds the model its push record names (assets/labels.txt changed since "
        f"the push), so the model was pushed again as version {version.name}; version {served.name} is left as it is"
    )
    # Over the new version, the same model is found and nothing is said.
    third = _push(tmp_path, model, "9")
    assert third.get_string_custom_property("pushed_destination") == str(version)
    assert third.get_int_custom_property("published_now") == 0 and not third.has_custom_property("push_note")
