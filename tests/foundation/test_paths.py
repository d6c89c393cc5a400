"""foundation.paths: the one scheme rule, and file access that reads a bucket like a local folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundation import paths


@pytest.mark.parametrize(
    ("path", "scheme"),
    [
        ("gs://bucket/data", "gs"),
        ("minio://mlpipeline/v2/artifacts", "minio"),
        ("s3://b", "s3"),
        ("ram://x/y", "ram"),
        ("pvc://claim/model", "pvc"),
        ("data/digits", ""),
        ("/abs/path", ""),
        ("", ""),
        ("./gs://x", ""),  # a local folder whose name holds "://" is still local
        ("data/a://b", ""),
        ("://nothing", ""),
        ("1gs://x", ""),  # a scheme starts with a letter
    ],
)
def test_scheme_and_is_remote(path: str, scheme: str) -> None:
    assert paths.scheme(path) == scheme
    assert paths.is_remote(path) is bool(scheme)


def test_split_bucket_and_uri() -> None:
    assert paths.split_bucket("minio://mlpipeline/v2/artifacts") == ("mlpipeline", "v2/artifacts")
    assert paths.split_bucket("gs://bucket") == ("bucket", "")
    assert paths.uri("gs") == "gs://"
    assert paths.uri("pvc", "claim/model") == "pvc://claim/model"
    with pytest.raises(ValueError, match="local path"):
        paths.split_bucket("data/digits")


def test_join_name_and_parent_keep_the_scheme() -> None:
    assert paths.join("gs://bucket/", "serving", "digits") == "gs://bucket/serving/digits"
    assert paths.join("/", "x") == "/x"
    assert paths.name_of("gs://b/m/5/") == "5"
    assert paths.parent_of("gs://b/m/5") == "gs://b/m"


def test_local_file_access(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.txt"
    paths.makedirs(target.parent)
    paths.makedirs(target.parent)  # exists: nothing to do
    paths.write_text(target, "héllo")
    assert paths.read_text(target) == "héllo" and paths.read_bytes(str(target)) == "héllo".encode()
    assert paths.exists(target) and paths.is_file(target) and paths.is_dir(tmp_path / "a")
    assert paths.children(str(tmp_path), "a*") == [f"{tmp_path}/a"]
    assert paths.children(str(tmp_path / "missing")) == []
    assert paths.files_under(str(tmp_path)) == ["a/b.txt"]
    assert paths.tree_bytes(str(tmp_path)) == len("héllo".encode())
    paths.copy_tree(str(tmp_path / "a"), str(tmp_path / "copy"))
    assert paths.read_text(tmp_path / "copy" / "b.txt") == "héllo"
    with pytest.raises(FileNotFoundError):
        paths.read_bytes(tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError):
        paths.list_dir(tmp_path / "missing")


def test_bucket_file_access_goes_through_gfile(tmp_path: Path) -> None:
    root = "ram://paths-test"
    paths.makedirs(f"{root}/model/variables")
    paths.write_text(f"{root}/model/variables/v.index", "index")
    paths.write_text(f"{root}/model/m.pb", "pb")
    assert paths.is_dir(f"{root}/model") and paths.is_file(f"{root}/model/m.pb")
    assert sorted(paths.list_dir(f"{root}/model")) == ["m.pb", "variables"]
    assert paths.files_under(f"{root}/model") == ["m.pb", "variables/v.index"]
    paths.copy_tree(f"{root}/model", str(tmp_path / "local"))
    assert (tmp_path / "local" / "variables" / "v.index").read_text() == "index"
    with pytest.raises(FileNotFoundError):
        paths.read_bytes(f"{root}/missing")
    paths.remove_tree(f"{root}/model")
    assert not paths.exists(f"{root}/model")
