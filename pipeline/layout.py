"""Where a run reads and writes, shared by both runners: the output layout (docs/architecture.md, "Output contract"),
remote paths, and the one rule from the data section to the files ImportExampleGen reads.

Everything here is derived from the config. `resolve_data` makes `data.split: auto` and `data.label_offset: auto`
concrete from what a `DataProbe` reports, and checks span folders against `data.spans`; the runners pass the probe
(`components.data.probe.FileProbe`: local disk or `tf.io.gfile`), so this module never touches the disk itself.

Layouts `auto` recognises, in `data.path` or in every `span-N/` folder of it (README, "Data layouts"):

    train/ + eval/ folders           train/*, eval/*                (what `tfxp data` writes)
    train/ + validation/ folders     train/*, validation/*
    train-* + validation-* files     train-*, validation-*          (TensorFlow's ImageNet build scripts)
    files matching data.file_pattern one set, split by hash buckets (`data.split: hash`)

Anything else, two of these at once, or a train split without an eval split is an error that lists what was found
and the keys to set (`data.train_pattern` and `data.eval_pattern`, or `data.split`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from components.data.errors import DataError
from components.data.probe import LabelEvidence, Listing
from components.data.spans import NO_SPANS, SPAN_GLOB, find_spans, select_spans, span_dir_name
from components.paths import is_remote
from pipeline.config import TfxpConfig

# tfxp's own layout (`tfxp data`), and what `data.split: folders` reads without patterns.
DEFAULT_TRAIN_PATTERN = "train/*"
DEFAULT_EVAL_PATTERN = "eval/*"
# Split names as folders (`train/`) or file-name prefixes (`train-00000-of-01024`); eval data goes by either name.
TRAIN_NAME = "train"
EVAL_NAMES = ("eval", "validation")
# Examples read to tell 0-based from 1-based labels.
LABEL_SAMPLE = 64


@dataclass(frozen=True)
class OutputLayout:
    """Paths of one run's outputs; plain strings so they work for local dirs and buckets alike.

    Attributes:
        pipeline_root: TFX pipeline root (artifacts), `OUT/<pipeline>/root`.
        metadata_path: SQLite ML Metadata store, `OUT/<pipeline>/metadata.db`.
        serving_base: TF Serving model base path, `OUT/serving/<model>`; versions are subdirectories.
        edge_base: Device model base, `OUT/edge/<model>`.
        summary_path: `OUT/run-summary.json`.
        config_path: The frozen config of the run, `OUT/<pipeline>/params.yaml`.
        log_dir: TFX and Beam logs of local runs, `OUT/<pipeline>/logs`.
    """

    pipeline_root: str
    metadata_path: str
    serving_base: str
    edge_base: str
    summary_path: str
    config_path: str
    log_dir: str


def output_layout(config: TfxpConfig) -> OutputLayout:
    """The layout under `config.pipeline.output` (or `serving.base_path` for pushes when set)."""
    out = config.pipeline.output.rstrip("/")
    pipeline_dir = f"{out}/{config.pipeline.name}"
    model = config.serving.model_name
    return OutputLayout(
        pipeline_root=f"{pipeline_dir}/root",
        metadata_path=f"{pipeline_dir}/metadata.db",
        serving_base=config.serving.base_path.rstrip("/") or f"{out}/serving/{model}",
        edge_base=f"{out}/edge/{model}",
        summary_path=f"{out}/run-summary.json",
        config_path=f"{pipeline_dir}/params.yaml",
        log_dir=f"{pipeline_dir}/logs",
    )


class DataProbe(Protocol):
    """What `resolve_data` may ask about the data (`components.data.probe.FileProbe` answers from the disk)."""

    def list_dir(self, path: str) -> Listing:
        """Names in `path`; raises OSError when it cannot be listed."""
        ...

    def label_evidence(self, pattern: str, count: int) -> list[LabelEvidence]:
        """Label, synset and text of the first `count` examples of the files matching `pattern`."""
        ...

    def label_names(self, path: str) -> list[str]:
        """The label map's class names (`components.contract.read_label_map`)."""
        ...


