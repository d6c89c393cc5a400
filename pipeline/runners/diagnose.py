"""Turning a component's low-level failure into a message that names the culprit.

Beam reports a corrupt TFRecord as "Error -3 while decompressing data", without the file, and the
ExampleValidator sees statistics, not files. Reading every input before each run would cost a full pass
over large data sets, so tfxp looks for the culprit only after a component has failed: the unreadable
file, the empty file, the record that is not an image.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import tensorflow as tf

from foundation.data.record_frames import record_frames_problem
from pipeline.config import TfxpConfig
from pipeline.layout import split_patterns

MAX_REPORTED = 5
SCAN_SECONDS = 120.0  # reading the inputs for a diagnosis: at most this long, then say what was left
IMAGE_FEATURE = "image/encoded"


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
        problem = record_frames_problem(path)  # TensorFlow's reader would allocate what a header declares
        if problem is not None:
            corrupt.append((path, problem))
            if len(corrupt) >= max_reported:
                break
            continue
        try:
            for _ in tf.data.TFRecordDataset(path, compression_type=_compression(path)):
                pass
        except tf.errors.OpError as error:
            corrupt.append((path, error.message.splitlines()[0] if error.message else type(error).__name__))
            if len(corrupt) >= max_reported:
                break
    return corrupt


@dataclass
class RecordScan:
    """What `scan_records` found in the input files.

    Attributes:
        counts: File → its number of records (files read to the end only).
        not_images: File → the indices of its records whose image the model refuses (`served_format_error`).
        formats: File → those records' formats (`refused_format`).
        unread: Files left unread when the time budget ran out.
    """

    counts: dict[str, int] = field(default_factory=dict)
    not_images: dict[str, list[int]] = field(default_factory=dict)
    formats: dict[str, Counter[str]] = field(default_factory=dict)
    unread: int = 0


def scan_records(patterns: list[str], budget_seconds: float = SCAN_SECONDS) -> RecordScan:
    """Counts each input file's records and finds those whose `image/encoded` the model does not accept.

    Judges the magic bytes only (no decoding), and starts no new file after `budget_seconds`.

    Args:
        patterns: Globs of TFRecord files (`input_patterns`).
        budget_seconds: Time for the whole scan; files not started by then are counted in `unread`.
    """
    from components.validation.data_checks import refused_format
    from foundation.contract import IMAGE_KEY

    files = sorted({f for pattern in patterns for f in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(f)})
    deadline = time.monotonic() + budget_seconds
    scan = RecordScan()
    for number, path in enumerate(files):
        if time.monotonic() > deadline:
            scan.unread = len(files) - number
            break
        if record_frames_problem(path) is not None:  # ImportExampleGen's diagnosis names it
            continue
        count = 0
        for count, record in enumerate(tf.data.TFRecordDataset(path, compression_type=_compression(path)), 1):
            feature = tf.train.Example.FromString(record.numpy()).features.feature.get(IMAGE_KEY)
            value = feature.bytes_list.value[0] if feature is not None and feature.bytes_list.value else b""
            refused = refused_format(value)
            if refused is not None:
                scan.not_images.setdefault(path, []).append(count - 1)
                scan.formats.setdefault(path, Counter())[refused] += 1
        scan.counts[path] = count
    return scan


def _describe_scan(scan: RecordScan) -> str | None:
    lines = []
    empty = [path for path, count in scan.counts.items() if count == 0]
    if empty:
        lines.append("input files with 0 records:\n" + "\n".join(f"  - {path}" for path in empty[:MAX_REPORTED]))
    if scan.not_images:
        listed = []
        for path, indices in list(scan.not_images.items())[:MAX_REPORTED]:
            first = ", ".join(map(str, indices[:MAX_REPORTED])) + (", …" if len(indices) > MAX_REPORTED else "")
            formats = ", ".join(f"{count} {name}" for name, count in scan.formats[path].most_common())
            listed.append(f"  - {path}: {len(indices)} of {scan.counts[path]} records ({formats}; record {first})")
        lines.append(f"records whose {IMAGE_FEATURE} the model does not accept, by file:\n" + "\n".join(listed))
    if lines and scan.unread:
        lines.append(f"({scan.unread} more files not scanned)")
    return "\n".join(lines) or None


def explain_failure(component: str, config: TfxpConfig, error: BaseException | None = None) -> str | None:
    """Extra detail for a failed component, or None when there is nothing to add (never raises).

    ImportExampleGen: the unreadable files. ExampleValidator, and a Trainer that failed on an image: the input
    files with 0 records and the first records that are not images, by file and record number.
    """
    try:
        if component in ("ExampleValidator", "Trainer"):
            if component == "Trainer" and "image" not in str(error).lower():
                return None
            return _describe_scan(scan_records(input_patterns(config)))
        if component != "ImportExampleGen":
            return None
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
