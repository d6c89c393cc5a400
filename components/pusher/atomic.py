"""Publishing a model version so a polling model server never sees it half-written.

TF Serving polls a model base path and loads any new numeric subdirectory. tfxp copies the model into
a hidden staging directory beside the versions (TF Serving ignores non-numeric names) and renames it
into place: on one file system the rename is atomic.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

STAGING_PREFIX = ".staging-"
# Written into each version dir (TF Serving ignores files it does not know) to recognise a re-push.
PUSH_RECORD = "tfxp_push.json"


def next_version(existing: Iterable[str], now: float | None = None) -> int:
    """A Unix-timestamp version strictly greater than every numeric name in `existing`.

    Two pushes in the same second (or a clock behind the newest version) still get increasing versions.
    """
    stamp = int(time.time() if now is None else now)
    numeric = [int(name) for name in existing if name.isdigit()]
    return max([stamp, *(version + 1 for version in numeric)])


def find_pushed_version(base_dir: Path, source_id: str) -> Path | None:
    """The version dir already holding the model `source_id`, if any."""
    if not base_dir.is_dir():
        return None
    for entry in sorted(base_dir.iterdir()):
        record = entry / PUSH_RECORD
        if entry.name.isdigit() and record.is_file():
            try:
                if json.loads(record.read_text()).get("source") == source_id:
                    return entry
            except (OSError, json.JSONDecodeError):
                continue
    return None


def publish_version(source_dir: Path, base_dir: Path, source_id: str | None = None, now: float | None = None) -> Path:
    """Copies `source_dir` to `base_dir/<version>` atomically and returns the version dir.

    A model already pushed (same `source_id`, e.g. the model artifact's URI) is not pushed again:
    its existing version dir is returned, so reruns do not duplicate versions.

    Args:
        source_dir: A complete SavedModel (or any model dir).
        base_dir: The model base path; created if missing.
        source_id: Identity of the model, recorded in the version dir; default: `source_dir`.
        now: Clock override for tests.

    Raises:
        FileNotFoundError: `source_dir` does not exist.
    """
    if not source_dir.is_dir():
        raise FileNotFoundError(f"model directory {source_dir} does not exist; nothing to push")
    source_id = source_id or str(source_dir.resolve())
    existing = find_pushed_version(base_dir, source_id)
    if existing is not None:
        return existing
    base_dir.mkdir(parents=True, exist_ok=True)
    version = next_version(os.listdir(base_dir), now)
    staging = base_dir / f"{STAGING_PREFIX}{version}-{os.getpid()}"
    try:
        shutil.copytree(source_dir, staging)
        (staging / PUSH_RECORD).write_text(json.dumps({"source": source_id, "version": version}) + "\n")
        target = base_dir / str(version)
        os.rename(staging, target)  # atomic within one file system; fails if target exists
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target
