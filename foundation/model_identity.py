"""One model identity: what a model holds (its SavedModel fingerprint, label map and preprocessing), not where it lies.

The Pusher decides what counts as already pushed by it, the EdgeExporter names the device model's inputs by it,
held edge releases (`edge.held`) wait for the serving version that holds it, and the run summary and the run
notice check that the version they name holds it. A path cannot be the identity: the Trainer's output path is
`<root>/Trainer/model/<execution id>/Format-Serving`, and execution ids restart when the pipeline root and its ML
Metadata are removed while `serving/` and `edge/` are kept, so a new model lands at a path an earlier one used.

The identity hashes three things, all read from the SavedModel directory (a pushed version is a copy of it, so a
version's identity can be read back from its files):

- the SavedModel's fingerprint (`fingerprint.pb`, written by TensorFlow ≥ 2.12 on save,
  `tf.saved_model.experimental.read_fingerprint`): the checksums of its graph, signatures, object graph and
  checkpoint (the checkpoint hash follows the weights); a SavedModel without one (older TensorFlow, another
  tool) is hashed by the bytes of `saved_model.pb` and the variables' index (which holds each tensor's checksum);
- the label map (`assets/labels.txt`, as `foundation.contract.parse_label_map` reads it): a renamed class is
  another model, although the fingerprint (which hashes asset names, not contents) is the same;
- the preprocessing spec (`assets/preprocessing.json`).

What the Pusher and the run decide by is a version's identity read from its files (`files_identity`), never taken
from its push record: the files can change after the push (a hand-edited label map), and the record would then
name a model the version no longer holds (`changed_versions` finds such versions, so the Pusher pushes the model
again and says why; `version_identity`, which held edge releases use, still reads the record first). Push
records written before the identity named the SavedModel's path (`identity` was a path); only where a version's
files cannot be read is that path compared.

Example:
    identity = model_identity("root/Trainer/model/7/Format-Serving")  # "model:3f1c…"
    already = find_model_version("tfxp_output/serving/digits", identity, "root/Trainer/model/7/Format-Serving")
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from foundation import paths
from foundation.contract import LABELS_ASSET, PREPROCESSING_ASSET, SAVED_MODEL_FILE, LabelMapError, read_label_map
from foundation.errors import TfxpError
from foundation.preprocessing_spec import PreprocessingSpec
from foundation.publish import push_identity, push_records, recorded_source

IDENTITY_PREFIX = "model:"
MODEL_IDENTITY_PROPERTY = "model_identity"
"""The PushedModel artifact's custom property (and held edge records' key) holding the pushed model's identity."""
FINGERPRINT_FILE = "fingerprint.pb"
VARIABLES_INDEX = "variables/variables.index"
# The fields of TensorFlow's FingerprintDef (tensorflow/core/protobuf/fingerprint.proto) that say what a
# SavedModel holds.
_FINGERPRINT_FIELDS = (
    "saved_model_checksum",
    "graph_def_program_hash",
    "signature_def_hash",
    "saved_object_graph_hash",
    "checkpoint_hash",
)


class ModelIdentityError(TfxpError, ValueError):
    """A directory whose model identity cannot be read (no readable `saved_model.pb`); names the directory."""


def is_model_identity(text: str) -> bool:
    """Whether `text` is a model identity (`model:<sha256>`), not a path from a push record written before it."""
    return text.startswith(IDENTITY_PREFIX)


def model_identity(saved_model: str | Path) -> str:
    """`model:<sha256>` of what the SavedModel holds (see the module docstring).

    Args:
        saved_model: A SavedModel directory, or a published version of one (local or bucket).

    Raises:
        ModelIdentityError: the directory holds no readable `saved_model.pb`.
    """
    text = json.dumps(identity_parts(saved_model), sort_keys=True)
    return IDENTITY_PREFIX + hashlib.sha256(text.encode()).hexdigest()


def identity_parts(saved_model: str | Path) -> dict[str, Any]:
    """What `model_identity` hashes: the fingerprint (or the graph and index digest), the class names and the
    preprocessing spec (None for an asset the model lacks)."""
    root = str(saved_model).rstrip("/")
    return {
        "saved_model": _saved_model_part(root),
        "labels": _labels_part(root),
        "preprocessing": _preprocessing_part(root),
    }