@dataclass(frozen=True)
class DataLayout:
    """A recognised layout: `split` and the train and eval globs (relative to the folder it was found in).

    Attributes:
        description: How the README names it, e.g. `train-* + validation-* files`.
        split: `folders` (the globs are the splits) or `hash` (one set of files, split by hash buckets).
        train_pattern: The train glob (`folders` only).
        eval_pattern: The eval glob (`folders` only).
    """

    description: str
    split: str
    train_pattern: str = ""
    eval_pattern: str = ""


def _flat_prefix(name: str) -> str | None:
    for split in (TRAIN_NAME, *EVAL_NAMES):
        if name.startswith(f"{split}-"):
            return split
    return None


def _pair(present: Sequence[str], kind: str) -> tuple[str, str] | str:
    """(train, eval) names among `present`, or why they are not a pair."""
    evals = [name for name in EVAL_NAMES if name in present]
    if TRAIN_NAME not in present:
        return f"{kind} for {' and '.join(evals)} but none for train"
    if not evals:
        return f"{kind} for train but none for eval or validation"
    if len(evals) > 1:
        return f"{kind} for both eval and validation, so the eval split is ambiguous"
    return TRAIN_NAME, evals[0]


def detect_layout(listing: Listing, file_pattern: str, where: str, spanned: bool = False) -> DataLayout:
    """The layout of one folder's listing (see the module docstring for the rule).

    Args:
        listing: The folder's entries.
        file_pattern: `data.file_pattern`, the TFRecords of a hash-split layout.
        where: The folder, named in errors.
        spanned: The folder is a span folder (errors say the patterns are relative to each span folder).

    Raises:
        DataError: nothing recognisable, two layouts at once, or a train split without one eval split; the
            message lists what was found and the keys to set.

    Example:
        detect_layout(Listing(frozenset(), frozenset({"train-00000-of-00002", "validation-00000-of-00001"})),
                      "*.tfrecord*", "data/imagenet").train_pattern  # "train-*"
    """
    folders = sorted(name for name in listing.dirs if name in (TRAIN_NAME, *EVAL_NAMES))
    flat: dict[str, list[str]] = {}
    for name in sorted(listing.files):
        if (prefix := _flat_prefix(name)) is not None:
            flat.setdefault(prefix, []).append(name)
    loose = sorted(name for name in listing.files if _flat_prefix(name) is None and fnmatch.fnmatch(name, file_pattern))
    found = [f"{name}/ (folder)" for name in folders]
    found += [f"{prefix}-* files ({len(names)}, e.g. {names[0]})" for prefix, names in flat.items()]
    if loose:
        found.append(f"files matching data.file_pattern {file_pattern} ({len(loose)}, e.g. {loose[0]})")
    kinds = [kind for kind, present in (("folders", folders), ("files", flat), ("hash", loose)) if present]
    if len(kinds) == 1 and kinds[0] == "hash":
        return DataLayout(f"files matching {file_pattern}, split by hash buckets", "hash")
    if len(kinds) == 1:
        pair = _pair(folders if kinds[0] == "folders" else list(flat), kinds[0])
        if isinstance(pair, tuple):
            train, evaluation = pair
            if kinds[0] == "folders":
                return DataLayout(f"{train}/ + {evaluation}/ folders", "folders", f"{train}/*", f"{evaluation}/*")
            return DataLayout(f"{train}-* + {evaluation}-* files", "folders", f"{train}-*", f"{evaluation}-*")
        problem = pair
    elif kinds:
        problem = "more than one layout at once"
    else:
        problem = "no TFRecords that tfxp recognises"
    relative = "each span folder" if spanned else "data.path"
    raise DataError(
        f"cannot tell how the data in {where} is split: found {', '.join(found) or 'nothing'} ({problem}). "
        "data.split=auto reads train/ + eval/ or train/ + validation/ folders, train-* + validation-* files, or "
        f"files matching data.file_pattern split by hash buckets; for anything else set data.train_pattern and "
        f"data.eval_pattern (globs relative to {relative}, e.g. `--set data.train_pattern='train/*.tfrecord' "
        "--set data.eval_pattern='val/*.tfrecord'`), or data.split=hash"
    )


