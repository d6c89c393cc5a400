"""Tiny data directories in every layout `tfxp run` reads, for the tests of every reader (inspect, predict, edge).

Each `Layout` lists its files (relative path → the 0-based classes of its examples); `write_layout` writes them
(GZIP when the name ends in `.gz`, uncompressed otherwise) with `labels.txt`, and returns the counts a reader must
find per split. The images are 8×8 grayscale PNGs (`serving_fixtures.random_png`), the size of the served test
model. The cases follow `tests/pipeline/test_layout.py::test_recognised_layouts`, plus spans and custom patterns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tensorflow as tf
from serving_fixtures import random_png

from foundation.contract import IMAGE_KEY, LABEL_KEY, SYNSET_KEY, TEXT_KEY

CLASSES = ("cat", "dog", "emu")
SYNSETS = ("n02123045", "n02084071", "n01517565")


@dataclass(frozen=True)
class Layout:
    """A data directory: files → classes, how its labels are written, and the config keys a run needs for it.

    Attributes:
        files: Relative path → 0-based classes of its examples.
        splits: Split name a reader reports → the relative paths that make it up.
        offset: Added to every label (1: ImageNet's build scripts).
        synsets: The label map and the examples name classes by WordNet synset (ImageNet), else by text.
        overrides: `--set` values `tfxp run` needs for this layout (none for those `auto` recognises).
        spans: The spans a reader reads (newest last); empty for data without span folders.
    """

    files: dict[str, list[int]]
    splits: dict[str, list[str]]
    offset: int = 0
    synsets: bool = False
    overrides: tuple[str, ...] = ()
    spans: tuple[int, ...] = field(default=())

    def names(self) -> tuple[str, ...]:
        return SYNSETS if self.synsets else CLASSES

    def counts(self, prefix: str = "") -> dict[str, dict[str, int]]:
        """Split → class name → examples, over the files under `prefix` (e.g. `span-2/`)."""
        counts: dict[str, dict[str, int]] = {}
        for split, paths in self.splits.items():
            split_counts = {name: 0 for name in self.names()}
            for path in paths:
                if path.startswith(prefix):
                    for label in self.files[path]:
                        split_counts[self.names()[label]] += 1
            counts[split] = split_counts
        return counts


_TFXP = {"train/part-00000-of-00001.tfrecord.gz": [0, 1, 2, 0], "eval/part-00000-of-00001.tfrecord.gz": [1, 2]}
LAYOUTS = {
    "tfxp folders, gzip": Layout(_TFXP, {"train": [*_TFXP][:1], "eval": [*_TFXP][1:]}),
    "train and validation folders, uncompressed, 1-based": Layout(
        {"train/data.tfrecord": [0, 0, 1], "validation/data.tfrecord": [2, 1]},
        {"train": ["train/data.tfrecord"], "eval": ["validation/data.tfrecord"]},
        offset=1,
    ),
    "ImageNet flat files, uncompressed, 1-based synsets": Layout(
        {"train-00000-of-00002": [0, 1], "train-00001-of-00002": [2], "validation-00000-of-00001": [2, 0]},
        {"train": ["train-00000-of-00002", "train-00001-of-00002"], "eval": ["validation-00000-of-00001"]},
        offset=1,
        synsets=True,
    ),
    "flat train and eval files, gzip": Layout(
        {"train-00000-of-00001.tfrecord.gz": [0, 1, 2], "eval-00000-of-00001.tfrecord.gz": [0, 2]},
        {"train": ["train-00000-of-00001.tfrecord.gz"], "eval": ["eval-00000-of-00001.tfrecord.gz"]},
    ),
    "hash split, mixed compression": Layout(
        {"part-0.tfrecord.gz": [0, 1], "part-1.tfrecord": [2, 2]}, {"all": ["part-0.tfrecord.gz", "part-1.tfrecord"]}
    ),
    "hash split, custom data.file_pattern": Layout(
        {"shard-0.rec": [0, 1], "shard-1.rec": [2]},
        {"all": ["shard-0.rec", "shard-1.rec"]},
        overrides=("data.file_pattern=*.rec",),
    ),
    "custom train and eval patterns": Layout(
        {"a/x.rec": [0, 1], "b/y.rec": [2]},
        {"train": ["a/x.rec"], "eval": ["b/y.rec"]},
        overrides=("data.train_pattern=a/*.rec", "data.eval_pattern=b/*.rec"),
    ),
    "spans with a staged span": Layout(
        {
            "span-1/train/part-00000-of-00001.tfrecord.gz": [0, 1],
            "span-1/eval/part-00000-of-00001.tfrecord.gz": [2],
            "span-2/train/part-00000-of-00001.tfrecord.gz": [2, 2],
            "span-2/eval/part-00000-of-00001.tfrecord.gz": [0, 1],
            # Staged under another name: no reader (and no run) reads it.
            "span-3.tmp/train/part-00000-of-00001.tfrecord.gz": [1, 1, 1],
            "span-3.tmp/eval/part-00000-of-00001.tfrecord.gz": [1],
        },
        {
            "train": ["span-1/train/part-00000-of-00001.tfrecord.gz", "span-2/train/part-00000-of-00001.tfrecord.gz"],
            "eval": ["span-1/eval/part-00000-of-00001.tfrecord.gz", "span-2/eval/part-00000-of-00001.tfrecord.gz"],
        },
        spans=(1, 2),
    ),
}


def example_bytes(image: bytes, label: int, text: str = "", synset: str = "") -> bytes:
    """A serialized image tf.Example with the given label and, when non-empty, text and synset."""
    feature = {
        IMAGE_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
        LABEL_KEY: tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }
    for key, value in ((TEXT_KEY, text), (SYNSET_KEY, synset)):
        if value:
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(path: Path, records: list[bytes]) -> None:
    """One TFRecord file, GZIP when its name ends in `.gz`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path), options="GZIP" if path.name.endswith(".gz") else None) as writer:
        for record in records:
            writer.write(record)


def write_layout(root: Path, layout: Layout, texts: bool = True) -> Path:
    """Writes `layout` under `root` with `root/labels.txt`; `texts=False` leaves the class names out of the
    examples (so `data.label_offset: auto` cannot see the offset)."""
    seed = 0
    for relative, classes in layout.files.items():
        records = []
        for label in classes:
            text = CLASSES[label] if texts else ""
            synset = SYNSETS[label] if texts and layout.synsets else ""
            records.append(example_bytes(random_png(8, 1, seed), label + layout.offset, text, synset))
            seed += 1
        write_records(root / relative, records)
    lines = [f"{synset} {name}" for synset, name in zip(SYNSETS, CLASSES, strict=True)] if layout.synsets else CLASSES
    (root / "labels.txt").write_text("".join(f"{line}\n" for line in lines))
    return root
