from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from components.pusher import atomic
from components.pusher.atomic import PUSH_RECORD, next_version, publish_version


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


def test_publish_copies_into_a_new_version_and_records_the_source(tmp_path: Path) -> None:
    base = tmp_path / "serving" / "digits"
    version = publish_version(_model(tmp_path), base, source_id="model-1", now=1000)
    assert version == base / "1000"
    assert (version / "saved_model.pb").read_bytes() == b"pb"
    assert json.loads((version / PUSH_RECORD).read_text())["source"] == "model-1"
    assert sorted(p.name for p in base.iterdir()) == ["1000"]  # no staging dir left


def test_republishing_the_same_model_returns_its_version(tmp_path: Path) -> None:
    base = tmp_path / "serving"
    model = _model(tmp_path)
    first = publish_version(model, base, source_id="model-1", now=1000)
    again = publish_version(model, base, source_id="model-1", now=2000)
    other = publish_version(_model(tmp_path, "model2"), base, source_id="model-2", now=2000)
    assert again == first
    assert other.name == "2000"


def test_failed_copy_leaves_base_path_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "serving"
    publish_version(_model(tmp_path), base, source_id="old", now=1000)

    real_copytree = shutil.copytree

    def broken_copy(source: Path, target: Path) -> None:
        real_copytree(source / "variables", Path(target) / "variables")  # half a model, then a failure
        raise OSError("disk full")

    monkeypatch.setattr(atomic.shutil, "copytree", broken_copy)
    with pytest.raises(OSError, match="disk full"):
        publish_version(_model(tmp_path, "new"), base, source_id="new", now=2000)
    assert sorted(p.name for p in base.iterdir()) == ["1000"]


def test_missing_model_dir_is_explained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist; nothing to push"):
        publish_version(tmp_path / "nope", tmp_path / "serving")
