"""Publishing a model version so a polling model server never sees it half-written.

TF Serving polls a model base path and loads any new numeric subdirectory. tfxp copies the model into
a hidden staging directory beside the versions (TF Serving ignores non-numeric names) and renames it
into place: on one file system the rename is atomic.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

STAGING_PREFIX = ".staging-"


def next_version(existing: Iterable[str], now: float | None = None) -> int:
    """A Unix-timestamp version strictly greater than every numeric name in `existing`.

    Two pushes in the same second (or a clock behind the newest version) still get increasing versions.
    """
    stamp = int(time.time() if now is None else now)
    numeric = [int(name) for name in existing if name.isdigit()]
    return max([stamp, *(version + 1 for version in numeric)])


def publish_version(source_dir: Path, base_dir: Path, now: float | None = None) -> Path:
    """Copies `source_dir` to `base_dir/<version>` atomically and returns the version dir.

    Args:
        source_dir: A complete SavedModel (or any model dir).
        base_dir: The model base path; created if missing.
        now: Clock override for tests.

    Raises:
        FileNotFoundError: `source_dir` does not exist.
    """
    if not source_dir.is_dir():
        raise FileNotFoundError(f"model directory {source_dir} does not exist; nothing to push")
    base_dir.mkdir(parents=True, exist_ok=True)
    version = next_version(os.listdir(base_dir), now)
    staging = base_dir / f"{STAGING_PREFIX}{version}-{os.getpid()}"
    try:
        shutil.copytree(source_dir, staging)
        target = base_dir / str(version)
        os.rename(staging, target)  # atomic within one file system; fails if target exists
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target
