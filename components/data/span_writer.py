"""Writing spans: `DIR/span-N/` (train/, eval/, a manifest) beside one label map, `DIR/labels.txt`.

    DIR/labels.txt    DIR/span-1/train/part-...    DIR/span-1/eval/...    DIR/span-2/...

Every span of a data set shares the label map (a model trained on spans 3-5 has one set of classes), so it lives
beside the span folders, where `data.labels` finds it by default, and a span whose classes differ is refused.
Each span is written like a whole data set (`write_dataset`: staged beside DIR as a hidden folder, renamed into
place when complete), so a run never reads half a span.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from components.data.dataset import MANIFEST_FILE, check_output
from foundation.bounded import parse_json, read_document
from foundation.contract import LABELS_FILE, read_label_map, write_label_map
from foundation.data.errors import DataError
from foundation.data.spans import find_spans, span_dir_name
from foundation.data.tfrecords import SPLITS


def check_span_root(root: Path) -> None:
    """Refuses a `root` that is a file or holds a data set without spans (train/, eval/, a manifest).

    Raises:
        DataError: names what is in the way.
    """
    if root.exists() and not root.is_dir():
        raise DataError(f"--out {root} is a file, not a directory; choose a directory path")
    unspanned = [name for name in (*SPLITS, MANIFEST_FILE) if (root / name).exists()]
    if unspanned:
        raise DataError(
            f"--out {root} holds a data set without spans ({', '.join(unspanned)}); spans go into a directory of "
            "span-N folders and labels.txt only: choose a new directory"
        )


def check_span_labels(root: Path, names: Sequence[str]) -> None:
    """Refuses a span whose classes differ from `root/labels.txt` (when it exists).

    Raises:
        DataError: both class lists, shortened.
    """
    path = root / LABELS_FILE
    if not path.exists():
        return
    existing = read_label_map(path)
    if existing != list(names):

        def shown(classes: Sequence[str]) -> str:
            return f"{len(classes)} classes: {', '.join(classes[:5])}{', ...' if len(classes) > 5 else ''}"

        raise DataError(
            f"{path} has {shown(existing)}, but this span has {shown(names)}; every span of a data set shares "
            "one label map, so write this span into another directory"
        )


def prepare_span(root: Path, span: int, names: Sequence[str], overwrite: bool) -> Path:
    """Checks that span `span` can be written under `root` with these classes, writes `root/labels.txt` when
    missing, and returns the span folder to write (`root/span-N`).

    Raises:
        DataError: a bad root, a span folder that exists (without `overwrite`, or not written by `tfxp data`),
            or classes that differ from the root's label map.
    """
    check_span_root(root)
    target = root / span_dir_name(span)
    check_output(target, overwrite)
    check_span_labels(root, names)
    if not (root / LABELS_FILE).exists():
        root.mkdir(parents=True, exist_ok=True)
        write_label_map(root / LABELS_FILE, names)
    return target


CUT_KEYS = ("spans", "seed", "eval_fraction")  # manifest keys that decide which examples a span and its eval hold


def _describe_cut(cut: Mapping[str, Any]) -> str:
    parts = cut.get("spans")
    return f"{parts} part{'' if parts == 1 else 's'} (seed {cut.get('seed')}, eval fraction {cut.get('eval_fraction')})"


def check_span_cut(root: Path, writing: Collection[int], source: str, cut: Mapping[str, Any]) -> None:
    """Refuses to write spans `writing` cut from `source` as `cut` (`CUT_KEYS`) beside spans of the same source
    whose manifests record another cut: the parts would overlap, so one span's eval images would be another's
    train images. Spans of other sources (another image folder) share no images and are not compared; the spans
    being written (replaced with `--overwrite`) are not compared either.

    Raises:
        DataError: names the existing spans, their cut, the cut asked for, and how to match it.

    Example:
        check_span_cut(Path("data/stream"), [1], SOURCE, {"spans": 3, "seed": 0, "eval_fraction": 0.2})
    """
    wanted = {key: cut[key] for key in CUT_KEYS}
    for span in existing_spans(root):
        manifest_path = root / span_dir_name(span) / MANIFEST_FILE
        if span in writing or not manifest_path.is_file():
            continue
        try:
            manifest = parse_json(read_document(manifest_path, str(manifest_path)))
        except (OSError, ValueError):
            continue  # not a manifest `tfxp data` wrote; check_output refuses such a folder when it is written
        if not isinstance(manifest, dict) or manifest.get("source") != source:
            continue
        existing = {key: manifest.get(key) for key in CUT_KEYS}
        if existing != wanted:
            written = ", ".join(span_dir_name(number) for number in sorted(writing))
            raise DataError(
                f"{root} holds {span_dir_name(span)} cut as {_describe_cut(existing)}; {written} would be cut as "
                f"{_describe_cut(wanted)}, so train splits would hold other spans' eval images: pass "
                f"--spans {existing['spans']} --eval-fraction {existing['eval_fraction']} (the same cut) or write "
                "into another directory"
            )


def existing_spans(root: Path) -> list[int]:
    """The span numbers under `root` (none when it does not exist)."""
    return sorted(find_spans(path.name for path in root.iterdir() if path.is_dir())) if root.is_dir() else []


def cut_into_spans(labels: Sequence[int], spans: int, seed: int) -> list[list[int]]:
    """Splits example indices into `spans` disjoint parts of near-equal size and class mix, deterministically.

    Each class's examples are shuffled (seeded) and dealt round-robin; the deal continues where the previous
    class stopped, so the parts differ in size by at most one.

    Raises:
        DataError: `spans` < 1, or so many spans that a part would hold fewer than two examples of a class (its
            eval split would miss the class).

    Example:
        cut_into_spans([0, 1] * 10, 2, seed=0)  # two lists of 10 indices, 5 of each class
    """
    if spans < 1:
        raise DataError(f"--spans must be at least 1, got {spans}")
    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        by_class.setdefault(label, []).append(index)
    smallest = min((len(indices) for indices in by_class.values()), default=0)
    if smallest < 2 * spans:
        raise DataError(
            f"--spans {spans} is too many: the smallest class has {smallest} examples, and each span needs at least "
            f"two of every class; use at most {max(1, smallest // 2)} spans"
        )
    parts: list[list[int]] = [[] for _ in range(spans)]
    dealt = 0
    for label, indices in sorted(by_class.items()):
        shuffled = list(indices)
        random.Random(f"tfxp-spans:{seed}:{label}").shuffle(shuffled)
        for index in shuffled:
            parts[dealt % spans].append(index)
            dealt += 1
    return [sorted(part) for part in parts]
