"""`tfxp run-spec`: a compiled KFP pipeline spec run task by task on this machine, as a KFP backend runs it.

It walks the spec as open-source KFP does: `root.dag.tasks` in dependency order (`dependentTasks`), each task's
component (`componentRef`) and executor (`executorLabel` → `deploymentSpec.executors`), nested DAGs (TFX
puts the pipeline in one, `tfx-dag`, when it has an exit handler) with their input parameters passed down,
and the exit handler (`triggerPolicy: ALL_UPSTREAM_TASKS_COMPLETED`) after its DAG, also when a task failed,
with the DAG's final status. Around each container task it does what the chosen backend does, derived from
that backend's source (`pipeline.kubeflow.emulator.backend`): `kfp` (default) builds the executor input as the
open-source driver does (inputs rebuilt from MLMD without types, named by MLMD id; outputs under
`<root>/<pipeline>/<run id>/<task>/<uuid>/`; `executor-logs`), keeps the pipeline root in an emulated object
store (default `minio://mlpipeline/v2/artifacts`), downloads inputs into and uploads outputs from a fresh
pod folder per task, and serves tasks from KFP's cache by KFP's key (a second run of the same spec shows which
tasks KFP would not run); `vertex` builds Vertex AI's executor input (no cache). The command runs exactly as
compiled, with this environment's Python instead of the image's.

What it does not emulate: images, resources, accelerators, node selectors and tolerations (the platform
document), retries, parallelism (tasks KFP would start together run one after the other), the KFP API and UI,
lifecycle hooks (open-source KFP runs none), importer and resolver executors, conditions and loops, and
storage outside the pipeline root (`data.path`, the serving base: the local paths stand for buckets or PVCs).

Example:
    run = run_spec(Path("pipeline.yaml"), params={"train_args": '{"num_steps": 40}'})
    print(run.state, [(task.name, task.state) for task in run.tasks])
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from components.kfp.launcher_paths import LAUNCHER_ROOT_ENV, LauncherPathError, local_path_for_uri
from foundation.errors import TfxpError
from pipeline.kubeflow.compiler.params import pipeline_parameters, typed_arguments
from pipeline.kubeflow.compiler.spec import load_pipeline_doc
from pipeline.kubeflow.emulator import backend as backend_rules
from pipeline.kubeflow.emulator import local_task
from pipeline.kubeflow.emulator.backend import (
    BACKENDS,
    DEFAULT_ROOT,
    EXECUTOR_LOGS,
    KFP,
    Backend,
    BackendError,
    MetadataStore,
)
from pipeline.kubeflow.emulator.local_task import TaskContext, TaskInputError, UpstreamState
from pipeline.kubeflow.emulator.spec_check import check_runnable

SUCCEEDED, CACHED, FAILED, SKIPPED = "SUCCEEDED", "CACHED", "FAILED", "SKIPPED"
# The run's record, under the state folder: runs/<run id>.json.
RUNS_DIR = "runs"
# The folder standing for a pod's `/` (TFXP_LAUNCHER_ROOT), emptied after every task.
POD_DIR = "pod"
_COMPLETED = pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy.ALL_UPSTREAM_TASKS_COMPLETED


class RunSpecError(TfxpError, ValueError):
    """The spec or the parameters cannot be run (the message says what and how to fix it)."""


@dataclass
class TaskRun:
    """One task's run.

    Attributes:
        name: The task's name; a nested DAG's tasks carry their own names.
        state: `SUCCEEDED`, `CACHED` (KFP served it from its cache), `FAILED` or `SKIPPED` (an upstream task failed,
            so it never started).
        seconds: Wall time.
        cache_requested: The spec enables KFP's cache for it.
        log: Its stdout and stderr; empty when it did not run.
        error: Why it failed; why it was skipped.
        outputs: Output artifact key → {"uri", "metadata"} as the launcher recorded them (a cached task: the
            cached execution's, with an earlier run's URIs).
        cached_from: The run whose execution a cached task reused.
    """

    name: str
    state: str
    seconds: float = 0.0
    cache_requested: bool = False
    log: str = ""
    error: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    cached_from: str = ""


@dataclass
class SpecRun:
    """A run of a compiled spec.

    Attributes:
        pipeline: The spec's pipeline name.
        run_id: The run's id (a UUID, as KFP's).
        run_name: The run's resource name.
        backend: `kfp` or `vertex`.
        pipeline_root: The pipeline root it ran with.
        run_dir: Where its artifacts are, `<root>/<pipeline>/<run id>` on KFP (an object-store URI).
        state_dir: The emulated backend's folder: object store, MLMD and cache, logs, run records.
        state: `SUCCEEDED` or `FAILED` (the pipeline's DAG; the exit handler does not change it).
        parameters: The pipeline parameters it ran with.
        tasks: Every task, in the order they ran (skipped ones where they would have run).
    """

    pipeline: str
    run_id: str
    run_name: str
    backend: str
    pipeline_root: str
    run_dir: str
    state_dir: str
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
        """Plain data, as written to `<state>/runs/<run id>.json`."""
        return asdict(self)


def pipeline_arguments(spec: pipeline_spec_pb2.PipelineSpec, params: Mapping[str, str]) -> dict[str, struct_pb2.Value]:
    """The pipeline parameters a run gets: the spec's defaults, overridden by `params` (`--param` text, checked and
    typed against the spec by `pipeline.kubeflow.compiler.params`, as `tfxp submit` does).

    Raises:
        pipeline.kubeflow.compiler.params.ParamError: a name the spec does not declare (listing those it does), a value
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
    """Runs one spec's DAGs on one backend; holds the run's record."""

    def __init__(
        self,
        spec: pipeline_spec_pb2.PipelineSpec,
        run: SpecRun,
        backend: Backend,
        store: MetadataStore,
        on_task: Callable[[TaskRun], None],
        pvc_names: Mapping[str, tuple[str, ...]],
    ) -> None:
        self.spec = spec
        self.run = run
        self.backend = backend
        self.store = store
        self.on_task = on_task
        config = json_format.ParseDict(
            json_format.MessageToDict(spec.deployment_spec), pipeline_spec_pb2.PipelineDeploymentConfig()
        )
        self.executors = config.executors
        self.pvc_names = pvc_names

    def run_dag(self, dag: pipeline_spec_pb2.DagSpec, scope: Mapping[str, struct_pb2.Value]) -> UpstreamState:
        """Runs a DAG's tasks in waves: every task whose upstream tasks are done, one after the other in name
        order. KFP would start one wave's tasks together and, once one fails (Argo's fail-fast), start no new
        ones but let those running finish; so a failure skips later waves, except exit handlers."""
        done: dict[str, UpstreamState] = {}
        pending = dict(dag.tasks)
        first_failure = ""
        failed_task = ""
        while pending:
            wave = sorted(name for name, task in pending.items() if not set(task.dependent_tasks) & set(pending))
            if not wave:
                raise RunSpecError(f"the tasks {', '.join(sorted(pending))} depend on each other; the spec has a cycle")
            failure_before_wave = first_failure
            for name in wave:
                done[name] = self._run_task(name, pending.pop(name), scope, done, failure_before_wave)
                if done[name].state == FAILED and not first_failure:
                    first_failure, failed_task = done[name].error, name
        # A DAG's error is the task that failed first: Vertex AI's final status names it, open-source KFP's does not.
        return UpstreamState(state=FAILED if first_failure else SUCCEEDED, error=failed_task)

    def _context(self, name: str, task_dir: str) -> local_task.TaskContext:
        return TaskContext(
            name=name,
            run_id=self.run.run_id,
            pipeline_root=self.run.pipeline_root,
            task_dir=task_dir,
            run_name=self.run.run_name,
            display_name=self.run.run_name,
        )

    def _final_status(self, producer: str, upstream: UpstreamState) -> struct_pb2.Value:
        return backend_rules.final_status(self.backend.kind, upstream.state, self.run.run_name, upstream.error)

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
        blocked = [dep for dep in task.dependent_tasks if not done[dep].succeeded]
        if (failure or blocked) and task.trigger_policy.strategy != _COMPLETED:
            reason = f"upstream {', '.join(blocked)} did not succeed" if blocked else "an earlier task failed"
            self._record(TaskRun(name=name, state=SKIPPED, error=reason))
            return UpstreamState(state=SKIPPED, error=reason)
        component = self.spec.components[task.component_ref.name]
        if component.WhichOneof("implementation") != "dag":
            return self.run_container(name, task, component, scope, done)
        # A nested DAG's scope: its task's input parameters, resolved in the enclosing DAG.
        inner = {}
        context = self._context(name, "")
        for key, spec in task.inputs.parameters.items():
            try:
                value = local_task.input_parameter(key, spec, scope, done, context.placeholders(), self._final_status)
            except TaskInputError as error:
                raise RunSpecError(f"DAG task {name}: {error}") from None
            if value is not None:
                inner[key] = value
        return self.run_dag(component.dag, inner)

    def _task_dir(self, name: str, execution_hint: str) -> str:
        if self.backend.kind == KFP:  # driver.go:767: <run root>/<task>/<uuid>
            return f"{self.run.run_dir}/{name}/{execution_hint}"
        return f"{self.run.run_dir}/{name}_{execution_hint}"  # Vertex: <job>/<task>_<id>

    def run_container(
        self,
        name: str,
        task: pipeline_spec_pb2.PipelineTaskSpec,
        component: pipeline_spec_pb2.ComponentSpec,
        scope: Mapping[str, struct_pb2.Value],
        done: Mapping[str, UpstreamState],
    ) -> UpstreamState:
        """Runs one container task as the backend would; a task that fails leaves its error, not an exception."""
        cache_requested = task.caching_options.enable_cache
        record = TaskRun(name=name, state=FAILED, cache_requested=cache_requested)
        executor = self.executors.get(component.executor_label)
        kind = executor.WhichOneof("spec") if executor is not None else None
        if kind != "container":
            raise RunSpecError(
                f"task {name} runs a {kind or 'missing'} executor ({component.executor_label}); run-spec runs "
                "container executors only"
            )
        container = executor.container
        context = self._context(name, self._task_dir(name, uuid.uuid4().hex[:12]))
        # Every pod's `/` is the same path, as on KFP (tasks run one after the other): what a task writes into a
        # path (the Pusher's identity of a model is its local path) is the same as in a real pod.
        pod_root = self.backend.state_dir / POD_DIR
        log = self.backend.state_dir / "logs" / self.run.run_id / f"{name}.log"
        started = time.monotonic()
        artifact_ids: dict[str, int] = {}
        parameters: dict[str, struct_pb2.Value] = {}
        try:
            inputs = local_task.build_inputs(
                task,
                context,
                scope,
                done,
                lambda i: self.store.runtime_artifact(i, self.backend.kind),
                self._final_status,
            )
            outputs = backend_rules.provision_outputs(self.backend, component, context.task_dir, str(pod_root))
            executor_input = pipeline_spec_pb2.ExecutorInput(inputs=inputs, outputs=outputs)
            fingerprint = ""
            if self.backend.kind == KFP and self.backend.cache and cache_requested:
                pvcs = self.pvc_names.get(component.executor_label, ())
                fingerprint = backend_rules.cache_fingerprint(executor_input, component, container, pvcs)
                cached = self.store.cached_execution(fingerprint, self.run.pipeline)
                if cached is not None:
                    return self._reuse(record, cached, started)
            state = self._execute(record, executor_input, component, container, context, pod_root, log)
            artifact_ids, parameters = state
            execution = self.store.record_execution(
                self.run.run_id, name, backend_rules.COMPLETE, artifact_ids,
                {key: json_format.MessageToDict(value) for key, value in parameters.items()},
            )  # fmt: skip
            if fingerprint:
                self.store.cache(fingerprint, self.run.pipeline, execution)
            record.state = SUCCEEDED
        except (TaskInputError, BackendError, LauncherPathError) as error:
            record.error = f"task {name} failed: {error}"
        except _TaskFailedError as error:
            record.error = str(error)
        finally:
            self.store.save()
            shutil.rmtree(pod_root, ignore_errors=True)  # the pod is gone with everything it did not upload
        record.seconds = round(time.monotonic() - started, 1)
        self._record(record)
        if record.state != SUCCEEDED:
            return UpstreamState(state=FAILED, error=record.error)
        return UpstreamState(state=SUCCEEDED, artifacts=artifact_ids, parameters=parameters)

    def _reuse(self, record: TaskRun, execution_id: int, started: float) -> UpstreamState:
        """A cache hit: the cached execution's outputs, as the driver hands them on (state CACHED)."""
        execution = self.store.execution(execution_id)
        record.state = CACHED
        record.cached_from = execution["run_id"]
        artifact_ids = {key: int(value) for key, value in execution["outputs"].items()}
        record.outputs = {key: self._output_view(value) for key, value in artifact_ids.items()}
        parameters = {key: local_task.python_value(value) for key, value in execution["parameters"].items()}
        self.store.record_execution(self.run.run_id, record.name, CACHED, artifact_ids, execution["parameters"])
        self.store.save()
        record.seconds = round(time.monotonic() - started, 1)
        self._record(record)
        return UpstreamState(state=CACHED, artifacts=artifact_ids, parameters=parameters)

    def _output_view(self, artifact_id: int) -> dict[str, Any]:
        stored = self.store.artifact(artifact_id)
        return {"uri": stored["uri"], "metadata": stored["metadata"], "id": artifact_id}

    def _execute(
        self,
        record: TaskRun,
        executor_input: pipeline_spec_pb2.ExecutorInput,
        component: pipeline_spec_pb2.ComponentSpec,
        container: pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec,
        context: TaskContext,
        pod_root: Path,
        log: Path,
    ) -> tuple[dict[str, int], dict[str, struct_pb2.Value]]:
        """The launcher's part: download, run, collect, upload, record."""
        kfp = self.backend.kind == KFP
        with_defaults = local_task.add_default_parameters(executor_input, component)
        command = local_task.resolve_command([*container.command, *container.args], component, with_defaults, context)
        if kfp:
            backend_rules.download_inputs(self.backend, executor_input, str(pod_root))
            backend_rules.prepare_outputs(executor_input, str(pod_root))
        else:
            Path(executor_input.outputs.output_file).parent.mkdir(parents=True, exist_ok=True)
        exit_code = local_task.run_command(command, log, env={LAUNCHER_ROOT_ENV: str(pod_root)} if kfp else None)
        record.log = str(log)
        succeeded = exit_code == 0
        if kfp and EXECUTOR_LOGS in executor_input.outputs.artifacts:
            # The launcher's log writer tees the command's output into executor-logs (launcher_v2.go:632).
            logs = executor_input.outputs.artifacts[EXECUTOR_LOGS].artifacts[0].uri
            target = Path(local_path_for_uri(logs, str(pod_root)))
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(log, target)
        written = backend_rules.read_executor_output(executor_input.outputs.output_file) if succeeded else None
        parameters = backend_rules.collect_parameters(executor_input, written, component) if written else {}
        recorded = backend_rules.upload_outputs(
            self.backend, executor_input, written or pipeline_spec_pb2.ExecutorOutput(), str(pod_root), succeeded
        )
        artifact_ids = {
            key: self.store.record_artifact(key, artifact, session=kfp) for key, artifact in recorded.items()
        }
        record.outputs = {key: self._output_view(value) for key, value in artifact_ids.items()}
        if not succeeded:
            self.store.record_execution(self.run.run_id, record.name, backend_rules.FAILED, artifact_ids, {})
            raise _TaskFailedError(f"task {record.name} failed: exit code {exit_code} (log: {log})")
        return artifact_ids, parameters

    def _record(self, task: TaskRun) -> None:
        self.run.tasks.append(task)
        self.on_task(task)


