"""Device models held until their SavedModel is promoted (`serving.rollout: canary`).

Under a guarded rollout a blessed SavedModel goes out as the canary and may still be rolled back on live traffic;
its device model must not reach phones before that is decided. So the EdgeExporter does not publish it: it writes
the complete release (`model.tflite`, `labels.txt`, `edge_metadata.json`, `release.json`) under
`<edge model base>/tfxp_held/<key>/`, with `<key>.json` beside it naming the SavedModel it came from (the same
path the Pusher records as the serving version's identity, `foundation.publish`). `settle_held` then acts on the
rollout state: the held release of the stable version is published as the next edge version (an OTA service sees
it only then), and the held release of a rolled-back version is dropped. It is idempotent and runs wherever the
rollout state moves: the EdgeExporter itself (the first model of a base is stable at once), the RolloutJudge, and
`tfxp rollout promote|rollback|sync|analyze --apply`.

`tfxp_held` is not a version name, so TF Serving-style listings and `find_edge_version` never see it.

Example:
    hold_edge_model(export, "edge_model", "OUT/edge/digits", saved_model="OUT/root/Trainer/model/7/Format-Serving")
    settle_held("OUT/edge/digits", "OUT/serving/digits", stable=1796090000, rolled_back=())
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import tensorflow as tf

from edge.errors import EdgeError
from edge.publish import find_edge_version, write_edge_model, write_metadata, write_release
from foundation.bounded import read_document
from foundation.contract import EDGE_HELD_KEY, EDGE_METADATA_FILE, EDGE_MODEL_FILE, SAVED_MODEL_FILE
from foundation.publish import list_versions, next_version, publish_version, push_identity, push_records

if TYPE_CHECKING:
    from edge.export import EdgeExport

HELD_DIR = "tfxp_held"
HELD_REASON = "held until its SavedModel is promoted to stable (serving.rollout: canary)"


@dataclass(frozen=True)
class Settled:
    """What `settle_held` did with one held release."""

    action: Literal["published", "dropped"]
    saved_model: str
    version_dir: str | None
    """The published edge version (`published`); None when dropped."""

    def describe(self) -> str:
        if self.action == "published":
            return f"edge release of {self.saved_model} published as {self.version_dir}"
        return f"edge release of {self.saved_model} dropped: its serving version was rolled back"


def held_root(model_base: str | Path) -> str:
    """`<edge model base>/tfxp_held`."""
    return f"{str(model_base).rstrip('/')}/{HELD_DIR}"


def hold_edge_model(export: EdgeExport, out_dir: str | Path, model_base: str | Path, saved_model: str) -> str:
    """Writes the EdgeModel into `out_dir` and the complete release under `<model_base>/tfxp_held/<key>/`,
    replacing one held before from the same SavedModel; nothing is published.

    Args:
        export: A blessed export.
        out_dir: The EdgeModel artifact's directory.
        model_base: `<edge base>/<model>`.
        saved_model: The SavedModel the export came from, as the Pusher records it (the serving identity).

    Returns:
        The held release's directory.
    """
    write_edge_model(export, out_dir)
    # The artifact says the release is held, and why (the run summary's edge status `held`).
    write_metadata({**export.metadata, "pushed_path": None, EDGE_HELD_KEY: True, "reason": HELD_REASON}, out_dir)
    held = _held_dir(model_base, saved_model)
    if tf.io.gfile.exists(held):
        tf.io.gfile.rmtree(held)
    write_edge_model(export, held)
    write_release(export, held)
    record = {"saved_model": saved_model, "identity": export.metadata["identity"]}
    _write_json(f"{held}.json", record)
    return held


def held_releases(model_base: str | Path) -> dict[str, str]:
    """The held releases under `model_base`: their SavedModel → the held directory."""
    root = held_root(model_base)
    if not tf.io.gfile.isdir(root):
        return {}
    held = {}
    for name in sorted(tf.io.gfile.listdir(root)):
        if name.endswith(".json"):
            held[_held_saved_model(f"{root}/{name}")] = f"{root}/{name[: -len('.json')]}"
    return held


def _held_saved_model(record_path: str) -> str:
    """The SavedModel a held release's record names.

    Raises:
        EdgeError: the record is not a JSON object with a text `saved_model` (the message names the file).
    """
    try:
        record = json.loads(read_document(record_path, record_path))
    except (OSError, ValueError) as error:
        record = {"error": str(error)}
    saved_model = record.get("saved_model") if isinstance(record, dict) else None
    if not isinstance(saved_model, str) or not saved_model:
        raise EdgeError(
            f"{record_path} is not a held edge release's record (a JSON object naming its `saved_model`); "
            "it was not written by tfxp or was damaged: remove it and the folder of the same name beside it, "
            "and the next run holds the release again"
        ) from None
    return saved_model


def settle_held(
    model_base: str | Path, serving_base: str | Path, stable: int | None, rolled_back: Iterable[int]
) -> list[Settled]:
    """Publishes the held release whose SavedModel is the stable serving version and drops those of rolled-back
    versions; the others (a canary still judged, a model not pushed yet) stay held.

    Args:
        model_base: `<edge base>/<model>`.
        serving_base: The serving model's base path, whose push records map each version to its SavedModel.
        stable: The rollout state's stable version.
        rolled_back: Its rolled-back versions.

    Returns:
        What was done, one entry per release published or dropped.
    """
    held = held_releases(model_base)
    if not held:
        return []
    version_of = {
        push_identity(record): int(Path(version_dir).name)
        for version_dir, record in push_records(str(serving_base), SAVED_MODEL_FILE).items()
    }
    gone = set(rolled_back)
    settled = []
    for saved_model, held_dir in held.items():
        version = version_of.get(saved_model)
        if version is not None and version == stable:
            settled.append(Settled("published", saved_model, _publish_held(held_dir, model_base)))
        elif version is not None and version in gone:
            _remove_held(held_dir)
            settled.append(Settled("dropped", saved_model, None))
    return settled


def record_released(version_dir: str, out_dir: str | Path) -> None:
    """Gives the EdgeModel artifact `out_dir` the published version's `edge_metadata.json` (its pushed path, no
    longer held), when a held release went out in the run that made it."""
    tf.io.gfile.copy(f"{version_dir}/{EDGE_METADATA_FILE}", f"{out_dir}/{EDGE_METADATA_FILE}", overwrite=True)


def _publish_held(held_dir: str, model_base: str | Path) -> str:
    base = str(model_base).rstrip("/")
    identity = str(json.loads(read_document(f"{held_dir}.json", f"{held_dir}.json"))["identity"])
    published = find_edge_version(base, identity)
    if published is None:
        # The version is chosen first: its path goes into edge_metadata.json, as `push_edge_model` does.
        version = next_version(Path(path).name for path in list_versions(base))
        metadata_path = f"{held_dir}/{EDGE_METADATA_FILE}"
        metadata = json.loads(read_document(metadata_path, metadata_path))
        write_metadata({**metadata, "pushed_path": f"{base}/{version}"}, held_dir)
        published = publish_version(held_dir, base, identity, last_file=EDGE_MODEL_FILE, version=version)
    _remove_held(held_dir)
    return published


def _remove_held(held_dir: str) -> None:
    # The record first: a crash between the two leaves an orphan directory, never a record naming nothing.
    tf.io.gfile.remove(f"{held_dir}.json")
    tf.io.gfile.rmtree(held_dir)


def _held_dir(model_base: str | Path, saved_model: str) -> str:
    return f"{held_root(model_base)}/{hashlib.sha256(saved_model.encode()).hexdigest()[:16]}"


def _write_json(path: str, record: dict[str, str]) -> None:
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
