"""`tfxp run-spec`: a compiled KFP pipeline spec run task by task on this machine — does the compiled pipeline run?

It walks the spec as open-source KFP does: `root.dag.tasks` in dependency order (`dependentTasks`), each task's
component (`componentRef`) and executor (`executorLabel` → `deploymentSpec.executors`), nested DAGs (TFX
puts the pipeline in one, `tfx-dag`, when it has an exit handler) with their input parameters passed down,
and the exit handler (`triggerPolicy: ALL_UPSTREAM_TASKS_COMPLETED`) after its DAG, also when a task failed,
with the DAG's final status. Each container task runs its command exactly as compiled — the TFX v2
entrypoint with KFP's placeholders resolved into an `ExecutorInput` (`pipeline.kubeflow.local_task`) — as a
subprocess of this environment's Python instead of a pod; artifacts pass by URI under a local pipeline root,
`<root>/<pipeline>/<run id>/<task>/<output key>`, the layout KFP's driver uses.

What it does not emulate: pods, images, resources, accelerators, node selectors and tolerations (the
platform document), retries, parallelism (tasks KFP would start together run one after the other), KFP's
cache (caching flags are recorded per task, every task runs), MLMD (artifacts pass directly from task to
task), the KFP API and UI, lifecycle hooks (open-source KFP runs none: the ExampleGen `preCacheCheck` driver
is skipped), importer and resolver executors, conditions and loops.

Example:
    run = run_spec(Path("pipeline.yaml"), Path("run-root"), {"train_args": '{"num_steps": 40}'})
    print(run.state, [(task.name, task.state) for task in run.tasks])
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from pipeline.kubeflow import local_task
from pipeline.kubeflow.local_task import TaskContext, TaskInputError, UpstreamState
from pipeline.kubeflow.params import pipeline_parameters, typed_arguments
from pipeline.kubeflow.spec import load_pipeline_doc

SUCCEEDED, FAILED, SKIPPED = "SUCCEEDED", "FAILED", "SKIPPED"
# The run's record, written beside its outputs.
RUN_RECORD = "run-spec.json"
_COMPLETED = pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy.ALL_UPSTREAM_TASKS_COMPLETED


class RunSpecError(ValueError):
    """The spec or the parameters cannot be run (the message says what and how to fix it)."""


@dataclass
class TaskRun:
    """One task's run.

    Attributes:
        name: The task's name; a nested DAG's tasks carry their own names.
        state: `SUCCEEDED`, `FAILED` or `SKIPPED` (an upstream task failed, so it never started).
        seconds: Wall time.
        cache_requested: The spec enables KFP's cache for it (run-spec runs it anyway).
        log: Its stdout and stderr; empty when it did not run.
        error: Why it failed; why it was skipped.
        outputs: Output artifact key → {"uri", "metadata"} as the executor left them.
    """

    name: str
    state: str
    seconds: float = 0.0
    cache_requested: bool = False
    log: str = ""
    error: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class SpecRun:
    """A run of a compiled spec.

    Attributes:
        pipeline: The spec's pipeline name.
        run_id: `<pipeline>-<UTC time>`, also the run's name.
        run_dir: Where its artifacts and logs are, `<root>/<pipeline>/<run id>`.
        state: `SUCCEEDED` or `FAILED` (the pipeline's DAG; the exit handler does not change it).
        parameters: The pipeline parameters it ran with.
        tasks: Every task, in the order they ran (skipped ones where they would have run).
    """

    pipeline: str
    run_id: str
    run_dir: str
    state: str = SUCCEEDED
    parameters: dict[str, Any] = field(default_factory=dict)
    tasks: list[TaskRun] = field(default_factory=list)

    def task(self, name: str) -> TaskRun:
        """The task run called `name`.

        Raises:
            KeyError: no such task.
        """
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task {name}; tasks: {', '.join(task.name for task in self.tasks)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as written to `RUN_RECORD`."""
        return asdict(self)


def pipeline_arguments(spec: pipeline_spec_pb2.PipelineSpec, params: Mapping[str, str]) -> dict[str, struct_pb2.Value]:
    """The pipeline parameters a run gets: the spec's defaults, overridden by `params` (`--param` text, checked and
    typed against the spec by `pipeline.kubeflow.params`, as `tfxp submit` does).

    Raises:
        pipeline.kubeflow.params.ParamError: a name the spec does not declare (listing those it does), a value
            that does not fit its type, or a parameter without a default and without a value.
    """
    declared = pipeline_parameters(json_format.MessageToDict(spec))
    typed = typed_arguments(params, declared, spec.pipeline_info.name)
    values = {
        name: definition.default_value
        for name, definition in spec.root.input_definitions.parameters.items()
        if definition.HasField("default_value")
    }
    values.update({name: local_task.python_value(value) for name, value in typed.items()})
    return values


class _Runner:
    """Runs one spec's DAGs; holds the run's record."""

    def __init__(
        self, spec: pipeline_spec_pb2.PipelineSpec, run: SpecRun, root: str, on_task: Callable[[TaskRun], None]
    ) -> None:
        self.spec = spec
        self.run = run
        self.root = root
        self.on_task = on_task
        config = json_format.ParseDict(
            json_format.MessageToDict(spec.deployment_spec), pipeline_spec_pb2.PipelineDeploymentConfig()
        )
        self.executors = config.executors

    def run_dag(self, dag: pipeline_spec_pb2.DagSpec, scope: Mapping[str, struct_pb2.Value]) -> UpstreamState:
        """Runs a DAG's tasks in waves: every task whose upstream tasks are done, one after the other in name
        order. KFP would start one wave's tasks together and, once one fails (Argo's fail-fast), start no new
        ones but let those running finish; so a failure skips later waves, except exit handlers."""
        done: dict[str, UpstreamState] = {}
        pending = dict(dag.tasks)
        first_failure = ""
        while pending:
            wave = sorted(name for name, task in pending.items() if not set(task.dependent_tasks) & set(pending))
            if not wave:
                raise RunSpecError(f"the tasks {', '.join(sorted(pending))} depend on each other; the spec has a cycle")
            failure_before_wave = first_failure
            for name in wave:
                done[name] = self._run_task(name, pending.pop(name), scope, done, failure_before_wave)
                if done[name].state == FAILED and not first_failure:
                    first_failure = done[name].error
        return UpstreamState(state=FAILED if first_failure else SUCCEEDED, error=first_failure)

    def _run_task(
        self,
        name: str,
        task: pipeline_spec_pb2.PipelineTaskSpec,
        scope: Mapping[str, struct_pb2.Value],
        done: Mapping[str, UpstreamState],
        failure: str,
    ) -> UpstreamState:
        if task.trigger_policy.condition or task.WhichOneof("iterator"):
            raise RunSpecError(f"task {name} has a condition or a loop, which run-spec does not run")
        blocked = [dep for dep in task.dependent_tasks if done[dep].state != SUCCEEDED]
        if (failure or blocked) and task.trigger_policy.strategy != _COMPLETED:
            reason = f"upstream {', '.join(blocked)} did not succeed" if blocked else "an earlier task failed"
            self._record(TaskRun(name=name, state=SKIPPED, error=reason))
            return UpstreamState(state=SKIPPED, error=reason)
        component = self.spec.components[task.component_ref.name]
        if component.WhichOneof("implementation") != "dag":
            return self.run_container(name, task, component, scope, done)
        # A nested DAG's scope: its task's input parameters, resolved in the enclosing DAG.
        inner = {}
        for key, spec in task.inputs.parameters.items():
            try:
                value = local_task.input_parameter(key, spec, scope, done, self.run.run_id)
            except TaskInputError as error:
                raise RunSpecError(f"DAG task {name}: {error}") from None
            if value is not None:
                inner[key] = value
        return self.run_dag(component.dag, inner)

    def run_container(
        self,
        name: str,
        task: pipeline_spec_pb2.PipelineTaskSpec,
        component: pipeline_spec_pb2.ComponentSpec,
        scope: Mapping[str, struct_pb2.Value],
        done: Mapping[str, UpstreamState],
    ) -> UpstreamState:
        """Runs one container task; a task that fails leaves its error, not an exception."""
        record = TaskRun(name=name, state=FAILED, cache_requested=task.caching_options.enable_cache)
        executor = self.executors.get(component.executor_label)
        kind = executor.WhichOneof("spec") if executor is not None else None
        if kind != "container":
            raise RunSpecError(
                f"task {name} runs a {kind or 'missing'} executor ({component.executor_label}); run-spec runs "
                "container executors only (tfxp compile drops resolver tasks)"
            )
        context = TaskContext(
            name=name, run_id=self.run.run_id, pipeline_root=self.root, task_dir=f"{self.run.run_dir}/{name}"
        )
        log = Path(context.task_dir) / "task.log"
        started = time.monotonic()
        artifacts: dict[str, pipeline_spec_pb2.RuntimeArtifact] = {}
        parameters: dict[str, struct_pb2.Value] = {}
        try:
            executor_input = local_task.build_executor_input(task, component, context, scope, done)
            container = executor.container
            command = local_task.resolve_command(
                [*container.command, *container.args], component, executor_input, context
            )
            exit_code = local_task.run_command(command, log)
            record.log = str(log)
            if exit_code != 0:
                record.error = f"task {name} failed: exit code {exit_code} (log: {log})"
            else:
                artifacts, parameters = local_task.read_outputs(executor_input)
                record.state = SUCCEEDED
                record.outputs = {
                    key: {"uri": artifact.uri, "metadata": json_format.MessageToDict(artifact.metadata)}
                    for key, artifact in artifacts.items()
                }
        except TaskInputError as error:
            record.error = f"task {name} failed: {error}"
        record.seconds = round(time.monotonic() - started, 1)
        self._record(record)
        if record.state != SUCCEEDED:
            return UpstreamState(state=FAILED, error=record.error)
        return UpstreamState(state=SUCCEEDED, artifacts=artifacts, parameters=parameters)

    def _record(self, task: TaskRun) -> None:
        self.run.tasks.append(task)
        self.on_task(task)


def default_pipeline_root(spec_path: Path) -> Path:
    """`--pipeline-root`'s default: a directory beside the spec, `<spec stem>-runs/`."""
    return spec_path.with_name(f"{spec_path.stem}-runs")


def run_spec(
    spec_path: Path,
    pipeline_root: Path | None = None,
    params: Mapping[str, str] | None = None,
    on_task: Callable[[TaskRun], None] | None = None,
    run_id: str | None = None,
) -> SpecRun:
    """Runs a compiled pipeline spec locally, task by task (see the module docstring for what is emulated).

    Args:
        spec_path: The compiled pipeline YAML (`tfxp compile`).
        pipeline_root: Local directory for the run's artifacts; default `default_pipeline_root(spec_path)`.
            The spec's own `defaultPipelineRoot` (a bucket) is not used.
        params: Pipeline parameter values as `--param` text (typed as the spec declares them); the rest take
            their defaults.
        on_task: Called after each task finishes or is skipped.
        run_id: The run's id; default `<pipeline>-<UTC time>`.

    Returns:
        The run, also written to `<run dir>/run-spec.json`. A failed task fails the run, not this call.

    Raises:
        pipeline.kubeflow.params.ParamError: unknown parameters, or values that do not fit their types.
        RunSpecError: a spec feature run-spec does not run.
        pipeline.kubeflow.spec.SpecPatchError: the file is not a compiled KFP pipeline spec.
    """
    spec = load_pipeline_doc(spec_path).pipeline_spec
    values = pipeline_arguments(spec, params or {})
    root = (pipeline_root or default_pipeline_root(spec_path)).resolve()
    pipeline = spec.pipeline_info.name
    run_id = run_id or f"{pipeline}-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}"
    run = SpecRun(
        pipeline=pipeline,
        run_id=run_id,
        run_dir=f"{root}/{pipeline}/{run_id}",
        parameters={name: json_format.MessageToDict(value) for name, value in values.items()},
    )
    Path(run.run_dir).mkdir(parents=True, exist_ok=True)
    runner = _Runner(spec, run, str(root), on_task or (lambda task: None))
    runner.run_dag(spec.root.dag, values)
    # As on KFP, the exit handler's own failure does not fail the run.
    handlers = {name for name, task in spec.root.dag.tasks.items() if task.trigger_policy.strategy == _COMPLETED}
    failed = [task for task in run.tasks if task.state == FAILED and task.name not in handlers]
    run.state = FAILED if failed else SUCCEEDED
    (Path(run.run_dir) / RUN_RECORD).write_text(json.dumps(run.to_dict(), indent=2) + "\n")
    return run
