"""foundation.publish: numbered versions that appear complete or not at all, and re-pushes that reuse them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from foundation import paths, publish
from foundation.publish import PUSH_RECORD, find_published, list_versions, next_version, publish_version


def _model(tmp_path: Path, name: str = "model") -> Path:
    model = tmp_path / name
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"pb")
    (model / "variables" / "variables.index").write_bytes(b"index")
    return model


def test_next_version_is_a_timestamp_above_existing_versions() -> None:
    assert next_version([], now=100.7) == 100
    assert next_version(["99", "notes", ".staging-5"], now=100) == 100
    assert next_version(["100"], now=100) == 101  # two pushes within one second
    assert next_version(["500"], now=100) == 501  # clock behind the newest version


def test_list_versions_is_numeric_directories_newest_first(tmp_path: Path) -> None:
    base = tmp_path / "serving" / "digits"
    assert list_versions(base) == []  # no base path yet
    base.mkdir(parents=True)
    assert list_versions(base) == []  # no versions yet
    for name in ("9", "1700000000", "10", ".staging-1800000000-abcd1234", "notes", "tmp-12"):
        (base / name).mkdir()
    (base / "11").write_text("a file, not a version")
    assert list_versions(base) == [f"{base}/1700000000", f"{base}/10", f"{base}/9"]


def test_list_versions_can_require_the_file_that_marks_a_complete_version(tmp_path: Path) -> None:
    base = tmp_path / "edge"
    (base / "1").mkdir(parents=True)
    (base / "1" / "model.tflite").write_bytes(b"m")
    (base / "2").mkdir()  # a bucket copy still under way: no model.tflite yet
    assert list_versions(base, required_file="model.tflite") == [f"{base}/1"]


def test_publish_copies_into_a_new_version_and_records_the_identity(tmp_path: Path) -> None:
    base = tmp_path / "serving" / "digits"
    version = publish_version(_model(tmp_path), base, identity="model-1", version=1000)
    assert version == f"{base}/1000"
    assert (base / "1000" / "saved_model.pb").read_bytes() == b"pb"
    assert (base / "1000" / "variables" / "variables.index").read_bytes() == b"index"
    assert json.loads((base / "1000" / PUSH_RECORD).read_text()) == {"identity": "model-1", "version": 1000}
    assert sorted(p.name for p in base.iterdir()) == ["1000"]  # no staging dir left
    assert list_versions(base) == [version]


def test_republishing_an_identity_returns_its_version(tmp_path: Path) -> None:
    base = tmp_path / "serving"
    model = _model(tmp_path)
    first = publish_version(model, base, identity="model-1", version=1000)
    again = publish_version(model, base, identity="model-1")
    other = publish_version(_model(tmp_path, "model2"), base, identity="model-2")
    assert again == first
    assert int(Path(other).name) > 1000
    assert find_published(base, "model-2") == other
    assert find_published(base, "model-3") is None
    assert find_published(tmp_path / "nothing-here", "model-1") is None


def test_a_record_written_before_the_identity_key_still_counts(tmp_path: Path) -> None:
    (tmp_path / "serving" / "7").mkdir(parents=True)
    (tmp_path / "serving" / "7" / PUSH_RECORD).write_text('{"source": "/models/m/Format-Serving", "version": 7}')
    (tmp_path / "serving" / "8").mkdir()
    (tmp_path / "serving" / "8" / PUSH_RECORD).write_text("{damaged")
    assert find_published(tmp_path / "serving", "/models/m/Format-Serving") == f"{tmp_path}/serving/7"


def test_an_existing_version_is_never_overwritten(tmp_path: Path) -> None:
    base = tmp_path / "serving"
    publish_version(_model(tmp_path), base, identity="old", version=1000)
    with pytest.raises(FileExistsError, match=r"serving/1000 exists already; versions are never overwritten"):
        publish_version(_model(tmp_path, "new"), base, identity="new", version=1000)
    assert json.loads((base / "1000" / PUSH_RECORD).read_text())["identity"] == "old"


def test_failed_copy_leaves_base_path_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "serving"
    publish_version(_model(tmp_path), base, identity="old", version=1000)

    real_copytree = shutil.copytree

    def broken_copy(source: str, target: str) -> None:
        real_copytree(f"{source}/variables", f"{target}/variables")  # half a model, then a failure
        raise OSError("disk full")

    monkeypatch.setattr(publish.shutil, "copytree", broken_copy)
    with pytest.raises(OSError, match="disk full"):
        publish_version(_model(tmp_path, "new"), base, identity="new")
    assert sorted(p.name for p in base.iterdir()) == ["1000"]


def test_missing_model_dir_or_last_file_is_explained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist; nothing to push"):
        publish_version(tmp_path / "nope", tmp_path / "serving", identity="x")
    with pytest.raises(FileNotFoundError, match=r"cannot push .*model: model.tflite is missing"):
        publish_version(_model(tmp_path), tmp_path / "serving", identity="x", last_file="model.tflite")
    assert not (tmp_path / "serving").exists()


def test_a_bucket_gets_its_files_moved_in_with_the_completing_file_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TensorFlow's in-memory file system stands in for gs:// (no directory rename there either).
    source = tmp_path / "edge_model"
    source.mkdir()
    for name in ("labels.txt", "model.tflite", "edge_metadata.json"):
        (source / name).write_text(name)
    moved: list[str] = []
    real_rename = publish._rename
    monkeypatch.setattr(publish, "_rename", lambda src, dst: (moved.append(Path(dst).name), real_rename(src, dst)))
    base = f"ram://{tmp_path.name}/edge/digits"

    version = publish_version(source, base, identity="sha", last_file="model.tflite", version=5)
    again = publish_version(source, base, identity="sha", last_file="model.tflite")

    assert version == again == f"{base}/5"
    assert moved == ["edge_metadata.json", "labels.txt", PUSH_RECORD, "model.tflite"]
    assert list_versions(base, required_file="model.tflite") == [version]
    assert find_published(base, "sha") == version


def _ram_files(root: str) -> list[str]:
    import tensorflow as tf

    return sorted(f"{parent}/{name}"[len(root) + 1 :] for parent, _, names in tf.io.gfile.walk(root) for name in names)


def test_a_bucket_version_is_staged_under_a_hidden_name_then_moved_in_with_the_completing_file_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved: list[str] = []
    real_rename = publish._rename
    monkeypatch.setattr(publish, "_rename", lambda src, dst: (moved.append(dst), real_rename(src, dst)))
    base = f"ram://{tmp_path.name}-staged/serving/digits"

    version = publish_version(_model(tmp_path), base, identity="model-1", last_file="saved_model.pb", version=7)

    assert [path.removeprefix(f"{base}/") for path in moved] == [
        "7/variables/variables.index",
        f"7/{PUSH_RECORD}",
        "7/saved_model.pb",
    ]
    assert _ram_files(base) == ["7/saved_model.pb", f"7/{PUSH_RECORD}", "7/variables/variables.index"]  # no staging
    assert list_versions(base, required_file="saved_model.pb") == [version]


def test_a_bucket_copy_that_fails_leaves_no_version_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = f"ram://{tmp_path.name}-failed/serving/digits"
    real_copy = paths.copy_file

    def broken_copy(source: str, target: str) -> None:
        if target.endswith("saved_model.pb"):
            raise OSError("bucket quota exceeded")
        real_copy(source, target)

    monkeypatch.setattr(paths, "copy_file", broken_copy)
    with pytest.raises(OSError, match="bucket quota exceeded"):
        publish_version(_model(tmp_path), base, identity="model-1", last_file="saved_model.pb")
    assert list_versions(base) == []  # what was copied sat under the hidden staging name, now removed


def test_a_bucket_version_whose_move_stopped_before_the_completing_file_is_not_reused(tmp_path: Path) -> None:
    import tensorflow as tf

    base = f"ram://{tmp_path.name}-half/serving/digits"
    half = f"{base}/1000"  # moved: the variables and the record; not yet saved_model.pb
    tf.io.gfile.makedirs(f"{half}/variables")
    with tf.io.gfile.GFile(f"{half}/{PUSH_RECORD}", "w") as handle:
        handle.write(json.dumps({"identity": "model-1", "version": 1000}))

    version = publish_version(_model(tmp_path), base, identity="model-1", last_file="saved_model.pb")

    assert version != half and int(version.rsplit("/", 1)[1]) > 1000
    assert list_versions(base, required_file="saved_model.pb") == [version]
    assert find_published(base, "model-1", required_file="saved_model.pb") == version
