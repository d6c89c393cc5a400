"""The Pusher's driver: its cache key follows the versions under its push destination.

A cached Pusher execution says "pushed to `<base>/<version>`"; that is only true while the version exists. An
operator who rolls a push back (`rm -rf <base>/<version>`) restores the serving base path to what it was before
that push, so the same run again would find every component, the Pusher included, in the cache, and report a
version that no longer exists. The fingerprint therefore names the complete versions present now and, from ML
Metadata, the versions earlier Pusher executions pushed this same model to that are gone: the removal changes
the cache key, the Pusher reruns and publishes the model again (as a new version, since its old one is gone).
Nothing changed on disk, nothing removed: the fingerprint is stable and the Pusher stays cached. Each version
with a push record is named with a digest of the model identity it records (`foundation.model_identity`), so a
version that now holds another model under the same name (a serving base restored from elsewhere) reruns the
Pusher too, which then finds or publishes a version holding its own model; so does a version whose files no longer
hold what its record names (the digest covers the identity read back from its files).

Example fingerprints: `none` (nothing pushed yet), `1796094230:5f0c1d2e9a8b,1796094188`,
`1796094188;gone:1796094230`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.proto import pusher_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from components.fingerprint_driver import FingerprintDriver
from foundation.contract import SAVED_MODEL_FILE
from foundation.model_identity import files_identity
from foundation.paths import name_of
from foundation.publish import list_versions, push_identity, read_push_record

# The execution property the driver sets (TFX's PusherSpec does not declare it; the launcher passes it on).
PUSHED_FINGERPRINT_KEY = "pushed_fingerprint"
# What TFX's Pusher records on its PushedModel artifact.
PUSHED_PROPERTY = "pushed"
PUSHED_DESTINATION_PROPERTY = "pushed_destination"


def pushed_fingerprint(base: str, earlier_pushes: Iterable[str] = ()) -> str:
    """The complete versions under `base`, newest first, and those of `earlier_pushes` that are gone.

    Args:
        base: The push destination's base directory (`<serving base>/<model>`).
        earlier_pushes: `<base>/<version>` directories that earlier executions pushed this model to; those
            under another base path are ignored.

    Returns:
        `none` or the comma-separated versions (with their recorded identity's digest), followed by
        `;gone:<versions>` when an earlier push is gone.
    """
    root = base.rstrip("/")
    versions = list_versions(root, required_file=SAVED_MODEL_FILE)
    present = [name_of(path) for path in versions]
    pushed = {tuple(path.rstrip("/").rsplit("/", 1)) for path in earlier_pushes if "/" in path.rstrip("/")}
    gone = sorted({version for parent, version in pushed if parent == root and version not in present})
    text = ",".join(_with_identity(path) for path in versions) or "none"
    return f"{text};gone:{','.join(gone)}" if gone else text


def _with_identity(version_dir: str) -> str:
    """`<version>:<12 hex of what its push record says it holds and what its files hold>`, or `<version>` for a
    version without a record (another tool's): a version whose model was replaced under the same name, or whose
    files were edited since the push (its labels.txt, say), changes the key, so the Pusher reruns rather than
    report a version that holds another model."""
    recorded = push_identity(read_push_record(version_dir))
    name = name_of(version_dir)
    if not recorded:
        return name
    found = files_identity(version_dir) or ""
    return f"{name}:{hashlib.sha256(f'{recorded}|{found}'.encode()).hexdigest()[:12]}"


def earlier_pushes(store: metadata_store.MetadataStore, model_ids: Sequence[int]) -> list[str]:
    """The destinations of every push recorded for the given Model artifacts: the `pushed_destination` of the
    PushedModel outputs of executions (cached ones included) that read one of them."""
    if not model_ids:
        return []
    reads = store.get_events_by_artifact_ids(list(model_ids))
    executions = sorted({event.execution_id for event in reads if event.type == metadata_store_pb2.Event.INPUT})
    if not executions:
        return []
    outputs = [
        event.artifact_id
        for event in store.get_events_by_execution_ids(executions)
        if event.type == metadata_store_pb2.Event.OUTPUT
        and event.path.steps
        and event.path.steps[0].key == standard_component_specs.PUSHED_MODEL_KEY
    ]
    destinations = set()
    for artifact in store.get_artifacts_by_id(outputs) if outputs else []:
        properties = artifact.custom_properties
        if PUSHED_PROPERTY in properties and properties[PUSHED_PROPERTY].int_value:
            destinations.add(properties[PUSHED_DESTINATION_PROPERTY].string_value)
    return sorted(destination for destination in destinations if destination)


def push_base(push_destination: Any) -> str:
    """The file-system base directory of the `push_destination` execution property (JSON or the proto)."""
    destination = push_destination
    if isinstance(push_destination, str):
        destination = proto_utils.json_to_proto(push_destination, pusher_pb2.PushDestination())
    return str(destination.filesystem.base_directory)


class PushedVersionsDriver(FingerprintDriver):
    """Sets `pushed_fingerprint` from the push destination and this model's earlier pushes in ML Metadata."""

    FINGERPRINT_KEY = PUSHED_FINGERPRINT_KEY

    def fingerprint(self, execution_info: Any) -> str:
        """`pushed_fingerprint` of the push destination, with this model's earlier pushes from ML Metadata."""
        base = push_base(execution_info.exec_properties[standard_component_specs.PUSH_DESTINATION_KEY])
        models = execution_info.input_dict.get(standard_component_specs.MODEL_KEY) or []
        model_ids = [model.id for model in models if model.id]
        pushes: list[str] = []
        if model_ids and self._metadata_handle is not None:
            with self._metadata_handle as handle:
                pushes = earlier_pushes(handle.store, model_ids)
        return pushed_fingerprint(base, pushes)
