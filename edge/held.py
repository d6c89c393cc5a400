"""Device models held until their SavedModel is promoted (`serving.rollout: canary`).

Under a guarded rollout a blessed SavedModel goes out as the canary and may still be rolled back on live traffic;
its device model must not reach phones before that is decided. So the EdgeExporter does not publish it: it writes
the complete release (`model.tflite`, `labels.txt`, `edge_metadata.json`, `release.json`) under
`<edge model base>/tfxp_held/<key>/`, with `<key>.json` beside it naming the SavedModel it came from: its model
identity (`foundation.model_identity`, what the Pusher records as the serving version's identity) and its path
(shown to users). `settle_held` then acts on the rollout state: the held release of the model the stable version
holds is published as the next edge version (an OTA service sees it only then), and the held release of a
rolled-back version's model is dropped. It is idempotent and runs wherever the
rollout state moves: the EdgeExporter itself (the first model of a base is stable at once), the RolloutJudge, and
`tfxp rollout promote|rollback|sync|analyze --apply`.

`tfxp_held` is not a version name, so TF Serving-style listings and `find_edge_version` never see it.

Example:
    hold_edge_model(export, "edge_model", "OUT/edge/digits", "OUT/root/Trainer/model/7/Format-Serving", model=identity)
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
from foundation.bounded import parse_json, read_document
from foundation.contract import EDGE_HELD_KEY, EDGE_METADATA_FILE, EDGE_MODEL_FILE, SAVED_MODEL_FILE
from foundation.model_identity import version_identity
from foundation.publish import list_versions, next_version, publish_version, push_records, recorded_source

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
    model_identity: str = ""
    """The SavedModel's `foundation.model_identity`; "" for a release held before tfxp recorded it."""

    def describe(self) -> str:
        if self.action == "published":
            return f"edge release of {self.saved_model} published as {self.version_dir}"
        return f"edge release of {self.saved_model} dropped: its serving version was rolled back"


def held_root(model_base: str | Path) -> str:
    """`<edge model base>/tfxp_held`."""
    return f"{str(model_base).rstrip('/')}/{HELD_DIR}"


@dataclass(frozen=True)
class HeldRelease:
    """One held release: its directory and the SavedModel it came from."""

    directory: str
    saved_model: str
    model_identity: str
    """The SavedModel's `foundation.model_identity`; "" in a record written before tfxp recorded it (such a
    release is matched to its serving version by the SavedModel's path, the rule then)."""


def hold_edge_model(
    export: EdgeExport, out_dir: str | Path, model_base: str | Path, saved_model: str, *, model: str
) -> str:
    """Writes the EdgeModel into `out_dir` and the complete release under `<model_base>/tfxp_held/<key>/`,
    replacing one held before from the same model; nothing is published.

    Args:
        export: A blessed export.
        out_dir: The EdgeModel artifact's directory.
        model_base: `<edge base>/<model>`.
        saved_model: The SavedModel the export came from (recorded, shown to users).
        model: Its `foundation.model_identity`, which the Pusher records on the serving version: the key.

    Returns:
        The held release's directory.
    """
    write_edge_model(export, out_dir)
    # The artifact says the release is held, and why (the run summary's edge status `held`).
    write_metadata({**export.metadata, "pushed_path": None, EDGE_HELD_KEY: True, "reason": HELD_REASON}, out_dir)
    held = _held_dir(model_base, model)
    if tf.io.gfile.exists(held):
        tf.io.gfile.rmtree(held)
    write_edge_model(export, held)
    write_release(export, held)
    record = {"saved_model": saved_model, "model_identity": model, "identity": export.metadata["identity"]}
    _write_json(f"{held}.json", record)
    return held


def held_releases(model_base: str | Path) -> dict[str, str]:
    """The held releases under `model_base`: their SavedModel's path → the held directory."""
    return {release.saved_model: release.directory for release in _held(model_base)}


def _held(model_base: str | Path) -> list[HeldRelease]:
    root = held_root(model_base)
    if not tf.io.gfile.isdir(root):
        return []
    return [_held_release(f"{root}/{name}") for name in sorted(tf.io.gfile.listdir(root)) if name.endswith(".json")]


def _held_release(record_path: str) -> HeldRelease:
    """The held release a record describes.

    Raises:
        EdgeError: the record is not a JSON object with a text `saved_model` (the message names the file).
    """
    try:
        record = parse_json(read_document(record_path, record_path))
    except (OSError, ValueError) as error:
        record = {"error": str(error)}
    saved_model = record.get("saved_model") if isinstance(record, dict) else None
    if not isinstance(saved_model, str) or not saved_model:
        raise EdgeError(
            f"{record_path} is not a held edge release's record (a JSON object naming its `saved_model`); "
            "it was not written by tfxp or was damaged: remove it and the folder of the same name beside it, "
            "and the next run holds the release again"
        ) from None
    identity = record.get("model_identity") if isinstance(record, dict) else None
    return HeldRelease(
        directory=record_path[: -len(".json")],
        saved_model=saved_model,
        model_identity=identity if isinstance(identity, str) else "",
    )


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
    held = _held(model_base)
    if not held:
        return []
    # Each serving version: (its number, its model identity, the SavedModel path its record names).
    versions = [
        (int(Path(version_dir).name), version_identity(version_dir, record), recorded_source(record))
        for version_dir, record in push_records(str(serving_base), SAVED_MODEL_FILE).items()
    ]
    gone = set(rolled_back)
    settled = []
    for release in held:
        holding = {
            number
            for number, identity, source in versions
            if (identity == release.model_identity if release.model_identity else source == release.saved_model)
        }
        if stable is not None and stable in holding:
            published = _publish_held(release.directory, model_base)
            settled.append(Settled("published", release.saved_model, published, release.model_identity))
        elif holding & gone:
            _remove_held(release.directory)
            settled.append(Settled("dropped", release.saved_model, None, release.model_identity))
    return settled


def record_released(version_dir: str, out_dir: str | Path) -> None:
    """Gives the EdgeModel artifact `out_dir` the published version's `edge_metadata.json` (its pushed path, no
    longer held), when a held release went out in the run that made it."""
    tf.io.gfile.copy(f"{version_dir}/{EDGE_METADATA_FILE}", f"{out_dir}/{EDGE_METADATA_FILE}", overwrite=True)


def _publish_held(held_dir: str, model_base: str | Path) -> str:
    base = str(model_base).rstrip("/")
    identity = str(parse_json(read_document(f"{held_dir}.json", f"{held_dir}.json"))["identity"])
    published = find_edge_version(base, identity)
    if published is None:
        # The version is chosen first: its path goes into edge_metadata.json, as `push_edge_model` does.
        version = next_version(Path(path).name for path in list_versions(base))
        metadata_path = f"{held_dir}/{EDGE_METADATA_FILE}"
        metadata = parse_json(read_document(metadata_path, metadata_path))
        write_metadata({**metadata, "pushed_path": f"{base}/{version}"}, held_dir)
        published = publish_version(held_dir, base, identity, last_file=EDGE_MODEL_FILE, version=version)
    _remove_held(held_dir)
    return published


def _remove_held(held_dir: str) -> None:
    # The record first: a crash between the two leaves an orphan directory, never a record naming nothing.
    tf.io.gfile.remove(f"{held_dir}.json")
    tf.io.gfile.rmtree(held_dir)


def _held_dir(model_base: str | Path, model: str) -> str:
    return f"{held_root(model_base)}/{hashlib.sha256(model.encode()).hexdigest()[:16]}"


def _write_json(path: str, record: dict[str, str]) -> None:
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
