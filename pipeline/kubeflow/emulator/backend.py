"""What a KFP backend does around one container task, emulated from its source: `tfxp run-spec`'s backends.

`kfp` follows the open-source backend (kubeflow/pipelines `backend/src/v2`, read at commit 7b70c7b; every
behaviour below cites the file and line it comes from):

- **Pipeline root.** The run's root is `<root>/<pipeline>/<run id>` (`metadata/client.go:420`); the root
  itself comes from the run's runtime config, else the `kfp-launcher` ConfigMap, else
  `minio://mlpipeline/v2/artifacts` (`driver/root_dag.go:97-113`, `config/env.go:38`). An object-store root
  (`minio://`, `s3://`) is a local folder here (`ObjectStore`).
- **Outputs** (`driver/driver.go:733-802`, `provisionOutputs`): each task gets `<run root>/<task>/<uuid>`;
  artifact `k` is `Name: k`, `Uri: <task root>/k`, its declared type; with `publish_logs` (KFP's default since
  2.5) an extra `executor-logs` of schema title `system.Artifact`; output parameters go to
  `/tmp/kfp/outputs/<name>`; the executor output file is `LocalPathForURI(<task root>)/output_metadata.json`.
- **Inputs** (`driver/resolve.go:700-800`, `metadata/client.go:1144`, `metadata/converter.go:181-221`): an
  upstream artifact is rebuilt from MLMD: `name` is its MLMD id, `type` is `instanceSchema: ""`, `metadata`
  holds its properties plus the launcher's `display_name` and `store_session_info` (`client.go:1232-1250`).
- **Launcher** (`component/launcher_v2.go`): inputs are downloaded to `LocalPathForURI` before the command
  (:927-1004), outputs uploaded from there after it (:778-857), the executor output's URI and metadata
  merged into each output (:1188), output parameters read from the executor output or their files (:484);
  a failed task records only `executor-logs`. Each task runs in a pod of its own: here a fresh folder
  standing for `/` (`TFXP_LAUNCHER_ROOT`), removed after the task, so nothing but the object store and the
  paths the config names (which stand for buckets or PVCs) passes between tasks.
- **Cache** (`cacheutils/cache.go:173-229`, `driver/cache.go:87-147`): the key is the input artifacts' MLMD
  ids, the input parameter values, the outputs' names and types, the image and the command; a hit reuses
  the cached execution's outputs (same ids, an earlier run's URIs) and the task's state is `CACHED`.
- **Final status** (`driver/resolve.go:458-492`): the DAG execution's MLMD state (`COMPLETE`, `FAILED`), the
  run's resource name, and an empty error.

`vertex` builds the executor input as Vertex AI Pipelines does (tensorflow/tfx
`tfx/orchestration/kubeflow/v2/container/testdata/executor_invocation.json`): typed input artifacts named
`projects/…/artifacts/<id>`, URIs under the root (a local folder standing for `gs://`, opened directly),
`<task>_<id>/executor_output.json`; its cache is not emulated.

Example:
    backend = Backend.kfp(state_dir=Path("runs"), publish_logs=True)
    store = MetadataStore(Path("runs/mlmd.json"))
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from components.kfp.launcher_paths import (
    KFP_DEFAULT_ROOT,
    LAUNCHER_MOUNTS,
    OCI_SCHEME,
    LauncherPathError,
    local_path_for_uri,
)
from foundation import paths
from foundation.errors import TfxpError
from foundation.paths import is_remote, scheme, split_bucket

KFP, VERTEX = "kfp", "vertex"
BACKENDS = (KFP, VERTEX)
DEFAULT_ROOT = KFP_DEFAULT_ROOT
EXECUTOR_LOGS = "executor-logs"
_LOGS_TYPE = pipeline_spec_pb2.ArtifactTypeSchema(schema_title="system.Artifact")
# What the driver records with every artifact on the default MinIO store (config/env.go:177-193).
_MINIO_SESSION = {
    "Provider": "minio",
    "Params": {
        "accessKeyKey": "accesskey",
        "disableSSL": "true",
        "endpoint": "minio-service.kubeflow:9000",
        "fromEnv": "false",
        "region": "minio",
        "secretKeyKey": "secretkey",
        "secretName": "mlpipeline-minio-artifact",
    },
}
VERTEX_PROJECT = "projects/123456789/locations/us-central1"
CACHED, COMPLETE, FAILED = "CACHED", "COMPLETE", "FAILED"
# S3's (and MinIO's) bucket names.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# The pipeline-root schemes run-spec keeps as folders under --state (the launcher's object stores but GCS).
_OBJECT_STORES = ("minio", "s3")


class BackendError(TfxpError, ValueError):
    """A spec or root this backend cannot run (the message names the option and the fix)."""


@dataclass(frozen=True)
class Backend:
    """Attributes:
    kind: `kfp` (open-source KFP) or `vertex` (Vertex AI Pipelines).
    state_dir: Where the emulated backend keeps its object store, pods, MLMD and cache.
    publish_logs: KFP's `--publish_logs` (the `executor-logs` output); kfp only.
    cache: KFP's cache (`--no-cache` turns it off for the run, as `tfxp submit --no-cache`); kfp only.
    """

    kind: str
    state_dir: Path
    publish_logs: bool = True
    cache: bool = True

    @property
    def object_store(self) -> Path:
        """The folder standing for the object store: `<state>/object-store/<minio|s3>/<bucket>/<key>`."""
        return self.state_dir / "object-store"

    def check_root(self, root: str) -> None:
        """Refuses a pipeline root this backend cannot hold here.

        Raises:
            BackendError: kfp: a root that is neither `minio://` nor `s3://` (a local path fails on KFP itself:
                the launcher has no local path for it, `launcher_v2.go:1280-1300`; `gs://` needs a bucket);
                vertex: a root that is not a local folder standing for `gs://`.
        """
        if self.kind == KFP and scheme(root) in _OBJECT_STORES:
            bucket, key = split_bucket(root)
            if not _BUCKET.match(bucket) or any(part in ("", ".", "..") for part in key.split("?")[0].split("/")[:-1]):
                raise BackendError(
                    f"--pipeline-root {root}: not an object-store URI KFP accepts: the bucket must be 3-63 lowercase "
                    "letters, digits, dots or hyphens, and the path must have no empty, . or .. parts, e.g. "
                    "minio://mlpipeline/v2/artifacts"
                )
        if self.kind == KFP and scheme(root) not in _OBJECT_STORES:
            raise BackendError(
                f"--pipeline-root {root}: with --backend kfp the root is an object-store URI (minio://bucket/path or "
                "s3://bucket/path, kept under --state here); on KFP a local path fails every task (the launcher "
                "has no local path for it) and gs:// needs a real bucket"
            )
        if self.kind == VERTEX and is_remote(root):
            raise BackendError(
                f"--pipeline-root {root}: with --backend vertex the root is a local folder standing for the "
                "gs:// bucket Vertex AI writes to"
            )

    def store_path(self, uri: str) -> Path:
        """The object-store folder holding `uri` (kfp)."""
        kind = scheme(uri)
        if kind in _OBJECT_STORES:
            return self.object_store / LAUNCHER_MOUNTS[kind] / uri[len(paths.uri(kind)) :]
        raise BackendError(f"{uri} is not an object-store URI run-spec keeps (minio://, s3://)")


def _value(value: Any) -> struct_pb2.Value:
    return json_format.ParseDict(value, struct_pb2.Value())


class MetadataStore:
    """MLMD as the driver and launcher use it: artifacts (id, URI, type, metadata), executions and the cache,
    kept in one JSON file across runs (a second `run-spec` sees the first one's cache)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"artifacts": {}, "executions": {}, "cache": {}, "next_id": 1}
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except (ValueError, UnicodeDecodeError) as error:
                raise BackendError(self._unreadable(f"it is not JSON ({error})")) from None
            if not isinstance(data, dict) or set(self.data) - set(data):
                raise BackendError(self._unreadable(f"it lacks {', '.join(sorted(set(self.data) - set(data)))}"))
            self.data = data

    def _unreadable(self, why: str) -> str:
        return (
            f"{self.path} is not run-spec's MLMD and cache store: {why}; move it away (the next run starts with an "
            "empty cache and runs every task) or pass another --state"
        )

    def save(self) -> None:
        """Writes the store atomically (a new file renamed over the old one: an interrupted run leaves either)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(f".{self.path.name}.tmp")
        staging.write_text(json.dumps(self.data, indent=1, sort_keys=True) + "\n")
        staging.replace(self.path)

    def _next_id(self) -> int:
        value = int(self.data["next_id"])
        self.data["next_id"] = value + 1
        return value

    def record_artifact(self, key: str, artifact: pipeline_spec_pb2.RuntimeArtifact, session: bool) -> int:
        """Records an output artifact as the launcher does (`RecordArtifact`, client.go:1213-1275): its metadata
        becomes custom properties, with `display_name` (the output key) and `store_session_info`."""
        metadata = json_format.MessageToDict(artifact.metadata)
        metadata.setdefault("display_name", key)
        if session:
            metadata.setdefault("store_session_info", json.dumps(_MINIO_SESSION, separators=(",", ":")))
        artifact_id = self._next_id()
        self.data["artifacts"][str(artifact_id)] = {
            "uri": artifact.uri,
            "type": json_format.MessageToDict(artifact.type),
            "metadata": metadata,
        }
        return artifact_id

    def runtime_artifact(self, artifact_id: int, kind: str) -> pipeline_spec_pb2.RuntimeArtifact:
        """The input artifact the driver builds from MLMD: kfp without its type and named by its id; vertex
        typed and named by its resource name."""
        stored = self.data["artifacts"][str(artifact_id)]
        artifact = pipeline_spec_pb2.RuntimeArtifact(uri=stored["uri"])
        artifact.metadata.update(stored["metadata"])
        if kind == KFP:
            artifact.name = str(artifact_id)
            artifact.type.instance_schema = ""  # OutputArtifact.ToRuntimeArtifact with Schema "" (client.go:1144)
        else:
            artifact.name = f"{VERTEX_PROJECT}/metadataStores/default/artifacts/{artifact_id}"
            json_format.ParseDict(stored["type"], artifact.type)
        return artifact

    def artifact(self, artifact_id: int) -> dict[str, Any]:
        """The stored artifact: {"uri", "type", "metadata"}."""
        return dict(self.data["artifacts"][str(artifact_id)])

    def record_execution(
        self, run_id: str, task: str, state: str, outputs: Mapping[str, int], parameters: Mapping[str, Any]
    ) -> int:
        """Records a task's execution: its state, output artifact ids and output parameter values."""
        execution_id = self._next_id()
        self.data["executions"][str(execution_id)] = {
            "run_id": run_id,
            "task": task,
            "state": state,
            "outputs": dict(outputs),
            "parameters": dict(parameters),
        }
        return execution_id

    def execution(self, execution_id: int) -> dict[str, Any]:
        """A recorded execution."""
        return dict(self.data["executions"][str(execution_id)])

    def cached_execution(self, fingerprint: str, pipeline: str) -> int | None:
        """The execution cached under `fingerprint` for `pipeline` (`GetExecutionCache(fp, "pipeline/"+name)`)."""
        found = self.data["cache"].get(f"pipeline/{pipeline}/{fingerprint}")
        return int(found) if found is not None else None

    def cache(self, fingerprint: str, pipeline: str, execution_id: int) -> None:
        """Caches a successful execution (`createCache`, driver/cache.go:149)."""
        self.data["cache"][f"pipeline/{pipeline}/{fingerprint}"] = execution_id


def cache_fingerprint(
    executor_input: pipeline_spec_pb2.ExecutorInput,
    component: pipeline_spec_pb2.ComponentSpec,
    container: pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec,
    pvc_names: tuple[str, ...] = (),
) -> str:
    """KFP's cache key of a task and its sha256 (`GenerateCacheKey` + `GenerateFingerPrint`, cache.go:151-229):
    input artifact names (MLMD ids), input parameter values, the outputs without their URIs, the output
    parameters' types, the image, the command with its arguments as compiled, and the sorted names of the PVCs
    the task mounts (driver/cache.go:104-123)."""
    inputs = executor_input.inputs
    key = {
        "inputArtifactNames": {
            name: {"artifactNames": [artifact.name for artifact in artifacts.artifacts]}
            for name, artifacts in inputs.artifacts.items()
        },
        "inputParameterValues": {
            name: json_format.MessageToDict(value) for name, value in inputs.parameter_values.items()
        },
        "outputArtifactsSpec": {
            name: {
                "name": artifacts.artifacts[0].name,
                "type": json_format.MessageToDict(artifacts.artifacts[0].type),
                "metadata": json_format.MessageToDict(artifacts.artifacts[0].metadata),
            }
            for name, artifacts in executor_input.outputs.artifacts.items()
            if artifacts.artifacts
        },
        "outputParametersSpec": {
            name: pipeline_spec_pb2.ParameterType.ParameterTypeEnum.Name(spec.parameter_type)
            for name, spec in component.output_definitions.parameters.items()
            if name in executor_input.outputs.parameters
        },
        "containerSpec": {
            "image": container.image,
            "cmdArgs": [*container.command, *container.args],
            "pvcNames": sorted(set(pvc_names)),
        },
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def provision_outputs(
    backend: Backend,
    component: pipeline_spec_pb2.ComponentSpec,
    task_root: str,
    pod_root: str,
) -> pipeline_spec_pb2.ExecutorInput.Outputs:
    """The outputs part of the executor input (kfp: `provisionOutputs`, driver.go:733-802; vertex: TFX's
    fixtures). `task_root` is the task's folder under the run root; `pod_root` stands for the pod's `/`."""
    outputs = pipeline_spec_pb2.ExecutorInput.Outputs()
    declared = {key: spec.artifact_type for key, spec in component.output_definitions.artifacts.items()}
    if backend.kind == KFP and backend.publish_logs:
        declared[EXECUTOR_LOGS] = _LOGS_TYPE
    for key, artifact_type in declared.items():
        outputs.artifacts[key].artifacts.add(name=key, uri=f"{task_root}/{key}", type=artifact_type)
    for key in component.output_definitions.parameters:
        outputs.parameters[key].output_file = posixpath.join(pod_root, "tmp/kfp/outputs", key)
    if backend.kind == KFP:
        outputs.output_file = posixpath.join(local_path_for_uri(task_root, pod_root), "output_metadata.json")
    else:
        outputs.output_file = posixpath.join(task_root, "executor_output.json")
    return outputs


def _copy_files(source: Path, target: Path) -> None:
    """Copies the files under `source` (or the file itself) to `target`, as an object store holds them: files
    only, so an empty folder is not uploaded and a prefix without objects downloads nothing, without an error
    (objectstore/object_store.go `DownloadBlob` :176-205, `UploadBlob`)."""
    files = [source] if source.is_file() else sorted(path for path in source.rglob("*") if path.is_file())
    for path in files:
        destination = target if path == source else target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)


def download_inputs(backend: Backend, executor_input: pipeline_spec_pb2.ExecutorInput, pod_root: str) -> None:
    """Copies every input artifact from the object store to its local path in the pod (`downloadArtifacts`,
    launcher_v2.go:927-1004: every input, whether the command reads it or not)."""
    for artifacts in executor_input.inputs.artifacts.values():
        for artifact in artifacts.artifacts:
            if scheme(artifact.uri) == OCI_SCHEME:
                continue  # a modelcar's files come from its sidecar, not the object store (:964)
            try:
                local = Path(local_path_for_uri(artifact.uri, pod_root))
            except LauncherPathError:
                continue  # "does not have a recognized storage URI ... Skipping downloading" (:955)
            _copy_files(backend.store_path(artifact.uri), local)


def prepare_outputs(executor_input: pipeline_spec_pb2.ExecutorInput, pod_root: str) -> None:
    """The launcher's `prepareOutputFolders` (launcher_v2.go:1280-1308): parent folders of output parameters'
    files and of output artifacts' local paths.

    Raises:
        BackendError: an output URI without a local path ("failed to generate local storage path").
    """
    for parameter in executor_input.outputs.parameters.values():
        Path(parameter.output_file).parent.mkdir(parents=True, exist_ok=True)
    for key, artifacts in executor_input.outputs.artifacts.items():
        for artifact in artifacts.artifacts:
            try:
                Path(local_path_for_uri(artifact.uri, pod_root)).parent.mkdir(parents=True, exist_ok=True)
            except LauncherPathError as error:
                raise BackendError(
                    f"failed to generate local storage path for output artifact {key}: {error}"
                ) from None


def read_executor_output(path: str) -> pipeline_spec_pb2.ExecutorOutput:
    """The executor output file; an empty one when the executor wrote none (`getExecutorOutputFile`, :1208).

    Raises:
        BackendError: the file is not an ExecutorOutput.
    """
    written = pipeline_spec_pb2.ExecutorOutput()
    if Path(path).is_file():
        try:
            # protojson.Unmarshal, strict: an unknown field fails the task on KFP too (launcher_v2.go:1232).
            json_format.Parse(Path(path).read_text(), written)
        except json_format.ParseError as error:
            raise BackendError(f"failed to unmarshal ExecutorOutput in file {path}: {error}") from None
    return written


def collect_parameters(
    executor_input: pipeline_spec_pb2.ExecutorInput,
    written: pipeline_spec_pb2.ExecutorOutput,
    component: pipeline_spec_pb2.ComponentSpec,
) -> dict[str, struct_pb2.Value]:
    """Output parameters: the executor output's, else each one's file read as its type (`collectOutputParameters`,
    launcher_v2.go:484-515).

    Raises:
        BackendError: a declared output parameter with neither ("failed to read output parameter").
    """
    values = dict(written.parameter_values)
    for name, parameter in executor_input.outputs.parameters.items():
        if name in values:
            continue
        path = Path(parameter.output_file)
        if not path.is_file():
            raise BackendError(f"failed to read output parameter name={name} path={path}: no such file")
        text = path.read_text()
        kind = component.output_definitions.parameters[name].parameter_type
        values[name] = _value(text) if kind == pipeline_spec_pb2.ParameterType.STRING else _value(json.loads(text))
    return values


def upload_outputs(
    backend: Backend,
    executor_input: pipeline_spec_pb2.ExecutorInput,
    written: pipeline_spec_pb2.ExecutorOutput,
    pod_root: str,
    succeeded: bool,
) -> dict[str, pipeline_spec_pb2.RuntimeArtifact]:
    """The outputs as the launcher records them (`uploadOutputArtifacts`, launcher_v2.go:778-857): the executor
    output's URI and metadata merged into each declared output, its local path uploaded to the object store
    (skipped, as there, when the merged URI has no local path or the path does not exist); after a failure
    only `executor-logs`."""
    recorded: dict[str, pipeline_spec_pb2.RuntimeArtifact] = {}
    for key, artifacts in executor_input.outputs.artifacts.items():
        if not succeeded and key != EXECUTOR_LOGS:
            continue
        artifact = pipeline_spec_pb2.RuntimeArtifact()
        artifact.CopyFrom(artifacts.artifacts[0])
        produced = written.artifacts[key].artifacts if key in written.artifacts and key != EXECUTOR_LOGS else []
        if produced:
            if produced[0].uri:
                artifact.uri = produced[0].uri
            for field_name, value in produced[0].metadata.items():
                artifact.metadata[field_name] = value
        if backend.kind == KFP:
            try:
                local = Path(local_path_for_uri(artifact.uri, pod_root))
            except LauncherPathError:
                local = None  # "does not have a recognized storage URI ... Skipping uploading"
            if local is not None and local.exists():
                _copy_files(local, backend.store_path(artifact.uri))
            elif key == EXECUTOR_LOGS:
                continue
        recorded[key] = artifact
    return recorded


def final_status(kind: str, state: str, run_name: str, failed_task: str = "") -> struct_pb2.Value:
    """The `PipelineTaskFinalStatus` an exit handler gets for the DAG `tfx-dag`: kfp `{"state": "COMPLETE" |
    "FAILED", "error": {}}` (resolve.go:471-477: MLMD's state, error left empty); vertex `SUCCEEDED`/`FAILED`
    with Vertex's message naming the failed task."""
    if kind == KFP:
        status: dict[str, Any] = {
            "state": COMPLETE if state != FAILED else FAILED,
            "pipelineTaskName": "tfx-dag",
            "pipelineJobResourceName": run_name,
            "error": {},
        }
    else:
        failed = state == FAILED
        message = f"The DAG failed because some tasks failed. The failed tasks are: [{failed_task}]."
        status = {
            "state": "FAILED" if failed else "SUCCEEDED",
            "pipelineTaskName": "tfx-dag",
            "pipelineJobResourceName": f"{VERTEX_PROJECT}/pipelineJobs/{run_name}",
            "error": {"code": 9, "message": message} if failed else {},
        }
    return _value(status)
