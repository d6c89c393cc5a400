"""The release record of a device model version: one JSON an OTA service reads, next to the model.

`release.json` sits in each published edge version (`<edge base>/<model>/<version>/release.json`), written into
the EdgeModel directory before it is published, so it travels with the model. It says what a fleet needs to
decide on a download without opening the model: the file's SHA-256 and size, the input spec, the labels'
digest, the SavedModel it came from, the accuracy on the host, in MediaPipe and on each verified core, and the
oldest LiteRT runtime that can run it (`min_runtime_version`, which the converter writes into the flatbuffer).

Example:
    record = release_record(export.tflite, export.labels, export.metadata)
    for version in list_releases("tfxp_output/edge"):
        print(version.model, version.version, version.record.sha256)
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ai_edge_litert.tools import flatbuffer_utils
from pydantic import ConfigDict, Field

from edge.errors import EdgeError
from foundation.contract import EDGE_MODEL_FILE
from foundation.publish import list_versions
from foundation.records import Record, RecordError, read_record

RELEASE_FILE = "release.json"
RELEASE_FORMAT = "tfxp.edge-release/1"
_MIN_RUNTIME = "min_runtime_version"


def min_runtime_version(tflite: bytes) -> str | None:
    """The `min_runtime_version` the converter recorded in the flatbuffer (e.g. `2.3.0`), if any."""
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(tflite))
    for entry in model.metadata or []:
        name = entry.name.decode() if isinstance(entry.name, bytes) else entry.name
        if name == _MIN_RUNTIME:
            data = model.buffers[entry.buffer].data
            return bytes(data).rstrip(b"\0").decode() if data is not None else None
    return None


def release_record(tflite: bytes, labels: Sequence[str], metadata: dict[str, Any]) -> dict[str, Any]:
    """The release record of a blessed export (`edge.export.EdgeExport`: its bytes, labels, metadata)."""
    arch = metadata.get("arch_check") or {}
    app = metadata.get("app_client") or {}
    accuracy = metadata["accuracy"]
    cores = []
    if arch.get("status") == "passed":
        cores.append(
            {
                "arch": arch.get("arch"),
                "cpu": arch.get("cpu"),
                "accuracy": arch.get("target_accuracy"),
                "top1_agreement": arch.get("top1_agreement"),
            }
        )
    labels_text = "".join(f"{label}\n" for label in labels)  # labels.txt as `write_label_map` writes it
    return {
        "format": RELEASE_FORMAT,
        "sha256": hashlib.sha256(tflite).hexdigest(),
        "size_bytes": len(tflite),
        "file": EDGE_MODEL_FILE,
        "mode": metadata["mode"],
        "input": {
            **metadata["input"],
            "color_space": "RGB",
            "pixel_range": [0, 255],
            # The central square (share of the shorter side) to crop before the resize; 1 = the whole frame.
            "central_crop": metadata.get("normalization", {}).get("central_crop", 1.0),
        },
        "labels": {"count": len(labels), "sha256": hashlib.sha256(labels_text.encode()).hexdigest()},
        "saved_model": metadata.get("made_from", {}).get("saved_model"),
        "identity": metadata.get("identity"),
        "accuracy": {
            "host_litert": accuracy["tflite"],
            "saved_model": accuracy["saved_model"],
            "eval_examples": accuracy["eval_examples"],
            "mediapipe": app.get("accuracy"),
            "mediapipe_agreement": app.get("agreement"),
            # On frames MediaPipe resized itself: at their own size and at the camera size (`edge.app_frame_size`).
            "mediapipe_resized": {
                name: {"frame_size": size.get("frame_size"), "accuracy": size.get("accuracy")}
                for name, size in sorted((app.get("sizes") or {}).items())
            },
            "verified_cores": cores,
        },
        "min_litert_version": min_runtime_version(tflite),
        "metadata_inside": bool(app),
    }


class _Strict(Record):
    model_config = ConfigDict(strict=True)  # merged with Record's: unknown keys kept, numbers finite


class ReleaseInput(_Strict):
    """The input spec a device feeds: the tensor's dtype and shape."""

    dtype: str
    shape: list[int]


class ReleaseAccuracy(_Strict):
    """Accuracy on the host's LiteRT and the share of top-1 answers MediaPipe agreed on (None: not measured)."""

    host_litert: float
    mediapipe_agreement: float | None = None


class ReleaseRecord(_Strict):
    """`release.json` as `tfxp edge versions` reads it back: the fields it shows (the others are kept)."""

    mode: str
    input: ReleaseInput
    size_bytes: int = Field(ge=0, le=2**63 - 1)  # a file size (off_t)
    sha256: str
    accuracy: ReleaseAccuracy
    min_litert_version: str | None = None


@dataclass(frozen=True)
class Release:
    """One published edge version and its record (None for versions published before release records)."""

    model: str
    version: str
    path: str
    record: ReleaseRecord | None


def _read_record(path: str) -> ReleaseRecord:
    """The release record at `path`, a JSON object of at most MAX_DOCUMENT_BYTES of `ReleaseRecord`'s shape.

    Raises:
        EdgeError: unreadable, too large, not JSON or not of that shape (the message names the file and field).
    """
    fix = "it was damaged or not written by tfxp: restore it, or remove it to list the version without its record"
    try:
        return read_record(path, ReleaseRecord, "release record", fix)
    except (RecordError, FileNotFoundError) as error:
        raise EdgeError(str(error)) from None


def list_releases(edge_base: str) -> list[Release]:
    """Every published version under `<edge_base>/<model>/`, models in name order, newest version first."""
    root = edge_base.rstrip("/")
    if not os.path.isdir(root):
        return []
    releases = []
    for model in sorted(os.listdir(root)):
        for path in list_versions(f"{root}/{model}", required_file=EDGE_MODEL_FILE):
            record_path = f"{path}/{RELEASE_FILE}"
            record = None
            if os.path.exists(record_path):  # a FIFO or a folder there is refused by the reader, not skipped
                record = _read_record(record_path)
            releases.append(Release(model=model, version=os.path.basename(path), path=path, record=record))
    return releases