def infer_label_offset(evidence: Sequence[LabelEvidence], names: Sequence[str], where: str) -> int | None:
    """The label offset the examples show, matching their `image/class/synset` (or `image/class/text`) with the
    label map: an example of class `names[i]` labelled `i + 1` shows offset 1. None when no example names a class
    of the label map.

    Raises:
        DataError: the examples show different offsets, or a negative one (the label map does not fit the data).
    """
    index = {name: position for position, name in enumerate(names)}
    offsets: dict[int, LabelEvidence] = {}
    for item in evidence:
        name = item.synset if item.synset in index else item.text if item.text in index else None
        if name is not None:
            offsets.setdefault(item.label - index[name], item)
    if not offsets:
        return None
    if len(offsets) > 1 or min(offsets) < 0:
        shown = "; ".join(
            f"label {item.label} is {item.synset or item.text!r}, line {index[item.synset or item.text] + 1}"
            for item in offsets.values()
        )
        raise DataError(
            f"data.label_offset=auto: the first examples in {where} do not match the label map with one offset "
            f"({shown}); check data.labels, or set data.label_offset (0 for labels that start at 0, 1 for "
            "ImageNet's build scripts)"
        )
    return next(iter(offsets))


def _cannot_look(key: str, path: str, error: OSError) -> DataError:
    return DataError(
        f"{key} is auto, but data.path {path} cannot be read from here ({error}); set it explicitly: "
        + (
            "data.train_pattern and data.eval_pattern (e.g. `train-*` and `validation-*`), or data.split=hash"
            if key == "data.split"
            else "data.label_offset=0 for labels that start at 0, 1 for ImageNet's build scripts"
        )
    )


def _span_folders(config: TfxpConfig, listing: Listing) -> list[str]:
    """The span folders to look into (every span, each must hold the same layout); [] for unspanned data."""
    data = config.data
    spans = find_spans(listing.dirs)
    if data.spans == NO_SPANS:
        if spans:
            shown = ", ".join(list(spans.values())[:5]) + (", ..." if len(spans) > 5 else "")
            raise DataError(
                f"data.path {data.path} holds span folders ({shown}) but data.spans is none; set data.spans to "
                "latest, all or N (the newest N spans), e.g. `--set data.spans=all`"
            )
        return []
    if not spans:
        raise DataError(
            f"data.spans is {data.spans} but data.path {data.path} has no span folders (span-N, e.g. "
            f"{span_dir_name(1)}); set data.spans=none for data without spans, or write spans with "
            "`tfxp data digits --out DIR --span N`"
        )
    select_spans(spans, data.spans)  # the policy is valid for these spans
    return [spans[number] for number in sorted(spans)]


def _resolve_layout(config: TfxpConfig, listing: Listing, span_folders: list[str], probe: DataProbe) -> DataLayout:
    data = config.data
    root = data.path.rstrip("/")
    if not span_folders:
        return detect_layout(listing, data.file_pattern, root)
    layouts = {}
    for folder in span_folders:
        try:
            listing = probe.list_dir(f"{root}/{folder}")
        except OSError as error:
            raise DataError(f"cannot list the span folder {root}/{folder}: {error}") from None
        layouts[folder] = detect_layout(listing, data.file_pattern, f"{root}/{folder}", spanned=True)
    kinds = {(layout.split, layout.train_pattern, layout.eval_pattern) for layout in layouts.values()}
    if len(kinds) > 1:
        shown = "; ".join(f"{folder}: {layout.description}" for folder, layout in layouts.items())
        raise DataError(
            f"the span folders of {root} hold different layouts ({shown}); every span must hold the same one, "
            "or set data.train_pattern and data.eval_pattern to globs that fit every span folder"
        )
    return next(iter(layouts.values()))


