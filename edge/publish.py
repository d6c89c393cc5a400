"""Writing a device export as the EdgeModel directory and publishing it as `<edge base>/<model>/<version>/`.

`write_edge_model` lays out the EdgeModel directory (`model.tflite`, `labels.txt`, `edge_metadata.json`) and
`push_edge_model` writes it and publishes it (`foundation.publish`: staged beside the versions, renamed when
complete), under the version identity of `edge.inputs`. `find_edge_version` finds a version published from the
same inputs, and `reuse_published` fills the EdgeModel directory from it instead of converting again.

Example:
    if (published := find_edge_version("tfxp_output/edge/digits", inputs.identity)) is not None:
        reuse_published(published, "edge_model")
    elif export.blessed:
        pushed = push_edge_model(export, "edge_model", "tfxp_output/edge/digits")
    else:
        write_edge_model(export, "edge_model")
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from edge.errors import EdgeError
from edge.release import RELEASE_FILE, release_record
from foundation.bounded import parse_json
from foundation.contract import EDGE_METADATA_FILE, EDGE_MODEL_FILE, LABELS_FILE, write_label_map
from foundation.publish import find_published, list_versions, next_version, publish_version

if TYPE_CHECKING:
    from edge.export import EdgeExport

EDGE_FILES = (EDGE_MODEL_FILE, LABELS_FILE, EDGE_METADATA_FILE)


def write_edge_model(export: EdgeExport, out_dir: str | Path, pushed_path: str | None = None) -> None:
    """Writes `model.tflite`, `labels.txt` and `edge_metadata.json` (with `pushed_path`) into `out_dir`."""
    tf.io.gfile.makedirs(str(out_dir))
    with tf.io.gfile.GFile(f"{out_dir}/{EDGE_MODEL_FILE}", "wb") as handle:
        handle.write(export.tflite)
    write_label_map(f"{out_dir}/{LABELS_FILE}", export.labels)
    write_metadata({**export.metadata, "pushed_path": pushed_path}, out_dir)


def write_metadata(metadata: dict[str, Any], out_dir: str | Path) -> None:
    """Writes `edge_metadata.json` into `out_dir` (also for a skipped export, with its reason)."""
    tf.io.gfile.makedirs(str(out_dir))
    with tf.io.gfile.GFile(f"{out_dir}/{EDGE_METADATA_FILE}", "w") as handle:
        handle.write(json.dumps(metadata, indent=2, sort_keys=True) + "\n")


def find_edge_version(model_base: str | Path, identity: str) -> str | None:
    """The version directory under `model_base` published from the same inputs (`EdgeInputs.identity`), if any;
    a bucket version whose `model.tflite` never arrived does not count."""
    return find_published(str(model_base).rstrip("/"), identity, required_file=EDGE_MODEL_FILE)


def push_edge_model(export: EdgeExport, out_dir: str | Path, model_base: str | Path) -> str:
    """Writes the EdgeModel into `out_dir` and publishes it as `<model_base>/<version>/` (`foundation.publish`).

    The version's identity is `export.metadata["identity"]` (`edge.inputs.EdgeInputs.identity`): a model made
    from inputs published before is not published again, and its version is the pushed path. On buckets
    `model.tflite` is moved in last, so a reader that waits for it sees complete labels and metadata. The version
    also gets `release.json` (`edge.release`), the record an OTA service reads.

    Args:
        export: A blessed export.
        out_dir: The EdgeModel artifact's directory; `edge_metadata.json` records the pushed path.
        model_base: The device model's base directory, `<edge base>/<model>` (e.g. `OUT/edge/digits`).

    Returns:
        The version directory holding the model.
    """
    base = str(model_base).rstrip("/")
    identity = export.metadata["identity"]
    existing = find_edge_version(base, identity)
    if existing is not None:
        write_edge_model(export, out_dir, existing)
        return existing
    # The version is chosen first: its path goes into edge_metadata.json, which is pushed with the model.
    version = next_version(os.path.basename(path) for path in list_versions(base))
    write_edge_model(export, out_dir, f"{base}/{version}")
    write_release(export, out_dir)
    return publish_version(out_dir, base, identity, last_file=EDGE_MODEL_FILE, version=version)


def write_release(export: EdgeExport, out_dir: str | Path) -> None:
    """Writes `release.json` (`edge.release`), the OTA service's record, into `out_dir`, to be published along."""
    with tf.io.gfile.GFile(f"{out_dir}/{RELEASE_FILE}", "w") as handle:
        record = release_record(export.tflite, export.labels, export.metadata)
        handle.write(json.dumps(record, indent=2, sort_keys=True) + "\n")


def reuse_published(version_dir: str, out_dir: str | Path) -> dict[str, Any]:
    """Fills the EdgeModel directory `out_dir` from a published version made from the same inputs.

    Nothing is converted or evaluated again: the files are the published ones, and `edge_metadata.json` keeps
    their accuracy and latency figures, with `reused_version` and a reason saying so.

    Returns:
        The metadata written to `out_dir`.

    Raises:
        EdgeError: the version's files cannot be read.
    """
    version = os.path.basename(version_dir.rstrip("/"))
    tf.io.gfile.makedirs(str(out_dir))
    try:
        for name in (EDGE_MODEL_FILE, LABELS_FILE, RELEASE_FILE):
            if name == RELEASE_FILE and not tf.io.gfile.exists(f"{version_dir}/{name}"):
                continue  # a version pushed before release records
            tf.io.gfile.copy(f"{version_dir}/{name}", f"{out_dir}/{name}", overwrite=True)
        with tf.io.gfile.GFile(f"{version_dir}/{EDGE_METADATA_FILE}") as handle:
            published = parse_json(handle.read())
    except (tf.errors.OpError, ValueError) as error:
        raise EdgeError(
            f"edge version {version_dir} is published from the same inputs but cannot be read ({error}); "
            "remove that version directory to publish the model again"
        ) from None
    reason = (
        f"already published as version {version} (same SavedModel, edge options and calibration sample); "
        "not converted again"
    )
    metadata = {**published, "reused_version": version, "pushed_path": version_dir, "reason": reason}
    write_metadata(metadata, out_dir)
    return metadata
