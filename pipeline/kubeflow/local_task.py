"""One container task of a compiled KFP spec, run as a local subprocess the way KFP's launcher runs it in a pod.

KFP's driver resolves a task's inputs (constants, pipeline parameters, upstream outputs, the final status
of the DAG an exit handler watches) into an `ExecutorInput`, gives every output artifact a URI under the
pipeline root, and its launcher runs the container's command with the `{{$...}}` placeholders filled in.
This module does the same for one task: it builds the `ExecutorInput` here (kfp.local's only takes
Lightweight Python components' inputs), then lets kfp's own local-execution code
(`kfp.local.executor_input_utils`, `kfp.local.placeholder_utils`) resolve the placeholders, runs the
command with this environment's Python, and reads the `ExecutorOutput` the executor wrote.

Example:
    task = TaskContext(name="Trainer", run_id="tfxp-digits-20250101-000000", pipeline_root="/tmp/root",
                       task_dir="/tmp/root/tfxp-digits/tfxp-digits-20250101-000000/Trainer")
    executor_input = build_executor_input(task_spec, component_spec, task, parameters, artifacts)
    command = resolve_command(container, component_spec, executor_input, task)
"""

from __future__ import annotations

import posixpath
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

ContainerSpec = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec
# What the TFX entrypoint writes (and KFP reads back): the executor's outputs and their metadata.
EXECUTOR_OUTPUT_FILE = "executor_output.json"
# The command names KFP images run Python with; run-spec runs them with this environment's interpreter.
PYTHON_COMMANDS = ("python", "python3")


class TaskInputError(ValueError):
    """A task input that cannot be resolved (a missing upstream output, an unsupported input kind)."""


@dataclass(frozen=True)
class TaskContext:
    """Where and as what a task runs.

    Attributes:
        name: The task's name in the spec.
        run_id: The run's id and name (`{{$.pipeline_job_uuid}}`, `{{$.pipeline_job_name}}`).
        pipeline_root: The run's pipeline root (`{{$.pipeline_root}}`).
        task_dir: `<root>/<pipeline>/<run id>/<task>`: output artifacts go to `<task_dir>/<output key>`, as KFP's
            driver puts them.
    """

    name: str
    run_id: str
    pipeline_root: str
    task_dir: str


@dataclass(frozen=True)
class UpstreamState:
    """What one task left for the tasks after it.

    Attributes:
        state: `SUCCEEDED`, `FAILED` or `SKIPPED`.
        error: Why it failed; empty otherwise.
        artifacts: Output key → the artifact as the executor described it.
        parameters: Output key → value.
    """

    state: str
    error: str = ""
    artifacts: Mapping[str, pipeline_spec_pb2.RuntimeArtifact] | None = None
    parameters: Mapping[str, struct_pb2.Value] | None = None


def python_value(value: Any) -> struct_pb2.Value:
    """A protobuf `Value` holding a plain Python value (str, number, bool, list, dict)."""
    return json_format.ParseDict(value, struct_pb2.Value())


def final_status(producer: str, upstream: UpstreamState, run_id: str) -> struct_pb2.Value:
    """The `PipelineTaskFinalStatus` an exit handler gets, as open-source KFP's driver passes it (a struct),
    plus the error message KFP leaves empty."""
    status: dict[str, Any] = {
        "state": upstream.state,
        "pipelineTaskName": producer,
        "pipelineJobResourceName": run_id,
        "error": {"message": upstream.error} if upstream.error else {},
    }
    return python_value(status)


def _constant(value: pipeline_spec_pb2.ValueOrRuntimeParameter) -> struct_pb2.Value:
    kind = value.WhichOneof("value")
    if kind == "constant":
        return value.constant
    if kind == "constant_value":  # schema 2.0's typed value
        field = value.constant_value.WhichOneof("value")
        return python_value(getattr(value.constant_value, field) if field else None)
    raise TaskInputError(f"a runtime value of kind {kind} (only constants are compiled by TFX)")


def input_parameter(
    key: str,
    spec: pipeline_spec_pb2.TaskInputsSpec.InputParameterSpec,
    scope: Mapping[str, struct_pb2.Value],
    upstream: Mapping[str, UpstreamState],
    run_id: str,
) -> struct_pb2.Value | None:
    """The value of one input parameter; None when it comes from an optional parameter nobody set.

    Args:
        key: The input's name, for messages.
        spec: How the task gets it.
        scope: The enclosing DAG's input parameters (the pipeline parameters for the root DAG).
        upstream: Task name → what it left, for this DAG's tasks.
        run_id: The run's id, for a final status.

    Raises:
        TaskInputError: an upstream task or output that is not there, or an input kind run-spec does not know.
    """
    kind = spec.WhichOneof("kind")
    if kind == "runtime_value":
        return _constant(spec.runtime_value)
    if kind == "component_input_parameter":
        return scope.get(spec.component_input_parameter)
    if kind == "task_output_parameter":
        producer, output = spec.task_output_parameter.producer_task, spec.task_output_parameter.output_parameter_key
        values = upstream[producer].parameters if producer in upstream else None
        if not values or output not in values:
            raise TaskInputError(f"input {key}: task {producer} left no output parameter {output}")
        return values[output]
    if kind == "task_final_status":
        producer = spec.task_final_status.producer_task
        if producer not in upstream:
            raise TaskInputError(f"input {key}: the final status of {producer}, which has not run")
        return final_status(producer, upstream[producer], run_id)
    raise TaskInputError(f"input {key} is a {kind} input, which run-spec does not resolve")


