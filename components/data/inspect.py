"""Counting what a data set directory holds, per split and label (and per span, for a directory of spans)."""

from __future__ import annotations

from pathlib import Path

from components.contract import LABELS_FILE, read_label_map
from components.data.dataset import DatasetSummary
from components.data.errors import DataError
from components.data.spans import find_spans
from components.data.tfrecords import find_splits, read_label_ids, split_files

MISSING_HINT = (
    f"a data set directory needs a {LABELS_FILE} with one class name a line (line i = label i-1); write data "
    "with `tfxp data digits` or `tfxp data from-folder`"
)


def inspect_dataset(directory: Path) -> DatasetSummary:
    """Counts the examples of every split by label, reading only the label feature.

    Args:
        directory: A data set as `tfxp data` writes it (DIR/<split>/part-*.tfrecord.gz, DIR/labels.txt).

    Returns:
        Label names from labels.txt, counts per split and label name, shards per split. Labels
        outside the label map are counted under `label <n>?` so they stand out.

    Raises:
        DataError: the directory or any split is missing, or a shard is unreadable.
        LabelMapError: labels.txt is missing or breaks the label-map rule (`components.contract`).

    Example:
        inspect_dataset(Path("data/digits")).counts["eval"]["7"]
    """
    if not directory.is_dir():
        raise DataError(f"data set directory {directory} does not exist; create one with `tfxp data digits --out DIR`")
    names = tuple(read_label_map(directory / LABELS_FILE, missing_hint=MISSING_HINT))
    return _count(directory, names)


def inspect_spans(directory: Path) -> dict[int, DatasetSummary]:
    """Counts every span of a directory of spans (`DIR/span-N/`, `DIR/labels.txt`); {} when it has no spans.

    Raises:
        DataError: a span without split folders, or an unreadable shard.
        LabelMapError: `DIR/labels.txt` is missing or breaks the label-map rule.

    Example:
        inspect_spans(Path("data/stream"))[2].split_total("train")
    """
    if not directory.is_dir():
        raise DataError(f"data set directory {directory} does not exist; create one with `tfxp data digits --out DIR`")
    spans = find_spans(path.name for path in directory.iterdir() if path.is_dir())
    if not spans:
        return {}
    names = tuple(read_label_map(directory / LABELS_FILE, missing_hint=MISSING_HINT))
    return {span: _count(directory / folder, names) for span, folder in sorted(spans.items())}


def _count(directory: Path, names: tuple[str, ...]) -> DatasetSummary:
    splits = find_splits(directory)
    if not splits:
        raise DataError(
            f"{directory} has no split folders with TFRecords (expected {directory}/train/part-00000-of-NNNNN"
            ".tfrecord.gz and eval/...); write data with `tfxp data digits` or `tfxp data from-folder`"
        )
    counts: dict[str, dict[str, int]] = {}
    shards: dict[str, int] = {}
    for split in splits:
        files = split_files(directory, split)
        shards[split] = len(files)
        split_counts = {name: 0 for name in names}
        for batch in read_label_ids(files):
            for label in batch:
                name = names[label] if 0 <= label < len(names) else f"label {label}?"
                split_counts[name] = split_counts.get(name, 0) + 1
        counts[split] = split_counts
    return DatasetSummary(directory, names, counts, shards)
