"""The data-files rule (foundation.data.layout, through pipeline.layout): remote paths, the layouts `data.split:
auto` recognises, span folders against `data.spans`, the label offset from the data, and the one rule from the
data section to the files ImportExampleGen reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundation.data.class_match import infer_label_offset
from foundation.data.errors import DataError
from foundation.data.folder_layout import detect_layout
from foundation.data.layout import DataSpec
from foundation.data.probe import LabelEvidence, Listing
from foundation.paths import is_remote
from pipeline.component_settings import example_gen_input_config, example_gen_output_config
from pipeline.config import TfxpConfig, build_config
from pipeline.config_sections import DataSection
from pipeline.layout import resolve_data, split_patterns
from pipeline.runners.diagnose import input_patterns


def _config(*overrides: str) -> TfxpConfig:
    return build_config({}, ["pipeline.output=/nonexistent/out", "data.path=/data", *overrides])


def _listing(*names: str) -> Listing:
    """`name/` is a folder, anything else a file."""
    return Listing(
        dirs=frozenset(name.rstrip("/") for name in names if name.endswith("/")),
        files=frozenset(name for name in names if not name.endswith("/")),
    )


class FakeProbe:
    """A data directory in memory: path → listing, train pattern → examples."""

    def __init__(self, tree: dict[str, Listing], evidence: dict[str, list[LabelEvidence]] | None = None) -> None:
        self.tree = tree
        self.evidence = evidence or {}
        self.listed: list[str] = []

    def list_dir(self, path: str) -> Listing:
        self.listed.append(path)
        if path not in self.tree:
            raise FileNotFoundError(f"no such directory: {path}")
        return self.tree[path]

    def label_evidence(self, pattern: str, count: int) -> list[LabelEvidence]:
        return self.evidence.get(pattern, [])[:count]

    def label_names(self, path: str) -> list[str]:
        return ["n01440764", "n01443537", "n01484850"]


@pytest.mark.parametrize(
    ("path", "remote"),
    [("gs://bucket/data", True), ("s3://bucket", True), ("data/digits", False), ("/abs/path", False), ("", False)],
)
def test_is_remote(path: str, remote: bool) -> None:
    assert is_remote(path) is remote


@pytest.mark.parametrize(
    ("names", "split", "train", "evaluation"),
    [
        (("train/", "eval/", "labels.txt", "tfxp_dataset.json"), "folders", "train/*", "eval/*"),
        (("train/", "validation/", "synsets.txt"), "folders", "train/*", "validation/*"),
        (("train-00000-of-01024", "train-00001-of-01024", "validation-00000-of-00128"), "folders", "train-*",
         "validation-*"),
        (("train-00000-of-00002.gz", "validation-00000-of-00001.gz"), "folders", "train-*", "validation-*"),
        (("train-00000-of-00002.tfrecord.gz", "eval-00000-of-00001.tfrecord.gz"), "folders", "train-*", "eval-*"),
        (("part-0.tfrecord.gz", "part-1.tfrecord", "labels.txt", "README.md", "logs/"), "hash", "", ""),
    ],
)  # fmt: skip
def test_recognised_layouts(names: tuple[str, ...], split: str, train: str, evaluation: str) -> None:
    layout = detect_layout(_listing(*names), "*.tfrecord*", "/data")
    assert (layout.split, layout.train_pattern, layout.eval_pattern) == (split, train, evaluation)


@pytest.mark.parametrize(
    ("names", "found", "problem"),
    [
        (("train/",), "train/ (folder)", "folders for train but none for eval or validation"),
        (("validation/",), "validation/ (folder)", "folders for validation but none for train"),
        (("train/", "eval/", "validation/"), "eval/ (folder), train/ (folder), validation/ (folder)",
         "both eval and validation"),
        (("train/", "eval/", "train-00000-of-00001", "validation-00000-of-00001"),
         "train-* files (1, e.g. train-00000-of-00001)", "more than one layout at once"),
        (("train-00000-of-00001", "part-0.tfrecord.gz"),
         "files matching data.file_pattern *.tfrecord* (1, e.g. part-0.tfrecord.gz)",
         "more than one layout at once"),
        (("labels.txt", "notes/"), "found nothing", "no TFRecords that tfxp recognises"),
    ],
)  # fmt: skip
def test_ambiguous_or_mixed_folders_list_what_was_found_and_the_keys(
    names: tuple[str, ...], found: str, problem: str
) -> None:
    with pytest.raises(DataError) as error:
        detect_layout(_listing(*names), "*.tfrecord*", "/data")
    message = str(error.value)
    assert message.startswith("cannot tell how the data in /data is split: found")
    assert found in message and problem in message
    assert "data.train_pattern and data.eval_pattern" in message and "data.split=hash" in message


def test_auto_resolves_to_the_detected_patterns() -> None:
    probe = FakeProbe({"/data": _listing("train-00000-of-00001", "validation-00000-of-00001")})
    data = resolve_data(_config("data.label_offset=1"), probe).data
    assert (data.split, data.train_pattern, data.eval_pattern, data.label_offset) == (
        "folders", "train-*", "validation-*", 1
    )  # fmt: skip


def test_explicit_patterns_need_no_detection() -> None:
    probe = FakeProbe({"/data": _listing("weird/")})
    config = _config("data.train_pattern=a/*.rec", "data.eval_pattern=b/*.rec", "data.label_offset=0")
    data = resolve_data(config, probe).data
    assert (data.split, data.train_pattern, data.eval_pattern) == ("folders", "a/*.rec", "b/*.rec")
    assert split_patterns(resolve_data(config, probe)) == {"train": "a/*.rec", "eval": "b/*.rec"}


def test_auto_without_a_readable_data_path_names_the_keys_to_set() -> None:
    with pytest.raises(DataError, match=r"data.split is auto, but data.path /data cannot be read from here"):
        resolve_data(_config("data.label_offset=0"), None)
    with pytest.raises(DataError, match=r"data.label_offset is auto, .*set it explicitly: data.label_offset=0"):
        resolve_data(_config("data.split=folders"), FakeProbe({}))
    # Explicit values need no look at the data, and a bucket is not listed for them.
    probe = FakeProbe({})
    config = _config("data.path=gs://bucket/imagenet", "data.split=folders", "data.label_offset=1", "data.spans=all")
    assert resolve_data(config, probe).data.train_pattern == "train/*"
    assert probe.listed == []


def test_span_folders_must_fit_data_spans() -> None:
    spanned = FakeProbe({"/data": _listing("span-1/", "span-2/", "labels.txt")})
    with pytest.raises(DataError, match=r"holds span folders \(span-1, span-2\) but data.spans is none"):
        resolve_data(_config("data.label_offset=0"), spanned)
    flat = FakeProbe({"/data": _listing("train/", "eval/")})
    with pytest.raises(DataError, match=r"data.spans is latest but data.path /data has no span folders"):
        resolve_data(_config("data.label_offset=0", "data.spans=latest"), flat)


def test_every_span_is_detected_and_must_hold_the_same_layout() -> None:
    tree = {
        "/data": _listing("span-1/", "span-2/", "span-x/", "labels.txt"),
        "/data/span-1": _listing("train/", "validation/"),
        "/data/span-2": _listing("train/", "validation/"),
    }
    config = resolve_data(_config("data.label_offset=0", "data.spans=2"), FakeProbe(tree))
    assert split_patterns(config) == {"train": "span-*/train/*", "eval": "span-*/validation/*"}
    tree["/data/span-2"] = _listing("train-00000-of-00001", "validation-00000-of-00001")
    with pytest.raises(DataError, match=r"span-1: train/ \+ validation/ folders; span-2: train-\* \+ validation-\*"):
        resolve_data(_config("data.label_offset=0", "data.spans=all"), FakeProbe(tree))
    tree["/data/span-2"] = _listing("train/")
    with pytest.raises(DataError, match=r"in /data/span-2 is split: .*relative to each span folder"):
        resolve_data(_config("data.label_offset=0", "data.spans=all"), FakeProbe(tree))


def test_the_label_offset_comes_from_the_newest_span_s_synsets() -> None:
    tree = {
        "/data": _listing("span-1/", "span-2/"),
        "/data/span-1": _listing("train-0", "validation-0"),
        "/data/span-2": _listing("train-0", "validation-0"),
    }
    imagenet = [LabelEvidence(2, "n01443537", "goldfish, Carassius auratus"), LabelEvidence(3, "n01484850")]
    probe = FakeProbe(tree, {"/data/span-2/train-*": imagenet})
    assert resolve_data(_config("data.spans=all"), probe).data.label_offset == 1


def test_infer_label_offset() -> None:
    names = ["cat", "dog", "n01440764"]
    assert infer_label_offset([LabelEvidence(1, text="dog"), LabelEvidence(0, text="cat")], names, "x") == 0
    assert infer_label_offset([LabelEvidence(3, synset="n01440764", text="tench")], names, "x") == 1
    assert infer_label_offset([LabelEvidence(7), LabelEvidence(2, text="bird")], names, "x") is None
    with pytest.raises(DataError, match=r"do not match the label map with one offset \(label 0 is 'cat', line 1; "):
        infer_label_offset([LabelEvidence(0, text="cat"), LabelEvidence(2, text="dog")], names, "x")
    with pytest.raises(DataError, match=r"label 0 is 'dog', line 2.*set data.label_offset"):
        infer_label_offset([LabelEvidence(0, text="dog")], names, "x")


def test_the_data_section_hands_its_file_keys_to_the_layout_rule_with_the_same_defaults() -> None:
    assert DataSection().spec() == DataSpec("data/digits")  # each default the section declares is DataSpec's
    spec = _config("data.split=hash", "data.file_pattern=*.gz", "data.spans=2", "data.labels=/l.txt").data.spec()
    assert (spec.path, spec.split, spec.file_pattern, spec.spans, spec.labels) == ("/data", "hash", "*.gz", 2, "/l.txt")


def test_split_patterns() -> None:
    assert split_patterns(_config("data.split=folders")) == {"train": "train/*", "eval": "eval/*"}
    assert split_patterns(_config("data.split=hash", "data.file_pattern=*.gz")) == {"all": "*.gz"}
    assert split_patterns(_config("data.split=hash", "data.spans=all")) == {"all": "span-*/*.tfrecord*"}
    assert split_patterns(_config("data.spans=3")) == {"train": "span-*/train/*", "eval": "span-*/eval/*"}


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


def _tfxp_data(root: Path) -> None:
    """A tiny data set as `tfxp data` writes it: one example a split, labels.txt."""
    from foundation.data.tfrecords import make_example, write_shards

    for split in ("train", "eval"):
        write_shards(root / split, [1], 1, lambda label: make_example(b"png", label, "one").SerializeToString())
    (root / "labels.txt").write_text("zero\none\n")  # checked before any component runs


def test_local_paths_are_absolute_and_the_data_section_concrete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.runners.local import resolve_local_paths

    _tfxp_data(tmp_path / "digits")
    monkeypatch.chdir(tmp_path)
    config = resolve_local_paths(build_config({}, ["data.path=digits", "pipeline.output=out"]))
    assert config.data.path == str(tmp_path / "digits")
    assert config.data.labels_path == str(tmp_path / "digits" / "labels.txt")
    assert config.pipeline.output == str(tmp_path / "out")
    assert (config.data.split, config.data.train_pattern, config.data.eval_pattern) == ("folders", "train/*", "eval/*")
    assert config.data.label_offset == 0  # image/class/text "one" is line 2 of labels.txt, label 1


def test_local_runs_refuse_a_bucket_output_and_missing_data(tmp_path: Path) -> None:
    from pipeline.runners.local import resolve_local_paths

    with pytest.raises(FileNotFoundError, match=r"pipeline\.output gs://b/out is a bucket"):
        resolve_local_paths(build_config({}, [f"data.path={tmp_path}", "pipeline.output=gs://b/out"]))
    with pytest.raises(FileNotFoundError, match=r"data.path .*missing is not a directory"):
        resolve_local_paths(build_config({}, [f"data.path={tmp_path / 'missing'}", f"pipeline.output={tmp_path}"]))
    _tfxp_data(tmp_path / "set [v1]")  # readable by `tfxp data inspect`, but a pattern to ImportExampleGen
    with pytest.raises(FileNotFoundError, match=r"contains a glob character"):
        resolve_local_paths(build_config({}, [f"data.path={tmp_path / 'set [v1]'}", f"pipeline.output={tmp_path}"]))


def test_the_file_probe_lists_and_samples_leniently(tmp_path: Path) -> None:
    from foundation.data.probe import list_dir, sample_label_evidence
    from foundation.data.tfrecords import make_example, write_shards

    write_shards(tmp_path / "b", [3, 4], 1, lambda label: make_example(b"png", label, f"c{label}").SerializeToString())
    (tmp_path / "a.tfrecord.gz").write_bytes(b"\x1f\x8b garbage")  # unreadable: left for the run to name
    (tmp_path / ".hidden").mkdir()
    assert list_dir(str(tmp_path)) == Listing(dirs=frozenset({"b"}), files=frozenset({"a.tfrecord.gz"}))
    with pytest.raises(FileNotFoundError):
        list_dir(str(tmp_path / "missing"))
    evidence = sample_label_evidence(f"{tmp_path}/*.tfrecord.gz", 8) + sample_label_evidence(f"{tmp_path}/b/*", 1)
    assert evidence == [LabelEvidence(3, "", "c3")]
    assert sample_label_evidence(f"{tmp_path}/none-*", 8) == []
