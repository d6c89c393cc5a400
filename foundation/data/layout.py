"""The one rule from a data directory to the files a reader reads: layouts, span folders, split patterns and the
label offset. `tfxp run` and `tfxp compile` (through `pipeline.layout`), `tfxp data inspect`, `tfxp predict
--examples`, the edge commands and bench/ all read data through it, so each reads every layout the others read.

`data.split: auto` recognises a layout in `data.path`, or in every `span-N/` folder of it, by
`foundation.data.folder_layout.detect_layout` (train/ + eval/ or train/ + validation/ folders, train-* +
validation-* files, or files matching data.file_pattern split by hash buckets); anything else is an error that lists
what was found and the keys to set (`data.train_pattern` and `data.eval_pattern`, or `data.split`).

The rule is plain Python over a `DataProbe` (`foundation.data.probe.FileProbe` answers from local disk or a
bucket), so it is tested without files and never imports TensorFlow itself. `data.label_offset: auto` matches the
first examples to the label map by `foundation.data.class_match`.

Example:
    spec = resolve_spec(DataSpec("data/imagenet"), FileProbe())  # split folders, train-*, validation-*, offset 1
    files_to_read(spec, FileProbe()).files["eval"]  # ["data/imagenet/validation-00000-of-00128", ...]
    read_directory(DataSpec("data/stream"), FileProbe()).by_span  # every span-N/ folder, as above
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace
from typing import Protocol

from foundation.contract import LABELS_FILE
from foundation.data.class_match import infer_label_offset
from foundation.data.errors import DataError
from foundation.data.folder_layout import DataLayout, detect_layout
from foundation.data.probe import LabelEvidence, Listing
from foundation.data.spans import ALL, NO_SPANS, SPAN_GLOB, SpanError, find_spans, select_spans, span_dir_name
from foundation.path_rules import check_relative
from foundation.paths import is_remote

# tfxp's own layout (`tfxp data`), and what `data.split: folders` reads without patterns.
DEFAULT_TRAIN_PATTERN = "train/*"
DEFAULT_EVAL_PATTERN = "eval/*"
DEFAULT_FILE_PATTERN = "*.tfrecord*"
# The split a hash-split layout reads before ExampleGen cuts it into train and eval by hash buckets.
HASH_SPLIT = "all"
# Examples read to tell 0-based from 1-based labels.
LABEL_SAMPLE = 64


class DataProbe(Protocol):
    """What the rule may ask about the data (`foundation.data.probe.FileProbe` answers from the disk)."""

    def list_dir(self, path: str) -> Listing:
        """Names in `path`; raises OSError when it cannot be listed."""
        ...

    def label_evidence(self, pattern: str, count: int) -> list[LabelEvidence]:
        """Label, synset and text of the first `count` examples of the files matching `pattern`."""
        ...

    def label_names(self, path: str) -> list[str]:
        """The label map's class names (`foundation.contract.read_label_map`)."""
        ...

    def glob(self, pattern: str) -> list[str]:
        """The files matching `pattern` (folders left out), sorted."""
        ...


@dataclass(frozen=True)
class DataSpec:
    """The keys of the config's `data` section that decide which files are read (see `pipeline.config.DataSection`
    for each key's meaning); `auto` values are made concrete by `resolve_spec`.

    Example:
        DataSpec("data/stream", spans="all")  # every span-N/ folder, layout and label offset detected
    """

    path: str
    split: str = "auto"
    train_pattern: str = ""
    eval_pattern: str = ""
    file_pattern: str = DEFAULT_FILE_PATTERN
    spans: str | int = NO_SPANS
    label_offset: str | int = "auto"
    labels: str = ""

    def __post_init__(self) -> None:
        # The globs are read under `path`: one that leaves it (`../../etc/*`) is refused, whoever built the spec.
        for key in ("train_pattern", "eval_pattern", "file_pattern"):
            if getattr(self, key):
                check_relative(getattr(self, key), f"data.{key}", "data.path")

    @property
    def root(self) -> str:
        return self.path.rstrip("/")

    @property
    def labels_path(self) -> str:
        """`labels`, or `labels.txt` in `path`."""
        return self.labels or f"{self.root}/{LABELS_FILE}"

    @property
    def first_label(self) -> int:
        """`label_offset` as a number: an unresolved `auto` reads as 0."""
        return self.label_offset if isinstance(self.label_offset, int) else 0


def _cannot_look(key: str, path: str, error: OSError) -> DataError:
    return DataError(
        f"{key} is auto, but data.path {path} cannot be read from here ({error}); set it explicitly: "
        + (
            "data.train_pattern and data.eval_pattern (e.g. `train-*` and `validation-*`), or data.split=hash"
            if key == "data.split"
            else "data.label_offset=0 for labels that start at 0, 1 for ImageNet's build scripts"
        )
    )


