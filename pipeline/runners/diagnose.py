"""Turning a component's low-level failure into a message that names the culprit.

Beam reports a corrupt TFRecord as "Error -3 while decompressing data", without the file. Reading
every input before each run would cost a full pass over large data sets, so tfxp looks for the
culprit only after ImportExampleGen has failed.
"""

from __future__ import annotations

import tensorflow as tf

from pipeline.config import TfxpConfig
from pipeline.layout import split_patterns

MAX_REPORTED = 5


def _compression(path: str) -> str:
    return "GZIP" if path.endswith((".gz", ".gzip")) else ""


def input_patterns(config: TfxpConfig) -> list[str]:
    """The globs ImportExampleGen reads for this config (a resolved `data.split`)."""
    base = config.data.path.rstrip("/")
    return [f"{base}/{pattern}" for pattern in split_patterns(config).values()]


def find_corrupt_tfrecords(patterns: list[str], max_reported: int = MAX_REPORTED) -> list[tuple[str, str]]:
    """Reads each TFRecord file matching `patterns` to the end; returns (file, error) for unreadable ones.

    Args:
        patterns: Globs of TFRecord files (`input_patterns`).
        max_reported: Stop after this many corrupt files.
    """
    files = sorted({f for pattern in patterns for f in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(f)})
    corrupt: list[tuple[str, str]] = []
    for path in files:
        try:
            for _ in tf.data.TFRecordDataset(path, compression_type=_compression(path)):
                pass
        except tf.errors.OpError as error:
            corrupt.append((path, error.message.splitlines()[0] if error.message else type(error).__name__))
            if len(corrupt) >= max_reported:
                break
    return corrupt


def explain_failure(component: str, config: TfxpConfig) -> str | None:
    """Extra detail for a failed component, or None when there is nothing to add (never raises)."""
    if component != "ImportExampleGen":
        return None
    try:
        corrupt = find_corrupt_tfrecords(input_patterns(config))
    except Exception:  # the diagnosis must never hide the component's own failure
        return None
    if not corrupt:
        return None
    listed = "\n".join(f"  - {path}: {error}" for path, error in corrupt)
    return (
        f"unreadable TFRecord file(s) under data.path:\n{listed}\n"
        "Re-create them (e.g. `tfxp data from-folder ... --overwrite`) or remove them from data.path."
    )
