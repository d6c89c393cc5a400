"""A compiled spec's DAGs walked and run by `tfxp run-spec`: tasks in dependency order, nested DAGs with their
input parameters, exit handlers after their DAG, and each container task with what the backend does around it.

A DAG's tasks run in waves (every task whose upstream tasks are done, one after the other in name order); a
failure skips the later waves, except exit handlers (`triggerPolicy: ALL_UPSTREAM_TASKS_COMPLETED`). A container
task's inputs come from the driver's rules (`local_task`), its outputs, downloads and uploads from the backend's
(`backend`, `launcher_io`), and its cache entry from MLMD (`mlmd_cache`).

Example:
    runner = DagRunner(spec, run, backend, store, on_task=print, pvc_names={})
    runner.run_pipeline(values)
    print(run.state)
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from components.kfp.launcher_paths import LAUNCHER_ROOT_ENV, LauncherPathError, local_path_for_uri
from foundation.path_rules import claim_dir, remove_claimed
from pipeline.kubeflow.emulator import backend as backend_rules
from pipeline.kubeflow.emulator import launcher_io, local_task
from pipeline.kubeflow.emulator.backend import EXECUTOR_LOGS, KFP, Backend, BackendError
from pipeline.kubeflow.emulator.local_task import ContainerSpec, TaskContext, TaskInputError, UpstreamState
from pipeline.kubeflow.emulator.mlmd_cache import MetadataStore, cache_fingerprint
from pipeline.kubeflow.emulator.spec_run import CACHED, FAILED, SKIPPED, SUCCEEDED, RunSpecError, SpecRun, TaskRun

# The folder standing for a pod's `/` (TFXP_LAUNCHER_ROOT), made by tfxp for every task and removed after it; one
# tfxp did not make (no `path_rules.CLAIM_MARKER`) is refused, never emptied.
POD_DIR = "pod"
POD_WHAT = "the pod folder of --state"
_COMPLETED = pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy.ALL_UPSTREAM_TASKS_COMPLETED


class DagRunner:
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

    def run_pipeline(self, values: Mapping[str, struct_pb2.Value]) -> None:
        """Runs the root DAG with the pipeline parameters `values` and sets the run's state: FAILED when a task
        other than an exit handler failed (as on KFP, the exit handler's own failure does not fail the run)."""
        try:
            self.run_dag(self.spec.root.dag, values)
        finally:
            remove_claimed(self.backend.state_dir / POD_DIR)
        tasks = self.spec.root.dag.tasks
        handlers = {name for name, task in tasks.items() if task.trigger_policy.strategy == _COMPLETED}
        failed = [task for task in self.run.tasks if task.state == FAILED and task.name not in handlers]
        self.run.state = FAILED if failed else SUCCEEDED

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

    def _context(self, name: str, task_dir: str) -> TaskContext:
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
        record = TaskRun(name=name, state=FAILED, cache_requested=task.caching_options.enable_cache)
        container = self._container(name, component)
        context = self._context(name, self._task_dir(name, uuid.uuid4().hex[:12]))
        # Every pod's `/` is the same path, as on KFP (tasks run one after the other): what a task writes into a
        # path (the Pusher's identity of a model is its local path) is the same as in a real pod.
        pod_root = claim_dir(self.backend.state_dir / POD_DIR, POD_WHAT)
        log = self.backend.state_dir / "logs" / self.run.run_id / f"{name}.log"
        started = time.monotonic()
        artifact_ids: dict[str, int] = {}
        parameters: dict[str, struct_pb2.Value] = {}
        try:
            executor_input = self._executor_input(task, component, context, scope, done, pod_root)
            fingerprint = self._fingerprint(record, executor_input, component, container)
            cached = self.store.cached_execution(fingerprint, self.run.pipeline) if fingerprint else None
            if cached is not None:
                return self._reuse(record, cached, started)
            artifact_ids, parameters = self._execute(
                record, executor_input, component, container, context, pod_root, log
            )
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
            remove_claimed(pod_root)  # the pod is gone with everything it did not upload
        record.seconds = round(time.monotonic() - started, 1)
        self._record(record)
        if record.state != SUCCEEDED:
            return UpstreamState(state=FAILED, error=record.error)
        return UpstreamState(state=SUCCEEDED, artifacts=artifact_ids, parameters=parameters)

    def _container(self, name: str, component: pipeline_spec_pb2.ComponentSpec) -> ContainerSpec:
        """The component's container executor.

        Raises:
            RunSpecError: the executor is missing or not a container.
        """
        executor = self.executors.get(component.executor_label)
        kind = executor.WhichOneof("spec") if executor is not None else None
        if kind != "container":
            raise RunSpecError(
                f"task {name} runs a {kind or 'missing'} executor ({component.executor_label}); run-spec runs "
                "container executors only"
            )
        return executor.container

    def _executor_input(
        self,
        task: pipeline_spec_pb2.PipelineTaskSpec,
        component: pipeline_spec_pb2.ComponentSpec,
        context: TaskContext,
        scope: Mapping[str, struct_pb2.Value],
        done: Mapping[str, UpstreamState],
        pod_root: Path,
    ) -> pipeline_spec_pb2.ExecutorInput:
        """The driver's part: the task's inputs resolved and its outputs provisioned."""
        inputs = local_task.build_inputs(
            task,
            context,
            scope,
            done,
            lambda i: self.store.runtime_artifact(i, self.backend.kind),
            self._final_status,
        )
        outputs = backend_rules.provision_outputs(self.backend, component, context.task_dir, str(pod_root))
        return pipeline_spec_pb2.ExecutorInput(inputs=inputs, outputs=outputs)

    def _fingerprint(
        self,
        record: TaskRun,
        executor_input: pipeline_spec_pb2.ExecutorInput,
        component: pipeline_spec_pb2.ComponentSpec,
        container: ContainerSpec,
    ) -> str:
        """KFP's cache key of the task; "" when the cache is off (vertex, `--no-cache`, the task's own option)."""
        if self.backend.kind != KFP or not self.backend.cache or not record.cache_requested:
            return ""
        pvcs = self.pvc_names.get(component.executor_label, ())
        return cache_fingerprint(executor_input, component, container, pvcs)

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
        container: ContainerSpec,
        context: TaskContext,
        pod_root: Path,
        log: Path,
    ) -> tuple[dict[str, int], dict[str, struct_pb2.Value]]:
        """The launcher's part: download, run, collect, upload, record."""
        kfp = self.backend.kind == KFP
        with_defaults = local_task.add_default_parameters(executor_input, component)
        command = local_task.resolve_command([*container.command, *container.args], component, with_defaults, context)
        if kfp:
            launcher_io.download_inputs(self.backend, executor_input, str(pod_root))
            launcher_io.prepare_outputs(executor_input, str(pod_root))
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
        written = launcher_io.read_executor_output(executor_input.outputs.output_file) if succeeded else None
        parameters = launcher_io.collect_parameters(executor_input, written, component) if written else {}
        recorded = launcher_io.upload_outputs(
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
