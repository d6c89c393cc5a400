"""MLMD and KFP's cache as `tfxp run-spec` emulates them: artifacts, executions and cache entries in one JSON file,
and KFP's cache key of a task.

Inputs are rebuilt from MLMD as the open-source driver does (`driver/resolve.go:700-800`,
`metadata/client.go:1144`, `metadata/converter.go:181-221`): an upstream artifact's `name` is its MLMD id, its
`type` is `instanceSchema: ""`, and its `metadata` holds its properties plus the launcher's `display_name` and
`store_session_info` (`client.go:1232-1250`). The cache key (`cacheutils/cache.go:173-229`,
`driver/cache.go:87-147`) is the input artifacts' MLMD ids, the input parameter values, the outputs' names and
types, the image and the command; a hit reuses the cached execution's outputs.

Example:
    store = MetadataStore(Path("runs/mlmd.json"))
    cached = store.cached_execution(cache_fingerprint(executor_input, component, container), "tfxp-digits")
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from foundation.records import RecordError, read_record
from pipeline.kubeflow.emulator.backend import KFP, VERTEX_PROJECT, BackendError

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


class _StoredArtifact(BaseModel):
    uri: str
    type: dict[str, Any]
    metadata: dict[str, Any]


class _StoredExecution(BaseModel):
    run_id: str
    task: str
    state: str
    outputs: dict[str, StrictInt]
    parameters: dict[str, Any]


class StoreFile(BaseModel):
    """`mlmd.json` as `MetadataStore.save` writes it; the ids it refers to are ones it holds."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)

    artifacts: dict[str, _StoredArtifact]
    executions: dict[str, _StoredExecution]
    cache: dict[str, int]
    next_id: int = Field(ge=1, le=2**63 - 1)  # ML Metadata's ids are int64

    @model_validator(mode="after")
    def _ids_held(self) -> StoreFile:
        for key, cached in self.cache.items():
            if str(cached) not in self.executions:
                raise ValueError(f"cache entry {key} names execution {cached}, which it does not hold")
        for name, execution in self.executions.items():
            for output, artifact_id in execution.outputs.items():
                if str(artifact_id) not in self.artifacts:
                    raise ValueError(f"execution {name}'s output {output} is artifact {artifact_id}, not held")
        return self


class MetadataStore:
    """MLMD as the driver and launcher use it: artifacts (id, URI, type, metadata), executions and the cache,
    kept in one JSON file across runs (a second `run-spec` sees the first one's cache)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"artifacts": {}, "executions": {}, "cache": {}, "next_id": 1}
        fix = "move it away (the next run starts with an empty cache and runs every task) or pass another --state"
        try:
            self.data = read_record(path, StoreFile, "run-spec's MLMD and cache store", fix).model_dump()
        except FileNotFoundError:
            pass
        except RecordError as error:
            raise BackendError(str(error)) from None

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
