"""Publishing a numbered model version so a reader never sees it half-written: the Pusher's and the EdgeExporter's.

A model base path holds one directory per version, named by a Unix timestamp (as TFX's Pusher names them):
`<base>/1700000000/`. Model servers (TF Serving, `tfxp serve`) and `list_versions` only look at numeric names.

Both kinds of path first copy the files into a hidden staging directory beside the versions
(`<base>/.staging-<version>-<random>`, a name model servers and `list_versions` ignore), so a push that fails
while copying (the long part) never leaves a numbered directory behind. Then the staged files go into place:

- Local paths: the staging directory is renamed to `<base>/<version>`; on one file system that is atomic.
- Bucket paths (`gs://`, `s3://`) have no atomic rename: renaming a directory there is a copy and a delete per
  object (TensorFlow's GCS file system, `tsl/platform/cloud/gcs_file_system.cc`: `GcsFileSystem::RenameFile`
  renames "all individual objects in the directory one by one", `RenameObject` copies, then deletes). So each
  staged file is renamed into the version directory on its own, the push record next to last and `last_file`
  last. `last_file` marks a complete version, as `saved_model.pb` does for TF Serving and TFX's own Pusher
  (`tfx/components/pusher/executor.py:198`, tfx 1.21): readers that decide what is servable pass it as
  `list_versions(..., required_file=...)`, and `find_published` only reuses a version that has it, so a push
  interrupted while moving files leaves a numbered directory without it, which nothing serves or reuses.

Each version directory records what it holds in `tfxp_push.json` (`{"identity": ..., "version": ...}`), and
publishing an identity that is already there returns its version instead of a duplicate. Callers choose the
identity: the Pusher's is the pushed SavedModel's path inside the model artifact (each Trainer run writes a new
artifact, so a retrained model is a new version and a re-run Pusher finds its version); the EdgeExporter's is
the SHA-256 of `model.tflite` (a re-run that converts to the same bytes reuses the version).

Only the standard library is imported here; bucket paths import `tensorflow.io.gfile` when used.

Example:
    version_dir = publish_version("model/Format-Serving", "tfxp_output/serving/digits", identity=model_uri)
    newest = list_versions("tfxp_output/serving/digits")[0]
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from components.contract import is_remote

STAGING_PREFIX = ".staging-"
# Written into each version dir (model servers ignore files they do not know) to recognise a re-push.
PUSH_RECORD = "tfxp_push.json"


def next_version(existing: Iterable[str], now: float | None = None) -> int:
    """A Unix-timestamp version strictly greater than every numeric name in `existing`.

    Two pushes in the same second (or a clock behind the newest version) still get increasing versions.

    Args:
        existing: Names in the model base path (non-numeric ones, such as staging dirs, are ignored).
        now: Clock override for tests; defaults to `time.time()`.
    """
    stamp = int(time.time() if now is None else now)
    numeric = [int(name) for name in existing if name.isdigit()]
    return max([stamp, *(version + 1 for version in numeric)])


def list_versions(base: str | Path, required_file: str | None = None) -> list[str]:
    """The version directories under `base`, newest first.

    Hidden staging directories and non-numeric names are not versions; a base path that does not exist has
    none.

    Args:
        base: The model base path (local or bucket).
        required_file: Count only versions holding this file, e.g. the file a bucket publisher writes last
            (`saved_model.pb`, `model.tflite`); None counts every numeric directory.

    Returns:
        `<base>/<version>` paths, highest version first.

    Example:
        served = list_versions("tfxp_output/serving/digits", required_file="saved_model.pb")[:1]
    """
    root = str(base).rstrip("/")
    if not _isdir(root):
        return []
    names = sorted((name for name in _names(root) if name.isdigit()), key=int, reverse=True)
    paths = [f"{root}/{name}" for name in names if _isdir(f"{root}/{name}")]
    return [path for path in paths if required_file is None or _exists(f"{path}/{required_file}")]


def find_published(base: str | Path, identity: str, required_file: str | None = None) -> str | None:
    """The version directory whose push record holds `identity`, if any (the newest when several do).

    Args:
        base: The model base path (local or bucket).
        identity: What the version holds (see the module docstring).
        required_file: Only versions holding this file count (as in `list_versions`): a bucket version whose
            copy stopped before its completing file is not a published one, and a re-push makes a new version.
    """
    for version_dir in list_versions(base, required_file=required_file):
        record = _read_record(f"{version_dir}/{PUSH_RECORD}")
        # `source`: the Pusher's records before the record named it `identity`.
        if record is not None and record.get("identity", record.get("source")) == identity:
            return version_dir
    return None


def publish_version(
    source_dir: str | Path,
    base: str | Path,
    identity: str,
    last_file: str | None = None,
    version: int | None = None,
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

    Returns:
        `<base>/<version>`.

    Raises:
        FileNotFoundError: `source_dir` or `last_file` does not exist.
        FileExistsError: `version` is given and exists already (versions are never overwritten).
    """
    source, root = str(source_dir).rstrip("/"), str(base).rstrip("/")
    if not _isdir(source):
        raise FileNotFoundError(f"model directory {source} does not exist; nothing to push")
    files = _files(source)
    if last_file is not None and last_file not in files:
        raise FileNotFoundError(f"cannot push {source}: {last_file} is missing")
    existing = find_published(root, identity, required_file=last_file)
    if existing is not None:
        return existing
    if version is None:
        version = next_version(_names(root) if _isdir(root) else [])
    target = f"{root}/{version}"
    if _exists(target):
        raise FileExistsError(f"push target {target} exists already; versions are never overwritten")
    record = json.dumps({"identity": identity, "version": version}) + "\n"
    # A dot-name: model servers and `list_versions` ignore it, so a copy that fails leaves no version behind.
    staging = f"{root}/{STAGING_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    try:
        _stage(source, files, staging)
        _write_text(f"{staging}/{PUSH_RECORD}", record)
        if is_remote(root):
            # No atomic rename on buckets: each file on its own, the record then `last_file` last, so a version
            # with `last_file` has every file and its record.
            order = [name for name in files if name != last_file] + [PUSH_RECORD]
            for name in order + ([last_file] if last_file is not None else []):
                _rename(f"{staging}/{name}", f"{target}/{name}")
        else:
            os.rename(staging, target)  # atomic within one file system
    finally:
        _remove_tree(staging)
    return target