def _span_map(spec: DataSpec, listing: Listing) -> dict[int, str]:
    try:
        return find_spans(listing.dirs)
    except SpanError as error:
        raise DataError(f"data.path {spec.root}: {error}") from None


def span_folders(spec: DataSpec, listing: Listing) -> list[str]:
    """The span folders to look into (every span, each must hold the same layout); [] for unspanned data.

    Raises:
        DataError: span folders without `data.spans`, `data.spans` without span folders, or a policy that does
            not fit them.
    """
    spans = _span_map(spec, listing)
    if spec.spans == NO_SPANS:
        if spans:
            shown = ", ".join(list(spans.values())[:5]) + (", ..." if len(spans) > 5 else "")
            raise DataError(
                f"data.path {spec.path} holds span folders ({shown}) but data.spans is none; set data.spans to "
                "latest, all or N (the newest N spans), e.g. `--set data.spans=all`"
            )
        return []
    if not spans:
        raise DataError(
            f"data.spans is {spec.spans} but data.path {spec.path} has no span folders (span-N, e.g. "
            f"{span_dir_name(1)}); set data.spans=none for data without spans, or write spans with "
            "`tfxp data digits --out DIR --span N`"
        )
    try:
        select_spans(spans, spec.spans)  # the policy is valid for these spans
    except SpanError as error:
        raise DataError(f"data.spans: {error}") from None
    return [spans[number] for number in sorted(spans)]


def _resolve_layout(spec: DataSpec, listing: Listing, folders: list[str], probe: DataProbe) -> DataLayout:
    root = spec.root
    if not folders:
        return detect_layout(listing, spec.file_pattern, root)
    layouts = {}
    for folder in folders:
        try:
            inside = probe.list_dir(f"{root}/{folder}")
        except OSError as error:
            raise DataError(f"cannot list the span folder {root}/{folder}: {error}") from None
        layouts[folder] = detect_layout(inside, spec.file_pattern, f"{root}/{folder}", spanned=True)
    kinds = {(layout.split, layout.train_pattern, layout.eval_pattern) for layout in layouts.values()}
    if len(kinds) > 1:
        shown = "; ".join(f"{folder}: {layout.description}" for folder, layout in layouts.items())
        raise DataError(
            f"the span folders of {root} hold different layouts ({shown}); every span must hold the same one, "
            "or set data.train_pattern and data.eval_pattern to globs that fit every span folder"
        )
    return next(iter(layouts.values()))


def resolve_spec(spec: DataSpec, probe: DataProbe | None = None) -> DataSpec:
    """`spec` with `split` (and its patterns) and `label_offset` made concrete, span folders checked.

    Each `auto` is resolved from what `probe` reports about `path`; with no probe, or a path it cannot list, an
    `auto` that needs the data is an error naming the keys to set. Explicit values are kept as they are. Span
    folders are checked against `spans` whenever the path is listed: always for a local path, for a bucket when
    an `auto` needs the listing.

    Returns:
        The spec with `split` `folders` (and both patterns) or `hash`, and a numeric `label_offset`.

    Raises:
        DataError: a layout that is not recognised, span folders that do not fit `spans`, an `auto` that cannot
            look at the data, or examples that do not match the label map; each names the keys to set.
    """
    root = spec.root
    listing: Listing | None = None
    unreadable = OSError("no data probe")
    # Local listings are free; a bucket is listed only when an `auto` needs it.
    needed = "auto" in (spec.label_offset, spec.split) or not is_remote(root)
    if probe is not None and needed:
        try:
            listing = probe.list_dir(root)
        except OSError as error:
            unreadable = error
    folders = span_folders(spec, listing) if listing is not None else []
    resolved = spec
    if spec.split == "auto" and spec.train_pattern:
        resolved = replace(resolved, split="folders")
    elif spec.split == "auto":
        if listing is None or probe is None:
            raise _cannot_look("data.split", root, unreadable)
        layout = _resolve_layout(spec, listing, folders, probe)
        resolved = replace(
            resolved, split=layout.split, train_pattern=layout.train_pattern, eval_pattern=layout.eval_pattern
        )
    elif spec.split == "folders" and not spec.train_pattern:
        resolved = replace(resolved, train_pattern=DEFAULT_TRAIN_PATTERN, eval_pattern=DEFAULT_EVAL_PATTERN)
    if spec.label_offset == "auto":
        if listing is None or probe is None:
            raise _cannot_look("data.label_offset", root, unreadable)
        # The newest span's first train files (all the files of a hash split).
        folder = f"{root}/{folders[-1]}" if folders else root
        pattern = f"{folder}/{resolved.file_pattern if resolved.split == 'hash' else resolved.train_pattern}"
        evidence = probe.label_evidence(pattern, LABEL_SAMPLE)
        offset = infer_label_offset(evidence, probe.label_names(spec.labels_path), pattern)
        resolved = replace(resolved, label_offset=0 if offset is None else offset)
    return resolved