def build_executor_input(
    task: pipeline_spec_pb2.PipelineTaskSpec,
    component: pipeline_spec_pb2.ComponentSpec,
    context: TaskContext,
    scope: Mapping[str, struct_pb2.Value],
    upstream: Mapping[str, UpstreamState],
) -> pipeline_spec_pb2.ExecutorInput:
    """The `ExecutorInput` KFP's driver would give this task.

    Raises:
        TaskInputError: an input that cannot be resolved.
    """
    inputs = pipeline_spec_pb2.ExecutorInput.Inputs()
    for key, spec in task.inputs.parameters.items():
        value = input_parameter(key, spec, scope, upstream, context.run_id)
        if value is not None:
            inputs.parameter_values[key].CopyFrom(value)
    for key, spec in task.inputs.artifacts.items():
        kind = spec.WhichOneof("kind")
        if kind != "task_output_artifact":
            raise TaskInputError(f"input artifact {key} is a {kind} input, which run-spec does not resolve")
        producer, output = spec.task_output_artifact.producer_task, spec.task_output_artifact.output_artifact_key
        artifacts = upstream[producer].artifacts if producer in upstream else None
        if not artifacts or output not in artifacts:
            raise TaskInputError(f"input artifact {key}: task {producer} left no output artifact {output}")
        inputs.artifacts[key].artifacts.add().CopyFrom(artifacts[output])
    outputs = pipeline_spec_pb2.ExecutorInput.Outputs(
        output_file=posixpath.join(context.task_dir, EXECUTOR_OUTPUT_FILE)
    )
    for key, definition in component.output_definitions.artifacts.items():
        outputs.artifacts[key].artifacts.add(
            name=f"{context.run_id}/{context.name}/{key}",
            type=definition.artifact_type,
            uri=posixpath.join(context.task_dir, key),
        )
    for key in component.output_definitions.parameters:
        outputs.parameters[key].output_file = posixpath.join(context.task_dir, "parameters", key)
    return pipeline_spec_pb2.ExecutorInput(inputs=inputs, outputs=outputs)


def resolve_command(
    command: Sequence[str],
    component: pipeline_spec_pb2.ComponentSpec,
    executor_input: pipeline_spec_pb2.ExecutorInput,
    context: TaskContext,
) -> list[str]:
    """`command` (a container's command + args) with KFP's placeholders filled in by kfp.local, and Python
    run from this environment.

    kfp.local also fills in KFP's placeholders inside string parameter values (`{{$.pipeline_job_uuid}}`, ...),
    as KFP's driver does for whole-value constants.
    """
    from kfp.local import executor_input_utils, placeholder_utils

    as_dict = executor_input_utils.executor_input_to_dict(executor_input=executor_input, component_spec=component)
    resolved = placeholder_utils.replace_placeholders(
        full_command=list(command),
        executor_input_dict=as_dict,
        pipeline_resource_name=context.run_id,
        task_resource_name=context.name,
        pipeline_root=context.pipeline_root,
        unique_pipeline_id=context.run_id,
    )
    if resolved and resolved[0] in PYTHON_COMMANDS:
        resolved[0] = sys.executable
    return resolved


def run_command(command: Sequence[str], log_path: Path) -> int:
    """Runs `command` with this process's environment, stdout and stderr into `log_path`; its exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        return subprocess.run(list(command), stdout=log, stderr=subprocess.STDOUT, check=False).returncode


def read_outputs(
    executor_input: pipeline_spec_pb2.ExecutorInput,
) -> tuple[dict[str, pipeline_spec_pb2.RuntimeArtifact], dict[str, struct_pb2.Value]]:
    """The task's output artifacts and parameters after it ran, as KFP's launcher records them: the declared
    artifacts (type, URI) with what the executor wrote into its `ExecutorOutput` (metadata such as `split_names`
    or `pushed_version`), and output parameters from the `ExecutorOutput` or their files.

    Raises:
        TaskInputError: the executor output file is not an `ExecutorOutput`.
    """
    written = pipeline_spec_pb2.ExecutorOutput()
    output_file = Path(executor_input.outputs.output_file)
    if output_file.is_file():
        try:
            json_format.Parse(output_file.read_text(), written, ignore_unknown_fields=True)
        except json_format.ParseError as error:
            raise TaskInputError(f"{output_file} is not a KFP ExecutorOutput: {error}") from None
    artifacts = {}
    for key, declared in executor_input.outputs.artifacts.items():
        artifact = pipeline_spec_pb2.RuntimeArtifact()
        artifact.CopyFrom(declared.artifacts[0])
        if key in written.artifacts and written.artifacts[key].artifacts:
            produced = written.artifacts[key].artifacts[0]
            artifact.metadata.CopyFrom(produced.metadata)
            artifact.uri = produced.uri or artifact.uri
        artifacts[key] = artifact
    parameters = {}
    for key, declared_parameter in executor_input.outputs.parameters.items():
        if key in written.parameter_values:
            parameters[key] = written.parameter_values[key]
        elif Path(declared_parameter.output_file).is_file():
            parameters[key] = python_value(Path(declared_parameter.output_file).read_text())
    return artifacts, parameters
