"""Turning a component's low-level failure into a message that names the culprit.

Beam reports a corrupt TFRecord as "Error -3 while decompressing data", without the file. Reading
every input before each run would cost a full pass over large data sets, so tfxp looks for the
culprit only after ImportExampleGen has failed.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

MAX_REPORTED = 5


def _compression(path: str) -> str:
    return "GZIP" if path.endswith((".gz", ".gzip")) else ""


def find_corrupt_tfrecords(data_path: str, max_reported: int = MAX_REPORTED) -> list[tuple[str, str]]:
    """Reads each TFRecord file under `data_path` to the end; returns (file, error) for unreadable ones.

    Args:
        data_path: The pipeline's `data.path` (files directly inside or in subfolders).
        max_reported: Stop after this many corrupt files.
    """
    pattern_roots = [data_path, f"{data_path.rstrip('/')}/*"]
    files = sorted({f for root in pattern_roots for f in tf.io.gfile.glob(f"{root}/*") if not tf.io.gfile.isdir(f)})
    corrupt: list[tuple[str, str]] = []
    for path in files:
        if Path(path).name in ("labels.txt", "schema.pbtxt") or Path(path).name.startswith("."):
            continue
        try:
            for _ in tf.data.TFRecordDataset(path, compression_type=_compression(path)):
                pass
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.OutOfRangeError) as error:
            corrupt.append((path, error.message.splitlines()[0] if error.message else type(error).__name__))
            if len(corrupt) >= max_reported:
                break
    return corrupt


def explain_failure(component: str, data_path: str) -> str | None:
    """Extra detail for a failed component, or None when there is nothing to add."""
    if component != "ImportExampleGen":
        return None
    corrupt = find_corrupt_tfrecords(data_path)
    if not corrupt:
        return None
    listed = "\n".join(f"  - {path}: {error}" for path, error in corrupt)
    return (
        f"unreadable TFRecord file(s) under data.path:\n{listed}\n"
        "Re-create them (e.g. `tfxp data from-folder ... --overwrite`) or remove them from data.path."
    )
