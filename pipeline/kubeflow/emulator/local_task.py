"""One container task of a compiled KFP spec: its inputs as KFP's driver resolves them, its command with the
placeholders filled in, run as a local subprocess (what the backend does around it is
`pipeline.kubeflow.emulator.backend`).

The driver resolves a task's input parameters (constants, with the run placeholders it replaces, pipeline
parameters, upstream outputs, the final status of the DAG an exit handler watches; `driver/resolve.go:375-497`)
and rebuilds its input artifacts from MLMD; the launcher fills in the component's parameter defaults and the
`{{$...}}` placeholders. This module builds the inputs here (kfp.local's only takes Lightweight Python
components' inputs), lets kfp's own local-execution code (`kfp.local.executor_input_utils`,
`kfp.local.placeholder_utils`) resolve the placeholders, and runs the command with this environment's Python.

Example:
    context = TaskContext(name="Trainer", run_id="7d0c…", pipeline_root="minio://mlpipeline/v2/artifacts",
                          task_dir="minio://mlpipeline/v2/artifacts/tfxp-digits/7d0c…/Trainer/1a2b")
    inputs = build_inputs(task_spec, context, parameters, upstream, artifact_of, final_status)
    command = resolve_command([*container.command, *container.args], component_spec, executor_input, context)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from foundation.errors import TfxpError
from foundation.stop_request import StopRequest

ContainerSpec = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec
# The command names KFP images run Python with; run-spec runs them with this environment's interpreter.
PYTHON_COMMANDS = ("python", "python3")


class TaskInputError(TfxpError, ValueError):
    """A task input that cannot be resolved (a missing upstream output, an unsupported input kind)."""


@dataclass(frozen=True)
class TaskContext:
    """Where and as what a task runs.

    Attributes:
        name: The task's name in the spec.
        run_id: The run's id (`{{$.pipeline_job_uuid}}`).
        pipeline_root: The run's pipeline root (`{{$.pipeline_root}}`).
        task_dir: The task's folder under the run's root: `<root>/<pipeline>/<run id>/<task>/<uuid>` on KFP.
        run_name: The run's resource name (`{{$.pipeline_job_resource_name}}`, the final status' resource name).
        display_name: The run's display name (`{{$.pipeline_job_name}}`).
    """

    name: str
    run_id: str
    pipeline_root: str
    task_dir: str
    run_name: str = ""
    display_name: str = ""

    def placeholders(self) -> dict[str, str]:
        """The whole-value constants KFP's driver replaces in input parameters (driver/resolve.go:436-450)."""
        return {
            "{{$.pipeline_job_name}}": self.display_name or self.run_name or self.run_id,
            "{{$.pipeline_job_resource_name}}": self.run_name or self.run_id,
            "{{$.pipeline_job_uuid}}": self.run_id,
            "{{$.pipeline_task_name}}": self.name,
        }


@dataclass(frozen=True)
class UpstreamState:
    """What one task left for the tasks after it.

    Attributes:
        state: `SUCCEEDED`, `CACHED`, `FAILED` or `SKIPPED`.
        error: Why it failed; empty otherwise.
        artifacts: Output key → the artifact's id in the emulated MLMD (`pipeline.kubeflow.emulator.backend`).
        parameters: Output key → value.
    """

    state: str
    error: str = ""
    artifacts: Mapping[str, int] | None = None
    parameters: Mapping[str, struct_pb2.Value] | None = None

    @property
    def succeeded(self) -> bool:
        """It ran, or KFP served it from its cache."""
        return self.state in ("SUCCEEDED", "CACHED")


def python_value(value: Any) -> struct_pb2.Value:
    """A protobuf `Value` holding a plain Python value (str, number, bool, list, dict)."""
    return json_format.ParseDict(value, struct_pb2.Value())


def _constant(value: pipeline_spec_pb2.ValueOrRuntimeParameter, placeholders: Mapping[str, str]) -> struct_pb2.Value:
    kind = value.WhichOneof("value")
    if kind == "constant":
        text = value.constant.string_value if value.constant.WhichOneof("kind") == "string_value" else ""
        return python_value(placeholders[text]) if text in placeholders else value.constant
    if kind == "constant_value":  # schema 2.0's typed value
        field = value.constant_value.WhichOneof("value")
        return python_value(getattr(value.constant_value, field) if field else None)
    raise TaskInputError(f"a runtime value of kind {kind} (only constants are compiled by TFX)")


