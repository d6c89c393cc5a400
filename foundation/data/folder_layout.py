"""Which data layout one folder holds, read from its listing alone.

`foundation.data.layout` applies it to `data.path` and to every span folder of it.

Layouts `data.split: auto` recognises (docs/data.md, "Data layouts, read as they are"):

    train/ + eval/ folders           train/*, eval/*                (what `tfxp data` writes)
    train/ + validation/ folders     train/*, validation/*
    train-* + validation-* files     train-*, validation-*          (TensorFlow's ImageNet build scripts)
    files matching data.file_pattern one set, split by hash buckets (`data.split: hash`)

Anything else, two of these at once, or a train split without an eval split is an error that lists what was found
and the keys to set (`data.train_pattern` and `data.eval_pattern`, or `data.split`).

Example:
    detect_layout(Listing(frozenset({"train", "eval"}), frozenset()), "*.tfrecord*", "data/digits").eval_pattern
    # "eval/*"
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from foundation.data.errors import DataError
from foundation.data.probe import Listing

# Split names as folders (`train/`) or file-name prefixes (`train-00000-of-01024`); eval data goes by either name.
TRAIN_NAME = "train"
EVAL_NAMES = ("eval", "validation")


@dataclass(frozen=True)
class DataLayout:
    """A recognised layout: `split` and the train and eval globs (relative to the folder it was found in).

    Attributes:
        description: How docs/data.md names it, e.g. `train-* + validation-* files`.
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
