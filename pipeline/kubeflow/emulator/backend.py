"""What a KFP backend does around one container task, emulated from its source: `tfxp run-spec`'s backends.

`kfp` follows the open-source backend (kubeflow/pipelines `backend/src/v2`, read at commit 7b70c7b; every
behaviour below cites the file and line it comes from; `metadata_store` and `launcher_io` hold the rest):

- **Pipeline root.** The run's root is `<root>/<pipeline>/<run id>` (`metadata/client.go:420`); the root
  itself comes from the run's runtime config, else the `kfp-launcher` ConfigMap, else
  `minio://mlpipeline/v2/artifacts` (`driver/root_dag.go:97-113`, `config/env.go:38`). An object-store root
  (`minio://`, `s3://`) is a local folder here (`ObjectStore`).
- **Outputs** (`driver/driver.go:733-802`, `provisionOutputs`): each task gets `<run root>/<task>/<uuid>`;
  artifact `k` is `Name: k`, `Uri: <task root>/k`, its declared type; with `publish_logs` (KFP's default since
  2.5) an extra `executor-logs` of schema title `system.Artifact`; output parameters go to
  `/tmp/kfp/outputs/<name>`; the executor output file is `LocalPathForURI(<task root>)/output_metadata.json`.
- **Inputs and the cache**: rebuilt from MLMD and keyed as the driver does (`metadata_store`).
- **Launcher**: the downloads, uploads and output parameters around the command (`launcher_io`). Each task runs
  in a pod of its own: here a fresh folder standing for `/` (`TFXP_LAUNCHER_ROOT`), removed after the task, so
  nothing but the object store and the paths the config names (which stand for buckets or PVCs) passes between
  tasks.
- **Final status** (`driver/resolve.go:458-492`): the DAG execution's MLMD state (`COMPLETE`, `FAILED`), the
  run's resource name, and an empty error.

`vertex` builds the executor input as Vertex AI Pipelines does (tensorflow/tfx
`tfx/orchestration/kubeflow/v2/container/testdata/executor_invocation.json`): typed input artifacts named
`projects/…/artifacts/<id>`, URIs under the root (a local folder standing for `gs://`, opened directly),
`<task>_<id>/executor_output.json`; its cache is not emulated.

Example:
    backend = Backend(kind=KFP, state_dir=Path("runs"), publish_logs=True)
    outputs = provision_outputs(backend, component, task_root, pod_root)
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from components.kfp.launcher_paths import (
    KFP_DEFAULT_ROOT,
    LAUNCHER_MOUNTS,
    local_path_for_uri,
    pipeline_root_problem,
)
from foundation import paths
from foundation.errors import TfxpError
from foundation.paths import is_remote, scheme

KFP, VERTEX = "kfp", "vertex"
BACKENDS = (KFP, VERTEX)
DEFAULT_ROOT = KFP_DEFAULT_ROOT
EXECUTOR_LOGS = "executor-logs"
_LOGS_TYPE = pipeline_spec_pb2.ArtifactTypeSchema(schema_title="system.Artifact")
VERTEX_PROJECT = "projects/123456789/locations/us-central1"
CACHED, COMPLETE, FAILED = "CACHED", "COMPLETE", "FAILED"
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
        problem = pipeline_root_problem(root) if scheme(root) in _OBJECT_STORES else None
        if self.kind == KFP and problem is not None:
            raise BackendError(
                f"--pipeline-root {root}: not an object-store URI KFP accepts: {problem}; e.g. "
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
