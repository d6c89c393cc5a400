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
