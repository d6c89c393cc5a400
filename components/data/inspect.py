"""Counting what a data directory holds, per split and label (and per span, for a directory of spans).

The files come from the data-files rule `tfxp run` reads by (`foundation.data.layout`): every layout it reads
(`tfxp data`'s folders, ImageNet's flat `train-*`/`validation-*` files, TFRecords split by hash buckets, span
folders), compressed or not, and the label offset it detects (`data.label_offset: auto`) or is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from components.data.dataset import DatasetSummary
from foundation.contract import LABELS_FILE, read_label_map
from foundation.data.errors import DataError
from foundation.data.layout import DataSpec, SplitFiles, read_directory
from foundation.data.probe import FileProbe
from foundation.data.tfrecords import read_label_ids

MISSING_HINT = (
    f"a data set directory needs a {LABELS_FILE} with one class name a line (line i = label i-1); write data "
    "with `tfxp data digits` or `tfxp data from-folder`"
)


@dataclass(frozen=True)
class Inspection:
    """What `inspect_data` found.

    Attributes:
        data: The files read (layout, spans, label offset: `data.spec`).
        total: Counts over every file (every span).
        spans: Span number → its counts; empty for data without span folders.
    """

    data: SplitFiles
    total: DatasetSummary
    spans: dict[int, DatasetSummary]


def inspect_data(directory: Path, spec: DataSpec | None = None) -> Inspection:
    """Counts the examples of every split by label, reading only the label feature.

    Args:
        directory: A data directory in any layout `tfxp run` reads, or a directory of span folders (all read).
        spec: How to read it (the config's data section, `path` being `directory`); default: everything detected
            as `tfxp run` detects it (`data.split: auto`, `data.label_offset: auto`, `DIR/labels.txt`).

    Returns:
        Label names from the label map, counts per split (and span) and label name, files per split. Labels
        outside the label map are counted under `label <n>?` so they stand out.

    Raises:
        DataError: the directory is missing, its layout is not recognised, a split has no files, or a file is
            unreadable.
        LabelMapError: labels.txt is missing or breaks the label-map rule (`foundation.contract`).

    Example:
        inspect_data(Path("data/imagenet")).total.counts["eval"]["n01440764"]
    """
    if not directory.is_dir():
        raise DataError(f"data set directory {directory} does not exist; create one with `tfxp data digits --out DIR`")
    spec = spec or DataSpec(str(directory))
    names = tuple(read_label_map(spec.labels_path, missing_hint=MISSING_HINT))
    data = read_directory(spec, FileProbe())
    offset = data.spec.first_label
    if data.spans:
        spans = {
            span: _count(directory / data.spans[span], names, files, offset) for span, files in data.by_span.items()
        }
        return Inspection(data, _merge(directory, names, list(spans.values())), spans)
    return Inspection(data, _count(directory, names, data.files, offset), {})


def inspect_dataset(directory: Path, spec: DataSpec | None = None) -> DatasetSummary:
    """The counts over every file of `directory` (`inspect_data(...).total`)."""
    return inspect_data(directory, spec).total


def _count(directory: Path, names: tuple[str, ...], files: dict[str, list[str]], offset: int) -> DatasetSummary:
    counts: dict[str, dict[str, int]] = {}
    for split, paths in files.items():
        split_counts = {name: 0 for name in names}
        for batch in read_label_ids(paths):
            for label in batch:
                index = label - offset
                name = names[index] if 0 <= index < len(names) else f"label {label}?"
                split_counts[name] = split_counts.get(name, 0) + 1
        counts[split] = split_counts
    return DatasetSummary(directory, names, counts, {split: len(paths) for split, paths in files.items()})


def _merge(directory: Path, names: tuple[str, ...], summaries: list[DatasetSummary]) -> DatasetSummary:
    counts: dict[str, dict[str, int]] = {}
    shards: dict[str, int] = {}
    for summary in summaries:
        for split, by_name in summary.counts.items():
            total = counts.setdefault(split, {})
            for name, count in by_name.items():
                total[name] = total.get(name, 0) + count
        for split, count in summary.shards.items():
            shards[split] = shards.get(split, 0) + count
    return DatasetSummary(directory, names, counts, shards)