def split_patterns(spec: DataSpec) -> dict[str, str]:
    """ImportExampleGen's input splits: split name → glob relative to `path`.

    `hash` reads one split `all` of `file_pattern` (only the TFRecords: `labels.txt` and the data set manifest live
    beside them), which ExampleGen then splits by hash buckets. Any other split reads `train_pattern` and
    `eval_pattern` as the `train` and `eval` splits, tfxp's `train/*` and `eval/*` when they are empty (so an
    unresolved `auto` reads as tfxp's own layout). With `spans` set every pattern is prefixed with the glob over
    all span folders, `span-*/`; the ExampleGen driver and executor read only the spans the policy selects
    (`components.example_gen`).

    Example:
        split_patterns(spec)  # {"train": "train-*", "eval": "validation-*"} for ImageNet's flat files
        split_patterns(spec)  # {"train": "span-*/train/*", "eval": "span-*/eval/*"} with spans=all
    """
    prefix = f"{SPAN_GLOB}/" if spec.spans != NO_SPANS else ""
    if spec.split == "hash":
        return {HASH_SPLIT: prefix + spec.file_pattern}
    return {
        "train": prefix + (spec.train_pattern or DEFAULT_TRAIN_PATTERN),
        "eval": prefix + (spec.eval_pattern or DEFAULT_EVAL_PATTERN),
    }


@dataclass(frozen=True)
class SplitFiles:
    """The files a reader reads, by the same rule as ImportExampleGen.

    Attributes:
        spec: The resolved spec.
        spans: Selected span number → folder name, ascending; empty for data without span folders.
        files: Split name (`train`, `eval`, or `all` for a hash split) → the files, sorted; per span when `spans`
            (`by_span`), concatenated here in span order.
        by_span: Span number → split name → files.
    """

    spec: DataSpec
    spans: dict[int, str]
    files: dict[str, list[str]]
    by_span: dict[int, dict[str, list[str]]] = field(default_factory=dict)


def files_to_read(spec: DataSpec, probe: DataProbe) -> SplitFiles:
    """The files of every split under a resolved `spec` (`resolve_spec`), as ImportExampleGen reads them.

    Raises:
        DataError: a split (of a selected span) with no files, naming the folder and the pattern.
    """
    root = spec.root
    patterns = {split: pattern.removeprefix(f"{SPAN_GLOB}/") for split, pattern in split_patterns(spec).items()}
    spans: dict[int, str] = {}
    folders: list[tuple[int | None, str]] = [(None, root)]
    if spec.spans != NO_SPANS:
        present = _span_map(spec, probe.list_dir(root))
        spans = {number: present[number] for number in select_spans(present, spec.spans)}
        folders = [(number, posixpath.join(root, folder)) for number, folder in spans.items()]
    files: dict[str, list[str]] = {split: [] for split in patterns}
    by_span: dict[int, dict[str, list[str]]] = {}
    for number, folder in folders:
        for split, pattern in patterns.items():
            matched = probe.glob(posixpath.join(folder, pattern))
            if not matched:
                raise DataError(
                    f"{folder} has no {split} files matching {pattern}; every split (and every span) needs files: "
                    "check data.path, or set data.train_pattern and data.eval_pattern"
                )
            files[split].extend(matched)
            if number is not None:
                by_span.setdefault(number, {})[split] = matched
    return SplitFiles(spec, spans, files, by_span)


def read_directory(spec: DataSpec, probe: DataProbe, spans: str | int = ALL) -> SplitFiles:
    """The files a reader of the data directory `spec.path` reads (`tfxp data inspect`, `tfxp predict
    --examples`, edge): layout and label offset resolved as `tfxp run` resolves them (`resolve_spec`), and a
    directory of span folders read by `spans` when `spec.spans` is `none` (a reader takes the directory as it is).

    Raises:
        DataError: `spec.path` cannot be listed, or see `resolve_spec` and `files_to_read`.

    Example:
        read_directory(DataSpec("data/imagenet"), FileProbe()).files["eval"]  # the validation-* files
    """
    try:
        listing = probe.list_dir(spec.root)
    except OSError as error:
        raise DataError(f"cannot list the data directory {spec.path}: {error}; pass a directory of TFRecords") from None
    if spec.spans == NO_SPANS and _span_map(spec, listing):
        spec = replace(spec, spans=spans)
    return files_to_read(resolve_spec(spec, probe), probe)