def _saved_model_part(root: str) -> dict[str, Any]:
    if paths.exists(f"{root}/{FINGERPRINT_FILE}"):
        import tensorflow as tf

        try:
            fingerprint = tf.saved_model.experimental.read_fingerprint(root)
        except (FileNotFoundError, RuntimeError, ValueError, tf.errors.OpError) as error:  # RuntimeError: damaged
            raise ModelIdentityError(f"cannot read {root}/{FINGERPRINT_FILE}: {error}") from None
        return {"fingerprint": {name: int(getattr(fingerprint, name)) for name in _FINGERPRINT_FIELDS}}
    digest = hashlib.sha256()
    for name in (SAVED_MODEL_FILE, VARIABLES_INDEX):
        try:
            data = paths.read_bytes(f"{root}/{name}")
        except FileNotFoundError:
            if name == SAVED_MODEL_FILE:
                raise ModelIdentityError(f"{root} holds no {SAVED_MODEL_FILE}; it is not a SavedModel") from None
            continue
        except OSError as error:
            raise ModelIdentityError(f"cannot read {root}/{name}: {error}") from None
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return {"files_sha256": digest.hexdigest()}


def _labels_part(root: str) -> list[str] | dict[str, str] | None:
    path = f"{root}/{LABELS_ASSET}"
    if not paths.exists(path):
        return None
    try:
        return read_label_map(path)
    except LabelMapError:  # not ours to judge here: the content still names the model
        return {"sha256": _file_digest(path)}


def _preprocessing_part(root: str) -> str | dict[str, str] | None:
    path = f"{root}/{PREPROCESSING_ASSET}"
    if not paths.exists(path):
        return None
    try:
        return PreprocessingSpec.from_json(paths.read_text(path)).to_json()
    except (ValueError, TypeError):
        return {"sha256": _file_digest(path)}


def _file_digest(path: str) -> str:
    return hashlib.sha256(paths.read_bytes(path)).hexdigest()


def version_identity(version_dir: str, record: Mapping[str, Any] | None) -> str | None:
    """The model identity a published version's push record names, or, for a record written before the identity
    (whose `identity` is a path), the identity of the version's own files; None when neither can be read. What
    the Pusher and the run summary decide by is `files_identity`: the files can change after the push."""
    recorded = push_identity(record)
    if is_model_identity(recorded):
        return recorded
    return files_identity(version_dir)


def files_identity(version_dir: str) -> str | None:
    """The model identity of a published version read from its own files, never taken from its push record: a
    version's files can change after the push (a hand-edited `assets/labels.txt`), and then it holds another model
    than its record says. None when the files cannot be read."""
    try:
        return model_identity(version_dir)
    except (ModelIdentityError, OSError):
        return None


def holds_model(version_dir: str, record: Mapping[str, Any] | None, identity: str, saved_model: str = "") -> bool:
    """Whether the version holds the model `identity`: by the identity of its files (`files_identity`); only
    when they cannot be read, by the SavedModel path its record names (the rule before the identity)."""
    found = files_identity(version_dir)
    if found is not None:
        return found == identity
    return bool(saved_model) and recorded_source(record) == saved_model


def find_model_version(base: str | Path, identity: str, saved_model: str = "") -> str | None:
    """The newest complete version under `base` that holds the model `identity` (`holds_model`), if any.

    Args:
        base: The serving model base path (`<serving base>/<model>`).
        identity: `model_identity` of the model.
        saved_model: The model's SavedModel path, compared only with versions whose identity cannot be read.
    """
    for version_dir, record in push_records(base, SAVED_MODEL_FILE).items():
        if holds_model(version_dir, record, identity, saved_model):
            return version_dir
    return None


def version_holds(version_dir: str, identity: str) -> bool:
    """Whether a version directory holds the model `identity`, read back from the version's files: what a run
    says it published is checked against what is on disk."""
    return files_identity(version_dir) == identity


_PART_FILES = {"saved_model": "the SavedModel", "labels": LABELS_ASSET, "preprocessing": PREPROCESSING_ASSET}


def changed_versions(base: str | Path, identity: str, saved_model: str) -> dict[str, list[str]]:
    """The versions under `base` whose push record names the model `identity` but whose files no longer hold it
    (edited since the push), each with what differs from the model at `saved_model` (`assets/labels.txt`, ...).

    Example:
        changed_versions("out/serving/digits", identity, model_path)  # {"out/serving/digits/17": ["assets/labels.txt"]}
    """
    changed: dict[str, list[str]] = {}
    for version_dir, record in push_records(base, SAVED_MODEL_FILE).items():
        if push_identity(record) != identity or version_holds(version_dir, identity):
            continue
        try:
            found, model = identity_parts(version_dir), identity_parts(saved_model)
        except (ModelIdentityError, OSError):
            changed[version_dir] = ["its files (unreadable)"]
            continue
        changed[version_dir] = [name for key, name in _PART_FILES.items() if found[key] != model[key]]
    return changed
