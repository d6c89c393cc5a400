"""foundation.path_rules: under a base, on a folder, never onto an input, and removing only what tfxp made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from foundation.data.layout import DataSpec
from foundation.path_rules import (
    CLAIM_MARKER,
    PathRuleError,
    check_apart_from_data,
    check_not_input,
    check_relative,
    check_written_by_tfxp,
    claim_dir,
    is_under,
    lies_in,
    normalized,
    record_written,
    relative_problem,
    remove_claimed,
    remove_made_file,
)


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("train-*", None),
        ("span-*/train/*", None),
        ("", None),
        ("a/../train/*", None),  # stays under the folder once resolved
        ("/data/*", "is absolute"),
        ("gs://b/*", "is a URI"),
        ("../../../../etc/*", "leaves the folder: it resolves to ../../../../etc/*"),
        ("train/../../etc/*", "leaves the folder: it resolves to ../etc/*"),
        ("span-*/../../x", "leaves the folder"),
        ("..", "leaves the folder"),
    ],
)
def test_a_relative_path_stays_under_its_base(pattern: str, problem: str | None) -> None:
    found = relative_problem(pattern)
    assert found is None if problem is None else problem in (found or "")


def test_check_relative_names_the_key_and_the_base() -> None:
    with pytest.raises(PathRuleError, match=r"data.train_pattern = '\.\./etc/\*' leaves the folder.*under data.path"):
        check_relative("../etc/*", "data.train_pattern", "data.path")
    assert check_relative("train/./x/*", "data.train_pattern", "data.path") == "train/x/*"


def test_a_data_spec_refuses_patterns_that_leave_data_path() -> None:
    # Whoever builds the spec (the config, a component unpacking it), the globs are read under data.path.
    with pytest.raises(PathRuleError, match=r"data\.train_pattern"):
        DataSpec("data/digits", split="folders", train_pattern="../../../../etc/*", eval_pattern="eval/*")
    with pytest.raises(PathRuleError, match=r"data\.file_pattern"):
        DataSpec("data/digits", split="hash", file_pattern="../*.tfrecord")


# (path, folder): on it, then not on it.
ON_FOLDER = [("/data", "/data"), ("/data/digits", "/data/"), ("//data/x", "/data"), ("/data/./x", "/data/.")]
OFF_FOLDER = [("/data/../etc", "/data"), ("/data/x/../../etc/passwd", "/data"), ("/database", "/data"),
              ("data/x", "/data")]  # fmt: skip


@pytest.mark.parametrize(("path", "folder", "under"), [(*pair, True) for pair in ON_FOLDER] + [
    (*pair, False) for pair in OFF_FOLDER
])  # fmt: skip
def test_membership_is_by_the_resolved_path(path: str, folder: str, under: bool) -> None:
    assert is_under(path, folder) is under


def test_normalized_resolves_dots_and_slashes() -> None:
    assert normalized("/data/../etc") == "/etc"
    assert normalized("//data//x/") == "/data/x"
    assert normalized("a/./b/") == "a/b"


def test_an_output_may_not_be_an_input(tmp_path: Path) -> None:
    config = tmp_path / "my.yaml"
    config.write_text("pipeline: {}\n")
    (tmp_path / "link.yaml").symlink_to(config)
    os.link(config, tmp_path / "hard.yaml")
    (tmp_path / "sub").mkdir()
    for output in (config, tmp_path / "sub" / ".." / "my.yaml", tmp_path / "link.yaml", tmp_path / "hard.yaml"):
        with pytest.raises(PathRuleError, match=r"--out .* is the file --config .* overwrite the input"):
            check_not_input(output, {"--config": config}, "--out")
    assert check_not_input(tmp_path / "out.yaml", {"--config": config, "--other": None}, "--out") == (
        tmp_path / "out.yaml"
    )


def test_an_output_may_not_go_into_an_input_folder(tmp_path: Path) -> None:
    model = tmp_path / "saved_model"
    model.mkdir()
    with pytest.raises(PathRuleError, match=r"--out .* lies in the folder SAVED_MODEL .*outside"):
        check_not_input(model / "saved_model.pb", {"SAVED_MODEL": model}, "--out")
    check_not_input(tmp_path / "model.tflite", {"SAVED_MODEL": model}, "--out")


def test_tfxp_removes_only_folders_it_made(tmp_path: Path) -> None:
    mine = claim_dir(tmp_path / "pod", "the pod folder")
    (mine / "tmp").mkdir()
    assert (mine / CLAIM_MARKER).is_file()
    assert claim_dir(mine, "the pod folder") == mine  # tfxp's own, left by a run that was killed: reused
    assert remove_claimed(mine) and not mine.exists()

    users = tmp_path / "kept"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    with pytest.raises(PathRuleError, match=r"the pod folder .*kept holds files tfxp did not write"):
        claim_dir(users, "the pod folder")
    assert not remove_claimed(users)
    assert (users / "notes.txt").read_text() == "mine"
    assert claim_dir(tmp_path / "empty", "x").is_dir()  # an empty folder holds nothing to lose


def test_a_file_or_link_is_never_claimed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / CLAIM_MARKER).touch()
    (tmp_path / "pod").symlink_to(target)
    with pytest.raises(PathRuleError, match="a file or a link"):
        claim_dir(tmp_path / "pod", "the pod folder")
    assert not remove_claimed(tmp_path / "pod")
    assert target.is_dir()


def test_tfxp_removes_only_files_that_begin_with_its_header(tmp_path: Path) -> None:
    header = "# tfxp deploy-assets: what a reviewer should know\n"
    mine, users, elsewhere = tmp_path / "warnings.txt", tmp_path / "notes.txt", tmp_path / "elsewhere.txt"
    mine.write_text(header + "warning: x\n")
    users.write_text("my own notes\n")
    elsewhere.write_text(header)
    (tmp_path / "link.txt").symlink_to(elsewhere)

    assert remove_made_file(mine, header) and not mine.exists()
    assert not remove_made_file(users, header) and users.read_text() == "my own notes\n"
    assert not remove_made_file(tmp_path / "link.txt", header) and elsewhere.is_file()
    assert not remove_made_file(tmp_path / "missing.txt", header)
    assert not remove_made_file(tmp_path, header)  # a folder


def test_tfxp_replaces_only_the_files_it_wrote_and_lists(tmp_path: Path) -> None:
    planned = {"models.config": "model v1\n", "kubernetes/deployment.yaml": "kind: Deployment\n"}
    (tmp_path / "kubernetes").mkdir()
    (tmp_path / "models.config").write_text("my notes\n")
    (tmp_path / "kubernetes" / "deployment.yaml").write_text("mine\n")
    with pytest.raises(PathRuleError, match=r"holds files tfxp did not write .*: models.config, kubernetes/deploy"):
        check_written_by_tfxp(tmp_path, planned, "--out")

    (tmp_path / "models.config").write_text("model v1\n")  # what tfxp would write anyway: nothing is lost
    (tmp_path / "kubernetes" / "deployment.yaml").unlink()
    check_written_by_tfxp(tmp_path, planned, "--out")
    record_written(tmp_path, planned)
    (tmp_path / "kubernetes" / "deployment.yaml").write_text(planned["kubernetes/deployment.yaml"])
    check_written_by_tfxp(tmp_path, {name: text + "changed\n" for name, text in planned.items()}, "--out")  # ours

    (tmp_path / "models.config").write_text("model v1, tuned by hand\n")  # edited since: the user's now
    with pytest.raises(PathRuleError, match=r"did not write \(or that were edited since.*: models.config; tfxp"):
        check_written_by_tfxp(tmp_path, planned, "--out")


def test_a_large_file_in_the_way_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    import tracemalloc

    with (tmp_path / "models.config").open("wb") as handle:
        handle.truncate(64 << 20)  # sparse: the user's 64 MiB file, far larger than anything tfxp writes there
    tracemalloc.start()
    try:
        with pytest.raises(PathRuleError, match=r"holds files tfxp did not write .*: models.config;"):
            check_written_by_tfxp(tmp_path, {"models.config": "model v1\n"}, "--out")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_a_rerun_removes_only_its_own_unchanged_files_it_no_longer_writes(tmp_path: Path) -> None:
    record_written(tmp_path, {"a.yaml": "a\n", "b.yaml": "b\n", "c.yaml": "c\n"})
    for name in ("a.yaml", "b.yaml", "c.yaml"):
        (tmp_path / name).write_text(name[0] + "\n")
    (tmp_path / "c.yaml").write_text("c, edited\n")

    removed = record_written(tmp_path, {"a.yaml": "a\n"})

    assert removed == [tmp_path / "b.yaml"] and not (tmp_path / "b.yaml").exists()
    assert (tmp_path / "c.yaml").read_text() == "c, edited\n"  # edited since: the user's, kept


def test_a_file_that_leads_out_of_the_folder_is_never_written_through(tmp_path: Path) -> None:
    outside, out = tmp_path / "outside", tmp_path / "out"
    outside.mkdir()
    out.mkdir()
    (out / "kubernetes").symlink_to(outside)
    (out / "models.config").symlink_to(outside / "models.config")
    planned = {"kubernetes/service.yaml": "x\n", "models.config": "y\n"}
    with pytest.raises(PathRuleError, match=r"kubernetes/service.yaml \(leads out of .*models.config \(leads out"):
        check_written_by_tfxp(out, planned, "--out")


def test_an_output_in_the_data_or_the_data_in_a_filled_folder_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "link").symlink_to(data)
    assert lies_in(str(tmp_path / "link" / "train"), str(data)) and lies_in(str(data), str(data))
    assert not lies_in(str(tmp_path / "data2"), str(data)) and not lies_in("gs://b/data", str(data))
    assert lies_in("gs://b/x/../data/train", "gs://b/data") and not lies_in("s3://b/data", "gs://b/data")

    with pytest.raises(PathRuleError, match=r"--output .*/link/train lies in data.path .*; give --output a folder"):
        check_apart_from_data({"--output": str(tmp_path / "link" / "train")}, str(data))
    filled = {"the serving base": str(tmp_path / "out" / "serving")}
    check_apart_from_data({"--output": str(tmp_path / "out")}, str(tmp_path / "out" / "data"), written=filled)
    with pytest.raises(PathRuleError, match=r"data.path .*/out/serving/1 lies in the serving base .*/out/serving,"):
        check_apart_from_data({}, str(tmp_path / "out" / "serving" / "1"), written=filled)
