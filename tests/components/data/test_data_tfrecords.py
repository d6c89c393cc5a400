"""The TFRecord format helpers: examples, shards, the deterministic split (the label map: test_contract.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from components.data.dataset import Record, stratified_split
from foundation.contract import IMAGE_KEY, LABEL_KEY, TEXT_KEY
from foundation.data.errors import DataError
from foundation.data.tfrecords import iter_examples, make_example, read_label_ids, shard_bounds, write_shards


def test_make_example_holds_the_contract_features() -> None:
    example = make_example(b"\x89PNG...", 3, "cat")
    features = example.features.feature
    assert features[IMAGE_KEY].bytes_list.value == [b"\x89PNG..."]
    assert features[LABEL_KEY].int64_list.value == [3]
    assert features[TEXT_KEY].bytes_list.value == [b"cat"]
    assert TEXT_KEY not in make_example(b"x", 0).features.feature


def test_write_shards_names_files_and_keeps_record_order(tmp_path: Path) -> None:
    records = list(range(7))
    paths = write_shards(tmp_path / "train", records, 3, lambda n: make_example(b"x", n).SerializeToString(), workers=2)
    assert [path.name for path in paths] == [f"part-0000{i}-of-00003.tfrecord.gz" for i in range(3)]
    labels = [example.features.feature[LABEL_KEY].int64_list.value[0] for example in iter_examples(paths)]
    assert labels == records
    assert sorted(label for batch in read_label_ids(paths, batch_size=2) for label in batch) == records


def test_write_shards_never_writes_empty_files(tmp_path: Path) -> None:
    paths = write_shards(tmp_path, [0, 1], 5, lambda n: make_example(b"x", n).SerializeToString())
    assert [path.name for path in paths] == ["part-00000-of-00002.tfrecord.gz", "part-00001-of-00002.tfrecord.gz"]


def test_shard_bounds_cover_every_record_once() -> None:
    bounds = shard_bounds(10, 3)
    assert bounds == [(0, 3), (3, 6), (6, 10)]


def test_read_label_ids_rejects_files_that_are_not_gzip_tfrecords(tmp_path: Path) -> None:
    bogus = tmp_path / "part-00000-of-00001.tfrecord.gz"
    bogus.write_bytes(b"definitely not gzip")
    with pytest.raises(DataError, match=r"cannot read labels from .*part-00000-of-00001.tfrecord.gz.*GZIP TFRecords"):
        list(read_label_ids([bogus]))


def test_stratified_split_is_deterministic_disjoint_and_per_class() -> None:
    labels = [0] * 50 + [1] * 11 + [2] * 2 + [3]
    splits = stratified_split(labels, 0.2, seed=0)
    assert splits == stratified_split(labels, 0.2, seed=0)
    assert splits != stratified_split(labels, 0.2, seed=1)
    assert sorted(splits["train"] + splits["eval"]) == list(range(len(labels)))
    eval_counts = Counter(labels[index] for index in splits["eval"])
    # round(n * 0.2), at least one and at most n - 1 per class; a single example stays in train.
    assert eval_counts == {0: 10, 1: 2, 2: 1}
    # Classes interleave in the written order instead of coming in blocks.
    assert {labels[index] for index in splits["train"][:20]} != {0}


def test_record_needs_exactly_one_source(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one of `encoded` and `path`"):
        Record(0)
    (tmp_path / "a.png").write_bytes(b"abc")
    assert Record(0, path=tmp_path / "a.png").read() == b"abc"
    assert Record(0, encoded=b"xy").size() == 2
