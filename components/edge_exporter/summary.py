"""The run summary's edge fields, read from an EdgeModel artifact directory (its `edge_metadata.json`).

Example (the run summary, given the EdgeExporter's `edge_model` artifact URI from MLMD):
    fields = edge_summary(edge_model_uri)
    summary["edge_model_path"] = fields["edge_model_path"]
    summary["metrics"].update(fields["metrics"])
    summary["edge"] = fields["edge"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edge.errors import EdgeError
from foundation.bounded import parse_json, read_document
from foundation.contract import EDGE_HELD_KEY, EDGE_METADATA_FILE, EDGE_MODEL_FILE


def edge_summary(edge_model_uri: str | Path) -> dict[str, Any]:
    """Summary fields of one EdgeExporter run.

    Args:
        edge_model_uri: The EdgeModel artifact's directory (local or a bucket URI).

    Returns:
        `edge_model_path`: the pushed `model.tflite` (None when not pushed);
        `edge`: {`status` (`pushed`, `already_published` (the same inputs made a version before, which stays
        the device model; `version` names it), `held` (blessed, and published once its SavedModel is promoted:
        `serving.rollout: canary`, `edge.held`), `not_blessed` or `skipped`), `blessed`, `reason`, `mode`, `io_dtype`,
        `arch_check` (the `edge.verify` check's status, reason and figures; None when not asked for)};
        `metrics`: `edge_accuracy`, `edge_saved_model_accuracy`, `edge_accuracy_drop`, `edge_size_bytes`,
        `edge_latency_p50_ms`, `edge_latency_p99_ms` (empty when skipped).

    Raises:
        EdgeError: the directory has no readable `edge_metadata.json`.
    """
    path = f"{str(edge_model_uri).rstrip('/')}/{EDGE_METADATA_FILE}"
    try:
        metadata = parse_json(read_document(path, path))  # through tf.io.gfile: a gs:// pipeline root too
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8
        raise EdgeError(f"cannot read the EdgeExporter's {path}: {error}; was the EdgeExporter run?") from None
    pushed = metadata.get("pushed_path")
    status = "skipped" if metadata.get("skipped") else "pushed" if pushed else "not_blessed"
    if status == "not_blessed" and metadata.get(EDGE_HELD_KEY):
        status = "held"
    if status == "pushed" and metadata.get("reused_version"):
        status = "already_published"
    fields: dict[str, Any] = {
        "edge_model_path": f"{pushed}/{EDGE_MODEL_FILE}" if pushed else None,
        "edge": {
            "status": status,
            "blessed": bool(metadata.get("blessed")),
            "reason": metadata.get("reason", ""),
            "mode": metadata.get("mode"),
            "io_dtype": metadata.get("io_dtype"),
            "arch_check": metadata.get("arch_check"),
            "version": pushed.rstrip("/").rsplit("/", 1)[-1] if pushed else None,
        },
        "metrics": {},
    }
    if status != "skipped":
        accuracy, latency = metadata["accuracy"], metadata["latency"]
        fields["metrics"] = {
            "edge_accuracy": accuracy["tflite"],
            "edge_saved_model_accuracy": accuracy["saved_model"],
            "edge_accuracy_drop": accuracy["drop"],
            "edge_size_bytes": metadata["size_bytes"],
            "edge_latency_p50_ms": latency["p50_ms"],
            "edge_latency_p99_ms": latency["p99_ms"],
        }
        # MediaPipe's accuracy on frames it resized itself, as apps feed it (`edge.gate.check_app_client`).
        for name, size in sorted(((metadata.get("app_client") or {}).get("sizes") or {}).items()):
            fields["metrics"][f"edge_mediapipe_accuracy_{name}_size"] = size.get("accuracy")
    return fields
