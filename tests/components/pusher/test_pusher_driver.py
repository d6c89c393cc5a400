"""The Pusher's driver: its fingerprint follows the versions under the push destination and this model's pushes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.proto import pusher_pb2
from tfx.utils import proto_utils

from components.pusher.driver import PUSHED_FINGERPRINT_KEY, PushedVersionsDriver, earlier_pushes, pushed_fingerprint
from components.pusher.executor import AtomicPusher
from foundation.publish import PUSH_RECORD


def _version(base: Path, version: str, complete: bool = True) -> Path:
    path = base / version
    path.mkdir(parents=True)
    if complete:
        (path / "saved_model.pb").write_bytes(b"model")
    return path


def test_fingerprint_follows_the_complete_versions_and_nothing_else(tmp_path: Path) -> None:
    base = tmp_path / "serving" / "digits"
    assert pushed_fingerprint(str(base)) == "none"
    _version(base, "100")
    _version(base, "200")
    before = pushed_fingerprint(str(base))
    assert before == "200,100"
    # Not versions: a half-written one, a staging dir, the run reports.
    _version(base, "300", complete=False)
    (base / ".staging-400-abcd").mkdir()
    (base / "reports").mkdir()
    (base / "reports" / "200.html").write_text("report")
    assert pushed_fingerprint(str(base)) == before
    _version(base, "500")
    assert pushed_fingerprint(str(base)) == "500,200,100"


def test_fingerprint_names_an_earlier_push_of_this_model_that_is_gone(tmp_path: Path) -> None:
    base = tmp_path / "serving" / "digits"
    _version(base, "100")
    pushed = _version(base, "200")
    # Before the push of 200 and after removing it, the versions are the same: only the push record tells.
    assert pushed_fingerprint(str(base), [str(pushed)]) == "200,100"
    (pushed / "saved_model.pb").unlink()
    pushed.rmdir()
    assert pushed_fingerprint(str(base), []) == "100"
    assert pushed_fingerprint(str(base), [str(pushed)]) == "100;gone:200"
    assert pushed_fingerprint(str(base) + "/", [str(pushed), str(tmp_path / "elsewhere" / "300")]) == "100;gone:200"


def test_fingerprint_follows_the_model_a_version_holds_not_only_its_name(tmp_path: Path) -> None:
    """A serving base restored from elsewhere can hold another model under the same version names: the recorded
    identity is in the key, so the Pusher reruns instead of reporting a version that holds another model."""
    base = tmp_path / "serving" / "digits"
    version = _version(base, "100")
    (version / PUSH_RECORD).write_text(json.dumps({"identity": "model:aaa", "version": 100}))
    before = pushed_fingerprint(str(base))
    assert before.startswith("100:") and pushed_fingerprint(str(base)) == before
    (version / PUSH_RECORD).write_text(json.dumps({"identity": "model:bbb", "version": 100}))
    assert pushed_fingerprint(str(base)) not in (before, "100")


def test_fingerprint_follows_a_versions_files_not_only_its_record(tmp_path: Path) -> None:
    """adv3 B16: the served version's labels.txt edited after the push, its record unchanged: the key changes, so
    the Pusher reruns instead of staying cached on a version that no longer holds its model."""
    base = tmp_path / "serving" / "digits"
    version = _version(base, "100")
    (version / "assets").mkdir()
    (version / "assets" / "labels.txt").write_text("0\n1\n")
    (version / PUSH_RECORD).write_text(json.dumps({"identity": "model:aaa", "version": 100}))
    before = pushed_fingerprint(str(base))

    (version / "assets" / "labels.txt").write_text("zero\n1\n")

    assert pushed_fingerprint(str(base)) not in (before, "100")


def _store(tmp_path: Path) -> metadata_store.MetadataStore:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(tmp_path / "metadata.db")
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    return metadata_store.MetadataStore(config)


def _execution(store: metadata_store.MetadataStore, model_id: int, outputs: dict[str, dict[str, int | str]]) -> None:
    """One execution that read `model_id` and wrote artifacts under `outputs` (key → custom properties)."""
    artifact_type = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="Artifact"))
    execution_type = store.put_execution_type(metadata_store_pb2.ExecutionType(name="Component"))
    read = metadata_store_pb2.Event(type=metadata_store_pb2.Event.INPUT, artifact_id=model_id)
    read.path.steps.add().key = "model"
    pairs = []
    for key, properties in outputs.items():
        artifact = metadata_store_pb2.Artifact(type_id=artifact_type, uri=f"/{key}")
        for name, value in properties.items():
            setattr(artifact.custom_properties[name], "int_value" if isinstance(value, int) else "string_value", value)
        event = metadata_store_pb2.Event(type=metadata_store_pb2.Event.OUTPUT)
        event.path.steps.add().key = key
        pairs.append((artifact, event))
    execution = metadata_store_pb2.Execution(type_id=execution_type)
    store.put_execution(execution, [(metadata_store_pb2.Artifact(id=model_id), read), *pairs], [])


def test_earlier_pushes_are_the_pushed_destinations_of_executions_that_read_the_model(tmp_path: Path) -> None:
    store = _store(tmp_path)
    model_type = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="Model"))
    model, other = store.put_artifacts([metadata_store_pb2.Artifact(type_id=model_type, uri=f"/{n}") for n in "ab"])
    assert earlier_pushes(store, [model]) == []
    _execution(store, model, {"pushed_model": {"pushed": 1, "pushed_destination": "/serving/200"}})
    _execution(store, model, {"pushed_model": {"pushed": 0}})  # refused: pushed nothing
    _execution(store, model, {"evaluation": {"pushed": 1, "pushed_destination": "/serving/not-a-push"}})
    _execution(store, other, {"pushed_model": {"pushed": 1, "pushed_destination": "/serving/300"}})
    assert earlier_pushes(store, [model]) == ["/serving/200"]
    assert earlier_pushes(store, []) == []


def test_driver_puts_the_fingerprint_into_the_execution_properties(tmp_path: Path) -> None:
    base = tmp_path / "serving" / "digits"
    _version(base, "100")
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(base)))
    info = SimpleNamespace(
        exec_properties={"push_destination": proto_utils.proto_to_json(destination)}, input_dict={"model": []}
    )
    output = PushedVersionsDriver(None).run(info)
    assert output.exec_properties[PUSHED_FINGERPRINT_KEY].string_value == "100"
    assert not output.output_artifacts
    assert AtomicPusher.DRIVER_CLASS is PushedVersionsDriver