def resolve_data(config: TfxpConfig, probe: DataProbe | None = None) -> TfxpConfig:
    """`config` with `data.split` (and its patterns) and `data.label_offset` made concrete, span folders checked.

    Each `auto` is resolved from what `probe` reports about `data.path`; with no probe, or a path it cannot list,
    an `auto` that needs the data is an error naming the keys to set. Explicit values are kept as they are. Span
    folders are checked against `data.spans` whenever the path is listed: always for a local path, for a bucket
    when an `auto` needs the listing.

    Args:
        config: The config, with paths the runner has made absolute.
        probe: Answers questions about the data (`components.data.probe.FileProbe`), or None.

    Returns:
        The config with `data.split` `folders` (and both patterns) or `hash`, and a numeric `data.label_offset`.

    Raises:
        DataError: a layout that is not recognised, span folders that do not fit `data.spans`, an `auto` that
            cannot look at the data, or examples that do not match the label map; each names the keys to set.
    """
    data = config.data
    root = data.path.rstrip("/")
    listing: Listing | None = None
    unreadable = OSError("no data probe")
    # Local listings are free; a bucket is listed only when an `auto` needs it.
    needed = "auto" in (data.label_offset, data.split) or not is_remote(root)
    if probe is not None and needed:
        try:
            listing = probe.list_dir(root)
        except OSError as error:
            unreadable = error
    span_folders = _span_folders(config, listing) if listing is not None else []
    update: dict[str, object] = {}
    if data.split == "auto" and data.train_pattern:
        update["split"] = "folders"
    elif data.split == "auto":
        if listing is None or probe is None:
            raise _cannot_look("data.split", root, unreadable)
        layout = _resolve_layout(config, listing, span_folders, probe)
        update.update(split=layout.split, train_pattern=layout.train_pattern, eval_pattern=layout.eval_pattern)
    elif data.split == "folders" and not data.train_pattern:
        update.update(train_pattern=DEFAULT_TRAIN_PATTERN, eval_pattern=DEFAULT_EVAL_PATTERN)
    resolved = config.model_copy(update={"data": data.model_copy(update=update)})
    if data.label_offset == "auto":
        if listing is None or probe is None:
            raise _cannot_look("data.label_offset", root, unreadable)
        # The newest span's first train files (all the files of a hash split).
        folder = f"{root}/{span_folders[-1]}" if span_folders else root
        train = resolved.data
        pattern = f"{folder}/{train.file_pattern if train.split == 'hash' else train.train_pattern}"
        evidence = probe.label_evidence(pattern, LABEL_SAMPLE)
        offset = infer_label_offset(evidence, probe.label_names(data.labels_path), pattern)
        update["label_offset"] = 0 if offset is None else offset
        resolved = config.model_copy(update={"data": data.model_copy(update=update)})
    return resolved


def split_patterns(config: TfxpConfig) -> dict[str, str]:
    """ImportExampleGen's input splits: split name → glob relative to `data.path`.

    `hash` reads one split `all` of `data.file_pattern` (only the TFRecords: `labels.txt` and the data set
    manifest live beside them), which ExampleGen then splits by hash buckets. Any other split reads
    `data.train_pattern` and `data.eval_pattern` as the `train` and `eval` splits, tfxp's `train/*` and `eval/*`
    when they are empty (so an unresolved `auto` reads as tfxp's own layout). With `data.spans` set every pattern
    is prefixed with the glob over all span folders, `span-*/`: TFX's input fingerprint then covers every span,
    and the ExampleGen executor reads only the spans the policy selects (`components.example_gen`).

    Example:
        split_patterns(config)  # {"train": "train-*", "eval": "validation-*"} for ImageNet's flat files
        split_patterns(config)  # {"train": "span-*/train/*", "eval": "span-*/eval/*"} with data.spans=all
    """
    data = config.data
    prefix = f"{SPAN_GLOB}/" if data.spans != NO_SPANS else ""
    if data.split == "hash":
        return {"all": prefix + data.file_pattern}
    return {
        "train": prefix + (data.train_pattern or DEFAULT_TRAIN_PATTERN),
        "eval": prefix + (data.eval_pattern or DEFAULT_EVAL_PATTERN),
    }