def input_parameter(
    key: str,
    spec: pipeline_spec_pb2.TaskInputsSpec.InputParameterSpec,
    scope: Mapping[str, struct_pb2.Value],
    upstream: Mapping[str, UpstreamState],
    placeholders: Mapping[str, str],
    final_status: Callable[[str, UpstreamState], struct_pb2.Value],
) -> struct_pb2.Value | None:
    """The value of one input parameter, as KFP's driver resolves it (driver/resolve.go:375-497); None when it
    comes from an optional parameter nobody set.

    Args:
        key: The input's name, for messages.
        spec: How the task gets it.
        scope: The enclosing DAG's input parameters (the pipeline parameters for the root DAG).
        upstream: Task name → what it left, for this DAG's tasks.
        placeholders: Whole-value constants the driver replaces (`TaskContext.placeholders`).
        final_status: The final status an exit handler gets of a producer (see `pipeline.kubeflow.emulator.backend`).

    Raises:
        TaskInputError: an upstream task or output that is not there, or an input kind run-spec does not know.
    """
    kind = spec.WhichOneof("kind")
    if kind == "runtime_value":
        return _constant(spec.runtime_value, placeholders)
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
        return final_status(producer, upstream[producer])
    raise TaskInputError(f"input {key} is a {kind} input, which run-spec does not resolve")


def build_inputs(
    task: pipeline_spec_pb2.PipelineTaskSpec,
    context: TaskContext,
    scope: Mapping[str, struct_pb2.Value],
    upstream: Mapping[str, UpstreamState],
    artifact_of: Callable[[int], pipeline_spec_pb2.RuntimeArtifact],
    final_status: Callable[[str, UpstreamState], struct_pb2.Value],
) -> pipeline_spec_pb2.ExecutorInput.Inputs:
    """The inputs KFP's driver gives this task: parameters resolved, upstream artifacts rebuilt from MLMD by
    `artifact_of` (the backend's rule for name, type and metadata).

    Raises:
        TaskInputError: an input that cannot be resolved.
    """
    inputs = pipeline_spec_pb2.ExecutorInput.Inputs()
    for key, spec in task.inputs.parameters.items():
        value = input_parameter(key, spec, scope, upstream, context.placeholders(), final_status)
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
        inputs.artifacts[key].artifacts.add().CopyFrom(artifact_of(artifacts[output]))
    return inputs


def add_default_parameters(
    executor_input: pipeline_spec_pb2.ExecutorInput, component: pipeline_spec_pb2.ComponentSpec
) -> pipeline_spec_pb2.ExecutorInput:
    """A copy with the component's parameter defaults where no value was given (the launcher's
    `addDefaultParams`, component/launcher_v2.go:1310; after the cache key, which does not see them)."""
    with_defaults = pipeline_spec_pb2.ExecutorInput()
    with_defaults.CopyFrom(executor_input)
    for name, definition in component.input_definitions.parameters.items():
        if name not in with_defaults.inputs.parameter_values and definition.HasField("default_value"):
            with_defaults.inputs.parameter_values[name].CopyFrom(definition.default_value)
    return with_defaults


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


# What the backend leaves a task between SIGTERM and SIGKILL: Kubernetes' default terminationGracePeriodSeconds.
TASK_GRACE_SECONDS = 30.0


def run_command(command: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None) -> int:
    """Runs `command` with this process's environment plus `env`, stdout and stderr into `log_path`; its exit code.

    Stopping `tfxp run-spec` (SIGTERM, Ctrl-C) stops the task as Kubernetes stops a pod: SIGTERM to the task's
    process group, SIGKILL after TASK_GRACE_SECONDS; then StopRequested is raised (the task is not recorded, so a
    rerun runs it again). The signal is recorded, not raised mid-call (foundation/stop_request.py).

    Raises:
        StopRequested: a stop signal arrived while the task ran.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, **(env or {})}
    with log_path.open("w") as log, StopRequest() as stop:
        stop.raise_if_requested()
        process = subprocess.Popen(
            list(command), stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
        try:
            while process.poll() is None:
                if stop.wait(0.2):
                    break
        finally:
            if process.poll() is None:
                _stop_task(process)
        stop.raise_if_requested()
        return process.returncode


def _stop_task(process: subprocess.Popen[Any]) -> None:
    """SIGTERM to the task's process group, SIGKILL to what is left after TASK_GRACE_SECONDS."""
    for signum, wait in ((signal.SIGTERM, TASK_GRACE_SECONDS), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