class _TaskFailedError(Exception):
    """The task's command exited non-zero (the message says so and names the log)."""


def _pvc_names(doc: Any) -> dict[str, tuple[str, ...]]:
    """Executor label → the PVCs its pods mount (the platform document's `pvcMount`), which KFP's cache key holds."""
    executors = json_format.MessageToDict(doc.platform_spec).get("platforms", {}).get("kubernetes", {})
    names: dict[str, tuple[str, ...]] = {}
    for label, config in executors.get("deploymentSpec", {}).get("executors", {}).items():
        mounts = config.get("pvcMount", [])
        found = [
            m.get("pvcNameParameter", {}).get("runtimeValue", {}).get("constant") or m.get("constant") for m in mounts
        ]
        names[label] = tuple(str(name) for name in found if name)
    return names


def default_state_dir(spec_path: Path) -> Path:
    """`--state`'s default: a directory beside the spec, `<spec stem>-runs/`."""
    return spec_path.with_name(f"{spec_path.stem}-runs")


def run_spec(
    spec_path: Path,
    params: Mapping[str, str] | None = None,
    on_task: Callable[[TaskRun], None] | None = None,
    *,
    backend: str = KFP,
    pipeline_root: str | None = None,
    state_dir: Path | None = None,
    publish_logs: bool = True,
    cache: bool = True,
    run_id: str | None = None,
) -> SpecRun:
    """Runs a compiled pipeline spec locally, task by task, as `backend` would (see the module docstring).

    Args:
        spec_path: The compiled pipeline YAML (`tfxp compile`).
        params: Pipeline parameter values as `--param` text (typed as the spec declares them); the rest take
            their defaults.
        on_task: Called after each task finishes, is served from the cache or is skipped.
        backend: `kfp` (open-source KFP) or `vertex` (Vertex AI Pipelines).
        pipeline_root: The run's pipeline root (what `tfxp submit` sends as `runtime_config.pipeline_root`);
            default `minio://mlpipeline/v2/artifacts` (kfp) or `<state>/vertex-root` (vertex). The spec's own
            `defaultPipelineRoot` is not used: open-source KFP's driver does not read it.
        state_dir: The emulated backend's folder (object store, MLMD and cache, logs, run records); default
            `default_state_dir(spec_path)`. A later run with the same folder sees this run's cache.
        publish_logs: KFP's `executor-logs` output (on by default since KFP 2.5).
        cache: KFP's cache for this run (`tfxp submit --no-cache` turns it off).
        run_id: The run's id; default a new UUID.

    Returns:
        The run, also written to `<state>/runs/<run id>.json`. A failed task fails the run, not this call.

    Raises:
        pipeline.kubeflow.compiler.params.ParamError: unknown parameters, or values that do not fit their types.
        RunSpecError: a spec that cannot run (every problem `spec_check.spec_problems` finds: structure,
            dependencies, cycles, value types), a spec feature run-spec does not run, or a root the backend
            cannot hold; all before the first task.
        pipeline.kubeflow.compiler.spec.SpecPatchError: the file is not a compiled KFP pipeline spec.
    """
    if backend not in BACKENDS:
        raise RunSpecError(f"--backend {backend}: expected one of {', '.join(BACKENDS)}")
    state = (state_dir or default_state_dir(spec_path)).resolve()
    emulated = Backend(kind=backend, state_dir=state, publish_logs=publish_logs, cache=cache)
    root = (pipeline_root or (DEFAULT_ROOT if backend == KFP else str(state / "vertex-root"))).rstrip("/")
    try:
        emulated.check_root(root)
    except BackendError as error:
        raise RunSpecError(str(error)) from None
    doc = load_pipeline_doc(spec_path)
    spec = doc.pipeline_spec
    try:
        check_runnable(spec, str(spec_path))  # the whole spec, before the first task
    except ValueError as error:
        raise RunSpecError(str(error)) from None
    values = pipeline_arguments(spec, params or {})
    try:
        state.mkdir(parents=True, exist_ok=True)
        store = MetadataStore(state / "mlmd.json")
    except BackendError as error:
        raise RunSpecError(str(error)) from None
    except OSError as error:
        raise RunSpecError(f"--state {state}: cannot write there ({error.strerror}); pass a writable folder") from None
    pipeline = spec.pipeline_info.name
    run_id = run_id or str(uuid.uuid4())
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    # metadata/client.go:420: a run's root is <root>/<pipeline>/<run id> (a query string, e.g. ?region=, stays on the
    # run's root only; driver.go:767 drops it for the tasks' folders); Vertex: <root>/<project number>/<job>.
    base = root.split("?", 1)[0].rstrip("/")
    run_dir = f"{base}/{pipeline}/{run_id}" if backend == KFP else f"{root}/123456789/{pipeline}-{stamp}"
    run = SpecRun(
        pipeline=pipeline,
        run_id=run_id,
        run_name=f"{pipeline}-{run_id[:5]}" if backend == KFP else f"{pipeline}-{stamp}",
        backend=backend,
        pipeline_root=root,
        run_dir=run_dir,
        state_dir=str(state),
        parameters={name: json_format.MessageToDict(value) for name, value in values.items()},
    )
    runner = _Runner(spec, run, emulated, store, on_task or (lambda task: None), _pvc_names(doc))
    try:
        runner.run_dag(spec.root.dag, values)
    finally:
        shutil.rmtree(state / POD_DIR, ignore_errors=True)
    # As on KFP, the exit handler's own failure does not fail the run.
    handlers = {name for name, task in spec.root.dag.tasks.items() if task.trigger_policy.strategy == _COMPLETED}
    failed = [task for task in run.tasks if task.state == FAILED and task.name not in handlers]
    run.state = FAILED if failed else SUCCEEDED
    record = state / RUNS_DIR / f"{run_id}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(run.to_dict(), indent=2) + "\n")
    return run
