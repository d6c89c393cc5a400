"""Looking at a data directory before a run: what is in it, and what its first examples say about their labels.

The data-files rule (`foundation.data.layout`) asks these questions for every reader: the runners (`tfxp run`
before LocalDagRunner, `tfxp compile` before KubeflowV2DagRunner), `tfxp data inspect`, `tfxp predict --examples`
and edge; the pipeline factory itself never reads the disk. Local paths are listed with `os.scandir`; bucket paths
(`gs://...`) with `tf.io.gfile`, whose listing marks folders with a trailing `/`, so a bucket of 1,000 shards costs
one listing call, not a call per shard.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from foundation.contract import LABEL_KEY, SYNSET_KEY, TEXT_KEY, read_label_map
from foundation.data.record_frames import check_record_frames
from foundation.data.tfrecords import compression_for
from foundation.paths import is_remote


@dataclass(frozen=True)
class Listing:
    """Names directly inside a directory (no paths), hidden entries (`.name`) left out.

    Attributes:
        dirs: Sub-directory names.
        files: File names.
    """

    dirs: frozenset[str]
    files: frozenset[str]


@dataclass(frozen=True)
class LabelEvidence:
    """What one example says about its class: the label and, when present, its synset and text."""

    label: int
    synset: str = ""
    text: str = ""


def list_dir(path: str) -> Listing:
    """Lists `path` (a local directory or a bucket path).

    Raises:
        OSError: `path` does not exist, is not a directory, or cannot be read (the message says which).
    """
    if not is_remote(path):
        with os.scandir(path) as entries:
            visible = [entry for entry in entries if not entry.name.startswith(".")]
            return Listing(
                dirs=frozenset(entry.name for entry in visible if entry.is_dir()),
                files=frozenset(entry.name for entry in visible if not entry.is_dir()),
            )
    import tensorflow as tf

    try:
        if not tf.io.gfile.isdir(path):
            raise FileNotFoundError(f"{path} is not a directory (or does not exist)")
        names = [name for name in tf.io.gfile.listdir(path) if not name.startswith(".")]
    except tf.errors.OpError as error:
        raise OSError(f"cannot list {path}: {error.message.splitlines()[0] if error.message else error}") from None
    return Listing(
        dirs=frozenset(name.rstrip("/") for name in names if name.endswith("/")),
        files=frozenset(name for name in names if not name.endswith("/")),
    )


def glob_files(pattern: str) -> list[str]:
    """The files (not folders) matching `pattern`, sorted, through `tf.io.gfile` as ImportExampleGen globs."""
    import tensorflow as tf

    return sorted(path for path in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(path))


def sample_label_evidence(pattern: str, count: int = 64) -> list[LabelEvidence]:
    """Label, `image/class/synset` and `image/class/text` of the first `count` examples of the files matching
    `pattern` (sorted; compression from the file name, as ImportExampleGen reads them).

    Best effort: it leaves a file at its first unreadable record and skips examples without one int64 label, so a
    data problem is reported where it was before, by the run (ImportExampleGen and its failure diagnosis), with
    the file named; no files, or none readable, give no evidence. The records it reads are held to the length
    rule first (`foundation.data.record_frames`): TensorFlow's reader would crash on a record declaring 64 GiB.

    Raises:
        DataError: one of the records it would read declares a length over the cap or past the file's end.
    """
    import tensorflow as tf

    evidence: list[LabelEvidence] = []
    for path in sorted(tf.io.gfile.glob(pattern)):
        check_record_frames(path, records=count - len(evidence))
        dataset = tf.data.TFRecordDataset(path, compression_type=compression_for(path))
        try:
            for serialized in dataset.take(count - len(evidence)).as_numpy_iterator():
                item = _evidence(tf.train.Example.FromString(serialized))
                if item is not None:
                    evidence.append(item)
        except (tf.errors.OpError, DecodeError):  # a corrupt file: the run names it; try the next one
            continue
        if len(evidence) >= count:
            break
    return evidence


def _evidence(example: object) -> LabelEvidence | None:
    features = example.features.feature  # type: ignore[attr-defined]
    labels = list(features[LABEL_KEY].int64_list.value) if LABEL_KEY in features else []
    if len(labels) != 1:
        return None

    def first_text(key: str) -> str:
        values = features[key].bytes_list.value if key in features else []
        return values[0].decode("utf-8", "replace").strip() if values else ""

    return LabelEvidence(int(labels[0]), first_text(SYNSET_KEY), first_text(TEXT_KEY))


class FileProbe:
    """Answers `foundation.data.layout`'s questions from the file system (local paths or buckets)."""

    def list_dir(self, path: str) -> Listing:
        return list_dir(path)

    def label_evidence(self, pattern: str, count: int) -> list[LabelEvidence]:
        return sample_label_evidence(pattern, count)

    def label_names(self, path: str) -> list[str]:
        return read_label_map(path)

    def glob(self, pattern: str) -> list[str]:
        return glob_files(pattern)
