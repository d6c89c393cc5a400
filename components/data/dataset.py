"""Writing a whole data set: deterministic split, staged output, labels and a manifest.

`write_dataset` is what `digits` and `from_folder` share. Output is written into a temporary
directory beside `out` and moved into place only when complete, so a failure leaves nothing
half-written. With `overwrite`, only what an earlier `tfxp data` wrote is replaced (it is
recognised by its manifest); any other file in `out` is left alone.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from foundation.contract import IMAGE_KEY, LABEL_KEY, LABELS_FILE, TEXT_KEY, write_label_map
from foundation.data.errors import DataError
from foundation.data.tfrecords import SHARD_PATTERN, SPLITS, make_example, write_shards

MANIFEST_FILE = "tfxp_dataset.json"
# What `tfxp data` writes into `out`; with --overwrite exactly these are replaced.
OWNED_ENTRIES = (*SPLITS, LABELS_FILE, MANIFEST_FILE)
# TFRecord shards of about this size when the caller gives no shard count (TF's guidance: 100-200 MB).
TARGET_SHARD_BYTES = 128 * 2**20


@dataclass(frozen=True)
class Record:
    """One example to write: a label and either encoded bytes or the file that holds them."""

    label: int
    encoded: bytes | None = None
    path: Path | None = None

    def __post_init__(self) -> None:
        if (self.encoded is None) == (self.path is None):
            raise ValueError("a Record needs exactly one of `encoded` and `path`")

    def read(self) -> bytes:
        if self.encoded is not None:
            return self.encoded
        assert self.path is not None  # for mypy: __post_init__ guarantees one of the two
        return self.path.read_bytes()

    def size(self) -> int:
        return len(self.encoded) if self.encoded is not None else (self.path.stat().st_size if self.path else 0)


@dataclass(frozen=True)
class DatasetSummary:
    """What a data set holds (written or inspected).

    Attributes:
        path: The data set directory.
        label_names: Class names; index = label.
        counts: split → class name → examples (labels outside the label map appear as `label <n>?`).
        shards: split → TFRecord files.
        skipped: (file, reason) of images left out by `--skip-bad`.
        reencoded: Files stored re-encoded as PNG because they were not plain JPEG/PNG.
    """

    path: Path
    label_names: tuple[str, ...]
    counts: dict[str, dict[str, int]]
    shards: dict[str, int]
    skipped: tuple[tuple[str, str], ...] = ()
    reencoded: tuple[str, ...] = field(default=())

    def row_names(self) -> list[str]:
        """Label names in label order, then any unknown labels found in the data."""
        extra = sorted({name for split in self.counts.values() for name in split} - set(self.label_names))
        return [*self.label_names, *extra]

    def split_total(self, split: str) -> int:
        return sum(self.counts.get(split, {}).values())

    def to_dict(self) -> dict[str, Any]:
        plain = asdict(self)
        plain["path"] = str(self.path)
        plain["skipped"] = [list(item) for item in self.skipped]
        plain["reencoded"] = list(self.reencoded)
        plain["label_names"] = list(self.label_names)
        return plain


def check_eval_fraction(eval_fraction: float) -> None:
    """Raises DataError unless 0 < eval_fraction < 1."""
    if not 0 < eval_fraction < 1:
        raise DataError(
            f"--eval-fraction must be between 0 and 1 (exclusive), got {eval_fraction}; e.g. 0.2 puts a fifth "
            "of each class into eval"
        )


def stratified_split(labels: Sequence[int], eval_fraction: float, seed: int) -> dict[str, list[int]]:
    """Deterministically splits example indices into train and eval, per class.

    Each class with n >= 2 examples gives round(n * eval_fraction) of them, at least 1 and at
    most n - 1, to eval; a single example goes to train. The choice and the final order depend
    only on `labels`, `eval_fraction` and `seed` (string seeds hash with SHA-512, so Python's
    hash randomisation does not change them). Each split is shuffled so classes interleave in
    the shards.

    Returns:
        {"train": [indices], "eval": [indices]}.
    """
    check_eval_fraction(eval_fraction)
    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        by_class.setdefault(label, []).append(index)
    splits: dict[str, list[int]] = {"train": [], "eval": []}
    for label, indices in sorted(by_class.items()):
        shuffled = list(indices)
        random.Random(f"tfxp-split:{seed}:{label}").shuffle(shuffled)
        n_eval = min(max(round(len(shuffled) * eval_fraction), 1), len(shuffled) - 1)
        splits["eval"].extend(shuffled[:n_eval])
        splits["train"].extend(shuffled[n_eval:])
    for split, indices in splits.items():
        indices.sort()
        random.Random(f"tfxp-order:{seed}:{split}").shuffle(indices)
    return splits


def check_corrupt_fraction(fraction: float) -> None:
    """Raises DataError unless 0 <= fraction <= 1."""
    if not 0 <= fraction <= 1:
        raise DataError(f"--corrupt-labels must be between 0 and 1, got {fraction}; e.g. 0.5 mislabels half")


def corrupt_labels(labels: Sequence[int], fraction: float, num_classes: int, seed: int) -> list[int]:
    """`labels` with a seeded `fraction` of them wrong, for demos of a data problem the pipeline must catch.

    The damage is systematic, like a labelling bug: every corrupted example of class c gets class
    (c + shift) mod `num_classes`, for one seeded shift in 1..num_classes-1, so a corrupted label is never right.

    Example:
        corrupt_labels([0, 1, 2, 0], 0.5, 3, seed=0)  # two of the four labels moved by the same shift
    """
    check_corrupt_fraction(fraction)
    rng = random.Random(f"tfxp-corrupt:{seed}")
    shift = rng.randrange(1, num_classes)
    corrupted = list(labels)
    for index in rng.sample(range(len(labels)), round(len(labels) * fraction)):
        corrupted[index] = (corrupted[index] + shift) % num_classes
    return corrupted


def auto_shards(records: Sequence[Record]) -> int:
    """Shards of about TARGET_SHARD_BYTES for these records (at least 1)."""
    return max(1, math.ceil(sum(record.size() for record in records) / TARGET_SHARD_BYTES))


def check_output(out: Path, overwrite: bool) -> None:
    """Refuses an `out` that cannot be written (before any expensive work).

    Raises:
        DataError: `out` is a file; non-empty without `overwrite`; or, with `overwrite`,
            not written by `tfxp data` or holding foreign files inside train/ or eval/.
    """
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {out} is a file, not a directory; choose a directory path")
    entries = sorted(path.name for path in out.iterdir()) if out.is_dir() else []
    if not entries:
        return
    if not overwrite:
        listing = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise DataError(
            f"--out {out} already exists and is not empty ({listing}); pass --overwrite to replace the data set "
            "tfxp wrote there, or choose a new directory"
        )
    if MANIFEST_FILE not in entries:
        raise DataError(
            f"--out {out} is not a data set written by `tfxp data` (it has no {MANIFEST_FILE}), so --overwrite "
            "will not replace anything in it; choose a new or empty directory, or move its contents away yourself"
        )
    foreign = [
        f"{split}/{path.name}"
        for split in SPLITS
        if (out / split).is_dir()
        for path in sorted((out / split).iterdir())
        if not SHARD_PATTERN.match(path.name)
    ]
    if foreign:
        raise DataError(
            f"--overwrite would replace {out}/train and {out}/eval, but they hold files tfxp did not write "
            f"({', '.join(foreign[:5])}); move those files out of {out} first"
        )


@contextmanager
def staged_output(out: Path, overwrite: bool) -> Iterator[Path]:
    """Yields an empty staging directory beside `out`; on success moves its entries into `out`.

    On an exception the staging directory is removed and `out` is untouched.
    """
    check_output(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        _chmod_like_mkdir(stage)
        yield stage
        _publish(stage, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _chmod_like_mkdir(path: Path) -> None:
    # mkdtemp makes 0700 directories; the published data set should get the usual umask mode.
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o777 & ~umask)


def _publish(stage: Path, out: Path) -> None:
    if not out.exists():
        stage.rename(out)
        return
    # `out` holds an older data set (checked by check_output): swap entry by entry, keeping the
    # old entries aside until every new one is in place, so a failure can be rolled back.
    trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    moved_old: list[str] = []
    moved_new: list[str] = []
    try:
        for name in OWNED_ENTRIES:
            if (out / name).exists():
                (out / name).rename(trash / name)
                moved_old.append(name)
        for entry in sorted(stage.iterdir()):
            entry.rename(out / entry.name)
            moved_new.append(entry.name)
    except OSError:
        for name in moved_new:
            (out / name).rename(stage / name)
        for name in moved_old:
            (trash / name).rename(out / name)
        with contextlib.suppress(OSError):  # not empty = the rollback failed: keep the old data for the user
            trash.rmdir()
        raise
    shutil.rmtree(trash, ignore_errors=True)


def write_dataset(
    out: Path,
    records: Sequence[Record],
    label_names: Sequence[str],
    *,
    eval_fraction: float,
    shards: int | None,
    overwrite: bool,
    seed: int,
    workers: int = 1,
    provenance: Mapping[str, Any] | None = None,
    skipped: Sequence[tuple[str, str]] = (),
    reencoded: Sequence[str] = (),
    write_labels: bool = True,
    corrupt_train_labels: float = 0.0,
) -> DatasetSummary:
    """Splits `records` per class and writes DIR/train, DIR/eval, labels.txt and a manifest.

    Args:
        out: Output directory (see the module docstring for the overwrite rules).
        records: Examples in a deterministic order (e.g. sorted by path within each class).
        label_names: Class names; label i = label_names[i].
        eval_fraction: Share of each class that goes to eval, 0 < f < 1.
        shards: TFRecord files per split; None = about 128 MiB each.
        overwrite: Replace a data set `tfxp data` wrote in `out` earlier.
        seed: Split and order seed.
        workers: Shards written concurrently.
        provenance: Extra facts for the manifest (source, generator).
        skipped: (file, reason) of inputs left out, for the summary and manifest.
        reencoded: Files stored re-encoded, for the summary and manifest.
        write_labels: Write labels.txt into `out`; False for a span folder, whose label map is beside it
            (`components.data.span_writer`).
        corrupt_train_labels: Share of the train examples given a wrong label (`corrupt_labels`); eval
            labels stay right, so an evaluation shows the damage.

    Returns:
        The summary of what was written.

    Raises:
        DataError: bad `out` or `eval_fraction`, fewer than two classes, or an empty split.
    """
    _check_arguments(eval_fraction, corrupt_train_labels, shards, label_names)
    names = tuple(label_names)
    split_indices = _split_indices(records, eval_fraction, seed)
    if corrupt_train_labels:
        records = _corrupt_train(records, split_indices["train"], corrupt_train_labels, len(names), seed)
        provenance = {**(provenance or {}), "corrupt_train_labels": corrupt_train_labels}
    with staged_output(out, overwrite) as stage:
        counts, shard_counts = _write_splits(stage, records, split_indices, names, shards, workers)
        if write_labels:
            write_label_map(stage / LABELS_FILE, names)
        summary = DatasetSummary(out, names, counts, shard_counts, tuple(skipped), tuple(reencoded))
        _write_manifest(stage, summary, provenance, eval_fraction, seed)
    return summary


def _check_arguments(
    eval_fraction: float, corrupt_train_labels: float, shards: int | None, label_names: Sequence[str]
) -> None:
    """Raises DataError for a `write_dataset` argument out of range, or fewer than two classes."""
    check_eval_fraction(eval_fraction)
    check_corrupt_fraction(corrupt_train_labels)
    if shards is not None and shards < 1:
        raise DataError(f"--shards must be at least 1, got {shards}")
    if len(label_names) < 2:
        raise DataError(f"a classifier needs at least two classes, got {len(label_names)} ({', '.join(label_names)})")


def _split_indices(records: Sequence[Record], eval_fraction: float, seed: int) -> dict[str, list[int]]:
    """`stratified_split` of the records; raises DataError when the eval split would be empty."""
    split_indices = stratified_split([record.label for record in records], eval_fraction, seed)
    if not split_indices["eval"]:
        raise DataError(
            f"the eval split would be empty: every class has a single example ({len(records)} examples in all); "
            "add images so each class has at least two"
        )
    return split_indices


def _corrupt_train(
    records: Sequence[Record], train: Sequence[int], fraction: float, classes: int, seed: int
) -> list[Record]:
    """The records with `fraction` of the train examples (`train`, their indices) given a wrong label."""
    wrong = corrupt_labels([records[index].label for index in train], fraction, classes, seed)
    corrupted = list(records)
    for index, label in zip(train, wrong, strict=True):
        corrupted[index] = replace(corrupted[index], label=label)
    return corrupted


def _write_splits(
    stage: Path,
    records: Sequence[Record],
    split_indices: Mapping[str, Sequence[int]],
    names: tuple[str, ...],
    shards: int | None,
    workers: int,
) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Writes each split's shards into `stage`: (split → class → examples, split → shards written)."""

    def serialize(record: Record) -> bytes:
        # Proto maps serialize in hash order unless asked not to; same input must give the same bytes.
        return make_example(record.read(), record.label, names[record.label]).SerializeToString(deterministic=True)

    counts: dict[str, dict[str, int]] = {}
    shard_counts: dict[str, int] = {}
    for split, indices in split_indices.items():
        split_records = [records[index] for index in indices]
        wanted = shards if shards is not None else auto_shards(split_records)
        shard_counts[split] = len(write_shards(stage / split, split_records, wanted, serialize, workers))
        counts[split] = {name: 0 for name in names}
        for record in split_records:
            counts[split][names[record.label]] += 1
    return counts, shard_counts


def _write_manifest(
    stage: Path, summary: DatasetSummary, provenance: Mapping[str, Any] | None, eval_fraction: float, seed: int
) -> None:
    """Writes the manifest (`MANIFEST_FILE`) that marks `stage` as a data set `tfxp data` wrote."""
    manifest = {
        "format": f"tfxp image tf.Examples: {IMAGE_KEY}, {LABEL_KEY}, {TEXT_KEY}",
        **(provenance or {}),
        "eval_fraction": eval_fraction,
        "seed": seed,
        **summary.to_dict(),
    }
    manifest.pop("path")
    (stage / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
