"""The KFP launcher's file work around one task, emulated from its source (`component/launcher_v2.go`): inputs
downloaded from the object store into the pod, output folders prepared, the executor output and output
parameters read, outputs uploaded and recorded.

Inputs are downloaded to `LocalPathForURI` before the command (:927-1004), outputs uploaded from there after it
(:778-857), the executor output's URI and metadata merged into each output (:1188), output parameters read from
the executor output or their files (:484); a failed task records only `executor-logs`.

Example:
    download_inputs(backend, executor_input, pod_root)
    prepare_outputs(executor_input, pod_root)
    recorded = upload_outputs(backend, executor_input, read_executor_output(output_file), pod_root, succeeded=True)
"""

from __future__ import annotations

import shutil
from pathlib import Path

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from components.kfp.launcher_paths import OCI_SCHEME, LauncherPathError, local_path_for_uri
from foundation.bounded import parse_json, read_document
from foundation.paths import scheme
from pipeline.kubeflow.emulator.backend import EXECUTOR_LOGS, KFP, Backend, BackendError


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
            json_format.Parse(read_document(path, f"executor output {path}"), written)
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
        text = read_document(path, f"output parameter file {path}")
        kind = component.output_definitions.parameters[name].parameter_type
        values[name] = json_format.ParseDict(
            text if kind == pipeline_spec_pb2.ParameterType.STRING else parse_json(text), struct_pb2.Value()
        )
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