def _stage(source: str, files: list[str], staging: str) -> None:
    if is_remote(source) or is_remote(staging):
        for name in files:
            _copy(f"{source}/{name}", f"{staging}/{name}")
    else:
        os.makedirs(os.path.dirname(staging), exist_ok=True)
        shutil.copytree(source, staging)


# Local paths use the standard library; bucket paths `tf.io.gfile`, imported only then.


def _gfile() -> Any:
    import tensorflow as tf

    return tf.io.gfile


def _isdir(path: str) -> bool:
    return bool(_gfile().isdir(path)) if is_remote(path) else os.path.isdir(path)


def _exists(path: str) -> bool:
    return bool(_gfile().exists(path)) if is_remote(path) else os.path.exists(path)


def _names(directory: str) -> list[str]:
    if is_remote(directory):
        return [name.rstrip("/") for name in _gfile().listdir(directory)]
    return os.listdir(directory)


def _files(directory: str) -> list[str]:
    """Every file under `directory`, as sorted paths relative to it."""
    walk = _gfile().walk(directory) if is_remote(directory) else os.walk(directory)
    prefix = len(directory.rstrip("/")) + 1
    return sorted(f"{parent.rstrip('/')}/{name}"[prefix:] for parent, _, names in walk for name in names)


def _copy(source: str, target: str) -> None:
    if is_remote(source) or is_remote(target):
        _gfile().makedirs(target.rsplit("/", 1)[0])
        _gfile().copy(source, target)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(source, target)


def _rename(source: str, target: str) -> None:
    # On a bucket the target's directory is made first: object stores have none, but TensorFlow's in-memory file
    # system (the tests' stand-in) lists only directories that were made.
    _gfile().makedirs(target.rsplit("/", 1)[0])
    _gfile().rename(source, target)


def _remove_tree(path: str) -> None:
    """Removes a staging directory if it is there; best effort (what is left is a hidden name, ignored)."""
    try:
        if is_remote(path):
            if _gfile().exists(path):
                _gfile().rmtree(path)
        elif os.path.exists(path):
            shutil.rmtree(path, ignore_errors=True)
    except Exception:  # a leftover staging dir is harmless (a hidden name); the push's own outcome stands
        pass


def _write_text(path: str, text: str) -> None:
    if is_remote(path):
        with _gfile().GFile(path, "w") as handle:
            handle.write(text)
    else:
        Path(path).write_text(text)


def _read_record(path: str) -> dict[str, Any] | None:
    """A push record, or None when there is none (a version pushed by another tool) or it is damaged."""
    if not _exists(path):
        return None
    try:
        if is_remote(path):
            with _gfile().GFile(path) as handle:
                record = json.loads(handle.read())
        else:
            record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
