"""The one "is this a version folder" rule (foundation.publish) and everything that reads versions through it.

A version is a folder named by ASCII digits whose value fits TF Serving's int64 (TF Serving parses names with
`safe_strto64`, tensorflow_serving/sources/storage_path/file_system_storage_path_source.cc, and skips the rest).
The serving manager, ServedBaseline (`find_served_model`), the Pusher's next version and its driver's fingerprint,
the notice's push records and the run summary all follow it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from components.baseline.served import find_served_model
from components.notify.notice import pushed_version_of
from components.pusher.driver import pushed_fingerprint
from foundation.contract import EDGE_MODEL_FILE, SAVED_MODEL_FILE
from foundation.publish import (
    MAX_VERSION,
    PUSH_RECORD,
    is_complete_version,
    is_version_name,
    list_versions,
    looks_like_version,
    newest_version,
    next_version,
    publish_version,
    push_identity,
    push_records,
    read_push_record,
    version_number,
)
from serving.manager import ModelManager
from serving.model_config import ModelConfig

# Folder names a careless or hostile hand leaves in a model base path; none is a version.
NOT_VERSIONS = [
    "²",  # a superscript: str.isdigit() is True, int() raises
    "٣",  # Arabic-Indic three: str.isdigit() is True, int() reads 3
    "５",  # a full-width digit
    str(MAX_VERSION + 1),  # 9223372036854775808: one beyond int64
    "99999999999999999999",
    "5.tmp",
    ".5",
    ".staging-5-abcd1234",
    ".7",
    "-1",
    "+1",
    " 5",
    "5 ",
    "1e3",
    "0x10",
    "",
    "latest",
]


@pytest.mark.parametrize(
    ("name", "number"), [("1", 1), ("1796083574", 1796083574), ("007", 7), ("0", 0), (str(MAX_VERSION), MAX_VERSION)]
)
def test_versions_are_ascii_digits_within_int64(name: str, number: int) -> None:
    # 0 is a version: TF Serving's safe_strto64 parses it and int64 holds it.
    assert version_number(name) == number
    assert is_version_name(name)


@pytest.mark.parametrize("name", NOT_VERSIONS)
def test_other_names_are_never_versions(name: str) -> None:
    assert version_number(name) is None
    assert not is_version_name(name)


def test_names_a_digit_test_would_take_are_flagged_for_a_warning() -> None:
    assert [name for name in NOT_VERSIONS if looks_like_version(name)] == [
        "²",
        "٣",
        "５",
        str(MAX_VERSION + 1),
        "99999999999999999999",
    ]
    assert not looks_like_version("17")


def _base_with_strays(tmp_path: Path, required_file: str = SAVED_MODEL_FILE) -> Path:
    """A base path with versions 5 and 7 and every stray name, each stray holding a complete model."""
    base = tmp_path / "serving" / "digits"
    for name in ["5", "7", *(name for name in NOT_VERSIONS if name and "/" not in name)]:
        (base / name).mkdir(parents=True)
        (base / name / required_file).write_bytes(b"model")
    return base


def test_list_versions_ignores_every_stray_folder_newest_first(tmp_path: Path) -> None:
    base = _base_with_strays(tmp_path)
    assert list_versions(base, required_file=SAVED_MODEL_FILE) == [f"{base}/7", f"{base}/5"]
    assert newest_version(base, SAVED_MODEL_FILE) == f"{base}/7"


def test_of_two_names_for_one_version_the_unpadded_is_newest(tmp_path: Path) -> None:
    base = tmp_path / "base"
    for name in ("007", "7", "6"):
        (base / name).mkdir(parents=True)
    assert list_versions(base) == [f"{base}/7", f"{base}/007", f"{base}/6"]


def test_newest_complete_version_needs_the_file_published_last(tmp_path: Path) -> None:
    base = tmp_path / "edge" / "digits"
    (base / "1").mkdir(parents=True)
    (base / "1" / EDGE_MODEL_FILE).write_bytes(b"m")
    (base / "2").mkdir()  # a bucket copy still under way
    assert newest_version(base, EDGE_MODEL_FILE) == f"{base}/1"
    assert newest_version(base, None) == f"{base}/2"
    assert newest_version(tmp_path / "missing", EDGE_MODEL_FILE) is None
    assert is_complete_version(f"{base}/1", EDGE_MODEL_FILE)
    assert not is_complete_version(f"{base}/2", EDGE_MODEL_FILE)
    assert not is_complete_version(f"{base}/3", None)  # gone


def test_a_stray_folder_is_no_complete_version_even_with_a_model(tmp_path: Path) -> None:
    base = _base_with_strays(tmp_path)
    assert not is_complete_version(f"{base}/99999999999999999999", SAVED_MODEL_FILE)
    assert not is_complete_version(f"{base}/²", SAVED_MODEL_FILE)


def test_served_baseline_ignores_stray_folders(tmp_path: Path) -> None:
    base = _base_with_strays(tmp_path)
    (base / "7" / PUSH_RECORD).write_text(json.dumps({"identity": "root/Trainer/model/3/Format-Serving"}))
    served = find_served_model(str(base))
    assert served is not None
    assert (served.version, served.path, served.identity) == ("7", f"{base}/7", "root/Trainer/model/3/Format-Serving")


def test_only_stray_folders_mean_nothing_is_served(tmp_path: Path) -> None:
    base = _base_with_strays(tmp_path)
    for name in ("5", "7"):
        (base / name / SAVED_MODEL_FILE).unlink()
    assert find_served_model(str(base)) is None


def test_the_next_version_is_not_derived_from_an_overflow_folder() -> None:
    assert next_version(["99999999999999999999", str(MAX_VERSION + 1), "²", "٣", "100"], now=50) == 101
    with pytest.raises(ValueError, match="int64"):
        next_version([str(MAX_VERSION)], now=50)


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / SAVED_MODEL_FILE).write_bytes(b"pb")
    return model


def test_the_pushers_next_version_stays_servable_beside_an_overflow_folder(tmp_path: Path) -> None:
    base = _base_with_strays(tmp_path)
    version_dir = publish_version(_model(tmp_path), base, identity="run-a", last_file=SAVED_MODEL_FILE)
    number = version_number(Path(version_dir).name)
    assert number is not None and 7 < number <= MAX_VERSION
    assert find_served_model(str(base)).path == version_dir  # type: ignore[union-attr]


def test_the_pusher_fingerprint_lists_only_versions(tmp_path: Path) -> None:
    base = _base_with_strays(tmp_path)
    assert pushed_fingerprint(str(base)) == "7,5"


def test_push_records_are_read_in_one_place(tmp_path: Path) -> None:
    base = _base_with_strays(tmp_path)
    (base / "7" / PUSH_RECORD).write_text(json.dumps({"identity": "/root/p/run-b/Trainer/model", "version": 7}))
    (base / "5" / PUSH_RECORD).write_text(json.dumps({"source": "/root/p/run-a/Trainer/model"}))  # an older key
    (base / "99999999999999999999" / PUSH_RECORD).write_text(json.dumps({"identity": "/root/p/run-c/x"}))
    records = push_records(base, SAVED_MODEL_FILE)
    assert list(records) == [f"{base}/7", f"{base}/5"]
    assert [push_identity(record) for record in records.values()] == [
        "/root/p/run-b/Trainer/model",
        "/root/p/run-a/Trainer/model",
    ]
    assert pushed_version_of(records, "run-a") == ("5", f"{base}/5")
    assert pushed_version_of(records, "run-c") is None  # its folder is no version


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", "\xff"])
def test_a_damaged_push_record_reads_as_none(tmp_path: Path, content: str) -> None:
    (tmp_path / "5").mkdir()
    (tmp_path / "5" / PUSH_RECORD).write_bytes(content.encode("latin-1"))
    assert read_push_record(str(tmp_path / "5")) is None
    assert read_push_record(str(tmp_path / "missing")) is None
    assert push_identity(None) == ""


def _loader(name: str, version: int, path: Path) -> object:
    if not path.is_dir():
        raise ValueError(f"{path} does not exist")

    class Loaded:
        def close(self) -> None:
            pass

    return Loaded()


def test_the_serving_manager_ignores_stray_folders_with_a_warning_and_loads_new_versions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = tmp_path / "m"
    (base / "1").mkdir(parents=True)
    for name in ("²", "٣", "99999999999999999999", "5.tmp", ".7"):
        (base / name).mkdir()
    manager = ModelManager(ModelConfig("m", base), _loader)
    with caplog.at_level(logging.WARNING, logger="serving.manager"):
        manager.poll()
        manager.poll()  # one warning per folder, not one per poll
    assert manager.available_versions() == [1]
    warned = [record.getMessage() for record in caplog.records if "not a version" in record.getMessage()]
    assert len(warned) == 3 and all(name in " ".join(warned) for name in ("²", "٣", "99999999999999999999"))
    (base / "2").mkdir()  # a new good version still loads
    manager.poll()
    assert manager.available_versions() == [2]
    assert set(manager.states()) == {1, 2}  # no state for a stray folder


def test_the_serving_manager_loads_a_padded_version_from_its_own_folder(tmp_path: Path) -> None:
    (tmp_path / "007").mkdir()
    manager = ModelManager(ModelConfig("m", tmp_path), _loader)
    manager.poll()
    assert manager.available_versions() == [7]
