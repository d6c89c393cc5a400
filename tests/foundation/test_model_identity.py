"""One model identity (`foundation.model_identity`): what a SavedModel holds, never where it lies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from foundation.model_identity import (
    FINGERPRINT_FILE,
    ModelIdentityError,
    changed_versions,
    find_model_version,
    model_identity,
    version_holds,
)
from foundation.publish import PUSH_RECORD, publish_version


def _saved_model(directory: Path, weight: float, labels: str = "cat\ndog\n", spec: str | None = None) -> Path:
    """A tiny SavedModel with the model contract's assets, as TensorFlow writes it (with `fingerprint.pb`)."""
    import tensorflow as tf

    class Scale(tf.Module):
        def __init__(self) -> None:
            self.weight = tf.Variable(weight)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def __call__(self, x: tf.Tensor) -> tf.Tensor:
            return x * self.weight

    module = Scale()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.__call__})
    (directory / "assets").mkdir(exist_ok=True)
    (directory / "assets" / "labels.txt").write_text(labels)
    (directory / "assets" / "preprocessing.json").write_text(spec or '{"channels": 1, "image_size": 8}')
    return directory


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {"one": _saved_model(root / "one", 1.0), "two": _saved_model(root / "two", 2.0)}


def test_the_identity_is_the_content_not_the_path(models: dict[str, Path], tmp_path: Path) -> None:
    assert (models["one"] / FINGERPRINT_FILE).is_file()
    one = model_identity(models["one"])
    assert one.startswith("model:") and one == model_identity(str(models["one"]) + "/")
    # The same files elsewhere (a pushed version is a copy) are the same model; other weights are another.
    shutil.copytree(models["one"], tmp_path / "copy")
    assert model_identity(tmp_path / "copy") == one
    assert model_identity(models["two"]) != one


def test_a_renamed_class_or_other_preprocessing_is_another_model(models: dict[str, Path], tmp_path: Path) -> None:
    one = model_identity(models["one"])
    renamed = shutil.copytree(models["one"], tmp_path / "renamed")
    (renamed / "assets" / "labels.txt").write_text("cat\nwolf\n")
    assert model_identity(renamed) != one
    # The label-map rule reads the names: line endings and a trailing blank line do not make another model.
    (renamed / "assets" / "labels.txt").write_text("cat\r\ndog\r\n\n")
    assert model_identity(renamed) == one
    (renamed / "assets" / "preprocessing.json").write_text('{"channels": 1, "image_size": 16}')
    assert model_identity(renamed) != one


def test_a_saved_model_without_a_fingerprint_is_named_by_its_graph_and_weights(
    models: dict[str, Path], tmp_path: Path
) -> None:
    one, two = (shutil.copytree(models[name], tmp_path / name) for name in ("one", "two"))
    for directory in (one, two):
        (directory / FINGERPRINT_FILE).unlink()
    assert model_identity(one) != model_identity(two)
    assert model_identity(one) == model_identity(shutil.copytree(one, tmp_path / "again"))
    with pytest.raises(ModelIdentityError, match=r"holds no saved_model.pb; it is not a SavedModel"):
        model_identity(tmp_path / "nothing")


def test_a_version_holds_what_its_record_says_else_what_its_files_are(models: dict[str, Path], tmp_path: Path) -> None:
    base = tmp_path / "serving" / "digits"
    one, two = model_identity(models["one"]), model_identity(models["two"])
    source = str(models["one"])
    new = publish_version(models["one"], base, identity=one, last_file="saved_model.pb")
    assert version_holds(new, one) and not version_holds(new, two)
    assert find_model_version(base, one) == new and find_model_version(base, two) is None

    # A record written before the identity names the SavedModel's path: the version's files decide.
    legacy_base = tmp_path / "legacy"
    legacy = publish_version(models["one"], legacy_base, identity=source, last_file="saved_model.pb")
    assert find_model_version(legacy_base, one, "/elsewhere") == legacy
    assert find_model_version(legacy_base, two, source) is None  # another model at the same path

    # Only when the files cannot be read is the path compared, as before.
    (Path(legacy) / FINGERPRINT_FILE).write_bytes(b"not a fingerprint")
    assert find_model_version(legacy_base, two, source) == legacy
    assert find_model_version(legacy_base, two, "/elsewhere") is None
    record = json.loads((Path(legacy) / PUSH_RECORD).read_text())
    assert record["identity"] == source


def test_a_version_is_what_its_files_hold_not_what_its_record_says(models: dict[str, Path], tmp_path: Path) -> None:
    """adv3 B16: a version's labels.txt edited after the push; its record still names the model."""
    base = tmp_path / "serving" / "digits"
    one = model_identity(models["one"])
    version = publish_version(models["one"], base, identity=one, last_file="saved_model.pb")
    assert changed_versions(base, one, str(models["one"])) == {}
    (Path(version) / "assets" / "labels.txt").write_text("cat\nwolf\n")

    assert not version_holds(version, one) and find_model_version(base, one) is None
    assert changed_versions(base, one, str(models["one"])) == {version: ["assets/labels.txt"]}
    (Path(version) / "assets" / "preprocessing.json").write_text('{"channels": 1, "image_size": 16}')
    assert changed_versions(base, one, str(models["one"]))[version] == [
        "assets/labels.txt",
        "assets/preprocessing.json",
    ]
