"""pipeline.layout: remote paths and the one rule from `data.split` to the files ImportExampleGen reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import build_config
from pipeline.layout import is_remote, resolve_split, split_patterns
from pipeline.pipeline import example_gen_input_config, example_gen_output_config
from pipeline.runners.diagnose import input_patterns


def _config(*overrides: str):  # type: ignore[no-untyped-def]
    return build_config({}, ["pipeline.output=/nonexistent/out", *overrides])


@pytest.mark.parametrize(
    ("path", "remote"),
    [("gs://bucket/data", True), ("s3://bucket", True), ("data/digits", False), ("/abs/path", False), ("", False)],
)
def test_is_remote(path: str, remote: bool) -> None:
    assert is_remote(path) is remote


def test_auto_split_is_folders_when_both_folders_exist(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    assert resolve_split(_config(f"data.path={tmp_path}")).data.split == "hash"
    (tmp_path / "eval").mkdir()
    assert resolve_split(_config(f"data.path={tmp_path}")).data.split == "folders"


def test_auto_split_of_remote_data_is_folders_without_reading_the_bucket() -> None:
    assert resolve_split(_config("data.path=gs://no-such-bucket/imagenet")).data.split == "folders"


def test_an_explicit_split_is_kept(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "eval").mkdir()
    config = _config(f"data.path={tmp_path}", "data.split=hash")
    assert resolve_split(config) is config


def test_split_patterns() -> None:
    assert split_patterns(_config("data.split=folders")) == {"train": "train/*", "eval": "eval/*"}
    assert split_patterns(_config("data.split=hash", "data.file_pattern=*.gz")) == {"all": "*.gz"}


@pytest.mark.parametrize("split", ["folders", "hash"])
def test_example_gen_and_the_failure_diagnosis_read_the_same_files(split: str) -> None:
    config = _config("data.path=/data/", f"data.split={split}", "data.file_pattern=part-*")
    input_config = example_gen_input_config(config)
    assert {s.name: s.pattern for s in input_config.splits} == split_patterns(config)
    assert input_patterns(config) == [f"/data/{pattern}" for pattern in split_patterns(config).values()]
    output_config = example_gen_output_config(config)
    if split == "hash":
        assert output_config is not None
        assert [s.name for s in output_config.split_config.splits] == ["train", "eval"]
    else:
        assert output_config is None


def test_local_paths_are_absolute_and_the_split_concrete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.runners.local import resolve_local_paths

    (tmp_path / "digits" / "train").mkdir(parents=True)
    (tmp_path / "digits" / "eval").mkdir()
    (tmp_path / "digits" / "labels.txt").write_text("zero\none\n")  # checked before any component runs
    monkeypatch.chdir(tmp_path)
    config = resolve_local_paths(build_config({}, ["data.path=digits", "pipeline.output=out"]))
    assert config.data.path == str(tmp_path / "digits")
    assert config.data.labels_path == str(tmp_path / "digits" / "labels.txt")
    assert config.pipeline.output == str(tmp_path / "out")
    assert config.data.split == "folders"


def test_local_runs_refuse_a_bucket_output_and_missing_data(tmp_path: Path) -> None:
    from pipeline.runners.local import resolve_local_paths

    with pytest.raises(FileNotFoundError, match=r"pipeline\.output gs://b/out is a bucket"):
        resolve_local_paths(build_config({}, [f"data.path={tmp_path}", "pipeline.output=gs://b/out"]))
    with pytest.raises(FileNotFoundError, match=r"data.path .*missing is not a directory"):
        resolve_local_paths(build_config({}, [f"data.path={tmp_path / 'missing'}", f"pipeline.output={tmp_path}"]))
