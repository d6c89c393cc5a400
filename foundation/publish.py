"""Versions of a model base path: which folder is a version, the newest complete one, publishing, push records.

The versions and their publisher live in one module because the publisher writes what the rule reads: a version
is complete only when the file `publish_version` moves in last is there.

A model base path holds one directory per version (TF Serving's layout `<base>/<version>/`), named by a Unix
timestamp as TFX's Pusher names them: `<base>/1700000000/`. A folder is a version when its name is ASCII digits
whose value fits TF Serving's int64 version (`version_number`): TF Serving parses names with `safe_strto64`
(`tensorflow_serving/sources/storage_path/file_system_storage_path_source.cc`, `ParseVersionNumber`) and skips
what does not parse, so `5.tmp`, `.staging-5`, `²` (a digit to Python's `str.isdigit`) and
`99999999999999999999` (beyond int64) are never versions; `0` is one (int64 holds it), and `007` is version 7.
The model servers (TF Serving, `tfxp serve`), the Pusher, ServedBaseline, warm start, the notice and the run
summary all read versions through this module.

Publishing first copies the files into a hidden staging directory beside the versions
(`<base>/.staging-<version>-<random>`, which is not a version), so a push that fails while copying (the long part)
never leaves a numbered directory behind. Then the staged files go into place:

- Local paths: the staging directory is renamed to `<base>/<version>`; on one file system that is atomic.
- Bucket paths (`gs://`, `s3://`) have no atomic rename: renaming a directory there is a copy and a delete per
  object (TensorFlow's GCS file system, `tsl/platform/cloud/gcs_file_system.cc`: `GcsFileSystem::RenameFile`
  renames "all individual objects in the directory one by one", `RenameObject` copies, then deletes). So each
  staged file is renamed into the version directory on its own, the push record next to last and `last_file`
  last. `last_file` marks a complete version, as `SAVED_MODEL_FILE` does for TF Serving and TFX's own Pusher
  (`tfx/components/pusher/executor.py:198`, tfx 1.21): readers that decide what is servable pass it as
  `list_versions(..., required_file=...)`, and `find_published` only reuses a version that has it, so a push
  interrupted while moving files leaves a numbered directory without it, which nothing serves or reuses.

Each version directory records what it holds in `tfxp_push.json` (`{"identity": ..., "version": ...}`), and
publishing an identity that is already there returns its version instead of a duplicate. Callers choose the
identity: the Pusher's is what the model holds (`foundation.model_identity`, also recording the SavedModel's path
as `saved_model`; records written before named only the path, as `identity`); the EdgeExporter's names what went
into the device model (`edge.inputs`).

Only the standard library is imported here; bucket paths import `tensorflow.io.gfile` when used
(`foundation.paths`).

Example:
    version_dir = publish_version("model/Format-Serving", "tfxp_output/serving/digits", identity=model_uri)
    newest = newest_version("tfxp_output/serving/digits", required_file=SAVED_MODEL_FILE)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from foundation import paths
from foundation.bounded import parse_json, read_document
from foundation.paths import is_remote

STAGING_PREFIX = ".staging-"
# Written into each version dir (model servers ignore files they do not know) to recognise a re-push.
PUSH_RECORD = "tfxp_push.json"
# TF Serving's version is an int64 (`ServableId::version`); names outside it are skipped there, so here too.
MAX_VERSION = 2**63 - 1
# ASCII digits only: `str.isdigit` also takes "²" (which `int()` refuses) and "٣" (which `int()` reads as 3);
# TF Serving takes neither.
_VERSION_NAME = re.compile(r"[0-9]+")


def version_number(name: str) -> int | None:
    """The version a folder name stands for, or None when it is not a version (see the module docstring).

    Example:
        version_number("1796083574")  # 1796083574
        version_number("007")  # 7
        version_number("²"), version_number("5.tmp"), version_number("99999999999999999999")  # None, None, None
    """
    if not _VERSION_NAME.fullmatch(name):
        return None
    number = int(name)
    return number if number <= MAX_VERSION else None


def is_version_name(name: str) -> bool:
    """Whether a folder called `name` is a version (`version_number` is not None)."""
    return version_number(name) is not None


def looks_like_version(name: str) -> bool:
    """Whether `name` would pass a naive digit test (`str.isdigit`) but is no version: worth a warning, since
    whoever made it meant a version (`²`, `٣`, a number beyond int64)."""
    return name.isdigit() and version_number(name) is None


def next_version(existing: Iterable[str], now: float | None = None) -> int:
    """A Unix-timestamp version strictly greater than every version in `existing`.

    Two pushes in the same second (or a clock behind the newest version) still get increasing versions.

    Args:
        existing: Names in the model base path (names that are no version, such as staging dirs or a stray
            `99999999999999999999`, are ignored).
        now: Clock override for tests; defaults to `time.time()`.

    Raises:
        ValueError: a version `MAX_VERSION` exists, so no greater one fits TF Serving's int64.
    """
    stamp = int(time.time() if now is None else now)
    numbers = [number for number in map(version_number, existing) if number is not None]
    chosen = max([stamp, *(number + 1 for number in numbers)])
    if chosen > MAX_VERSION:
        raise ValueError(
            f"the model base path holds version {MAX_VERSION}, the largest TF Serving reads (int64); "
            "no later version fits: remove or rename that folder"
        )
    return chosen


def list_versions(base: str | Path, required_file: str | None = None) -> list[str]:
    """The version directories under `base`, newest first (names that are no version, see `version_number`,
    are left out; a base path that does not exist has none).

    Args:
        base: The model base path (local or bucket).
        required_file: Count only versions holding this file, e.g. the file a bucket publisher writes last
            (`SAVED_MODEL_FILE`, `EDGE_MODEL_FILE`); None counts every version directory.

    Returns:
        `<base>/<version>` paths, highest version first (of `007` and `7`, `7` first, as TF Serving picks it).

    Example:
        edge_versions = list_versions("tfxp_output/edge/digits", required_file=EDGE_MODEL_FILE)
    """
    root = str(base).rstrip("/")
    if not paths.is_dir(root):
        return []
    numbered = [(number, name) for name in paths.list_dir(root) if (number := version_number(name)) is not None]
    found = [f"{root}/{name}" for _, name in sorted(numbered, reverse=True) if paths.is_dir(f"{root}/{name}")]
    return [path for path in found if required_file is None or paths.exists(f"{path}/{required_file}")]


def newest_version(base: str | Path, required_file: str | None) -> str | None:
    """The newest version directory under `base` holding `required_file`: what TF Serving serves when that is
    `SAVED_MODEL_FILE` (`components.baseline.served.find_served_model` is that rule); None when there is none."""
    found = list_versions(base, required_file=required_file)
    return found[0] if found else None


def is_complete_version(version_dir: str, required_file: str | None) -> bool:
    """Whether `version_dir` (`<base>/<name>`) is still a version of its base holding `required_file`."""
    name = paths.name_of(version_dir)
    return (
        is_version_name(name)
        and paths.is_dir(version_dir)
        and (required_file is None or paths.exists(f"{version_dir.rstrip('/')}/{required_file}"))
    )


def read_push_record(version_dir: str) -> dict[str, Any] | None:
    """The push record of a version directory, or None when there is none (a version another tool wrote) or it
    cannot be read as a JSON object."""
    path = f"{version_dir.rstrip('/')}/{PUSH_RECORD}"
    try:
        record = parse_json(read_document(path, f"push record {path}"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def push_identity(record: Mapping[str, Any] | None) -> str:
    """What a push record says the version holds; "" when nothing. `source` is the Pusher's key before
    `identity` named it."""
    identity = (record or {}).get("identity", (record or {}).get("source", ""))
    return identity if isinstance(identity, str) else ""


SAVED_MODEL_KEY = "saved_model"
"""Push record key: the SavedModel path the Pusher published the version from (the run that pushed it)."""


def recorded_source(record: Mapping[str, Any] | None) -> str:
    """The SavedModel path a push record says the version was published from: `saved_model`, or, in a record
    written before the Pusher's identity was the model's content, its identity (which was that path)."""
    source = (record or {}).get(SAVED_MODEL_KEY)
    return source if isinstance(source, str) and source else push_identity(record)


TRAINED_SPANS_KEY = "spans"
"""Push record key: the spans the version's model was trained on (the Examples' `spans`), when the data has them."""


def trained_spans(record: Mapping[str, Any] | None) -> tuple[int, ...] | None:
    """The spans a push record says its model was trained on; None when it does not say (data without spans, a
    version pushed before tfxp recorded them, another tool's)."""
    spans = (record or {}).get(TRAINED_SPANS_KEY)
    if not isinstance(spans, list) or not spans or not all(isinstance(span, int) for span in spans):
        return None
    return tuple(sorted(spans))


def push_records(base: str | Path, required_file: str | None) -> dict[str, dict[str, Any]]:
    """Version directory → its push record, for the versions under `base` holding `required_file`, newest
    first; versions without a readable record are left out."""
    records = {}
    for version_dir in list_versions(base, required_file=required_file):
        record = read_push_record(version_dir)
        if record is not None:
            records[version_dir] = record
    return records


def find_published(
    base: str | Path, identity: str, required_file: str | None = None, holds: Callable[[str], bool] | None = None
) -> str | None:
    """The version directory whose push record holds `identity`, if any (the newest when several do).

    Args:
        base: The model base path (local or bucket).
        identity: What the version holds (see the module docstring).
        required_file: Only versions holding this file count (as in `list_versions`): a bucket version whose
            copy stopped before its completing file is not a published one, and a re-push makes a new version.
        holds: Also required of a version, when given: that its files still hold `identity` (the Pusher reads the
            model identity back, `foundation.model_identity.version_holds`), not only its record.
    """
    for version_dir, record in push_records(base, required_file).items():
        if push_identity(record) == identity and (holds is None or holds(version_dir)):
            return version_dir
    return None


def publish_version(
    source_dir: str | Path,
    base: str | Path,
    identity: str,
    last_file: str | None = None,
    version: int | None = None,
    record_extra: Mapping[str, Any] | None = None,
    holds: Callable[[str], bool] | None = None,
) -> str:
    """Copies `source_dir` to `<base>/<version>/` with a push record, and returns that directory.

    Locally the version appears complete in one rename; on a bucket its files are renamed into it one by one,
    `last_file` last (see the module docstring). An identity already published (with `last_file`, when given)
    is not published again: its existing version directory is returned.

    Args:
        source_dir: The complete model directory (any tree of files; local or bucket).
        base: The model base path; created if missing.
        identity: What the version holds (see the module docstring); recorded in `tfxp_push.json`.
        last_file: File (relative to `source_dir`) that marks a complete version: moved into a bucket version
            last, and required of a version `find_published` reuses. Defaults to None: every version counts, and
            on a bucket the push record is the last file moved.
        version: The version to create; default `next_version` over the existing names. Callers that write
            the version's path into the files first (the EdgeExporter's metadata) choose it beforehand.
        record_extra: More keys for the push record (the Pusher's `TRAINED_SPANS_KEY`); `identity` and `version`
            win over them.
        holds: As in `find_published`: an existing version is reused only when it also passes this check.

    Returns:
        `<base>/<version>`.

    Raises:
        FileNotFoundError: `source_dir` or `last_file` does not exist.
        FileExistsError: `version` is given and exists already (versions are never overwritten).
        ValueError: `base` holds the largest version int64 holds (`next_version`).
    """
    source, root = str(source_dir).rstrip("/"), str(base).rstrip("/")
    if not paths.is_dir(source):
        raise FileNotFoundError(f"model directory {source} does not exist; nothing to push")
    files = paths.files_under(source)
    if last_file is not None and last_file not in files:
        raise FileNotFoundError(f"cannot push {source}: {last_file} is missing")
    existing = find_published(root, identity, required_file=last_file, holds=holds)
    if existing is not None:
        return existing
    version, target = _version_target(root, version)
    record = json.dumps({**(record_extra or {}), "identity": identity, "version": version}) + "\n"
    # A dot-name, never a version: a copy that fails leaves no version behind.
    staging = f"{root}/{STAGING_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    try:
        _stage(source, files, staging)
        paths.write_text(f"{staging}/{PUSH_RECORD}", record)
        _move_into_place(staging, target, files, last_file)
    finally:
        _remove_tree(staging)
    return target


def _version_target(root: str, version: int | None) -> tuple[int, str]:
    """(the version to create, `<root>/<version>`): `version`, else `next_version` over the existing names.

    Raises:
        FileExistsError: the version exists already.
        ValueError: `root` holds the largest version int64 holds.
    """
    if version is None:
        try:
            version = next_version(paths.list_dir(root) if paths.is_dir(root) else [])
        except ValueError as error:
            raise ValueError(f"cannot push to {root}: {error}") from None
    target = f"{root}/{version}"
    if paths.exists(target):
        raise FileExistsError(f"push target {target} exists already; versions are never overwritten")
    return version, target


def _move_into_place(staging: str, target: str, files: list[str], last_file: str | None) -> None:
    """Moves the staged version to `target`: in one rename locally, file by file on a bucket."""
    if is_remote(target):
        # No atomic rename on buckets: each file on its own, the record then `last_file` last, so a version
        # with `last_file` has every file and its record.
        order = [name for name in files if name != last_file] + [PUSH_RECORD]
        for name in order + ([last_file] if last_file is not None else []):
            _rename(f"{staging}/{name}", f"{target}/{name}")
    else:
        os.rename(staging, target)  # atomic within one file system


def _stage(source: str, files: list[str], staging: str) -> None:
    if is_remote(source) or is_remote(staging):
        for name in files:
            paths.copy_file(f"{source}/{name}", f"{staging}/{name}")
    else:
        os.makedirs(os.path.dirname(staging), exist_ok=True)
        shutil.copytree(source, staging)


def _rename(source: str, target: str) -> None:
    # On a bucket the target's directory is made first: object stores have none, but TensorFlow's in-memory file
    # system (the tests' stand-in) lists only directories that were made.
    paths.gfile().makedirs(paths.parent_of(target))
    paths.gfile().rename(source, target)


def _remove_tree(path: str) -> None:
    """Removes a staging directory if it is there; best effort (what is left is a hidden name, ignored)."""
    # A leftover staging dir is harmless (a hidden name); the push's own outcome stands.
    with contextlib.suppress(Exception):
        paths.remove_tree(path)
