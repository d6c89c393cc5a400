"""The one place that edits a compiled KFP pipeline spec: what TFX's V2 compiler leaves out, set with
kfp-pipeline-spec's own protos (never string edits).

TFX's `KubeflowV2DagRunner` writes the KFP IR (a `PipelineSpec`) with every executor on one image, no
CPU/memory/accelerator requests, no retry policy and no pipeline root. `patch_pipeline_doc` sets all
of that from a plain `SpecPatch`; `load_pipeline_doc` reads the YAML exactly as `kfp.Client` does before
it sends a run, so tests see what the server would see.

Example (`Resources` is from `pipeline.kubeflow.compiler.pod`):
    doc = load_pipeline_doc(Path("pipeline.yaml"))
    patch_pipeline_doc(doc, SpecPatch(image="registry/tfxp:0.1.0", resources=Resources("2", "8G")))
    write_pipeline_doc(doc, Path("pipeline.yaml"))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import yaml
from google.protobuf import duration_pb2, json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from components.kfp.entrypoint import ENTRYPOINT, TFX_ENTRYPOINT
from foundation.errors import TfxpError
from foundation.yaml_files import YamlDuplicateKeyError, YamlLimitError, read_yaml_all
from pipeline.kubeflow.compiler.pod import Resources, Toleration, cpu_cores, image_warnings, memory_gigabytes

ContainerSpec: TypeAlias = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec
ResourceSpec: TypeAlias = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec

# The platform key KFP's Kubernetes extension (kfp-kubernetes) reads executor configs from.
KUBERNETES_PLATFORM = "kubernetes"


class SpecPatchError(TfxpError, ValueError):
    """The patch does not fit the compiled spec (unknown task, bad quantity); the message says how to fix it."""


@dataclass(frozen=True)
class RetryPolicy:
    """Attributes:
    max_retries: Retries after the first attempt.
    backoff_seconds: Wait before the first retry.
    backoff_factor: Each further wait is this many times the previous one.
    backoff_max_seconds: Longest wait.
    """

    max_retries: int
    backoff_seconds: int = 60
    backoff_factor: float = 2.0
    backoff_max_seconds: int = 3600


@dataclass(frozen=True)
class SpecPatch:
    """Everything `patch_pipeline_doc` sets. Task names are the TFX component ids (`Trainer`, ...).

    Attributes:
        image: Image of every container executor.
        resources: Requests of every container task without an entry in `task_resources`.
        task_resources: Per-task requests, e.g. `{"Trainer": Resources("8", "32G", Accelerator(...))}`.
        retry: Retry policy of every container task; None = no retries.
        enable_cache: KFP caching for every task not in `uncached_tasks`.
        uncached_tasks: Tasks KFP must always run.
        display_name: Pipeline name in the KFP UI; empty = leave unset.
        pipeline_root: `default_pipeline_root`; empty = the KFP server's default.
        node_selectors: Per-task node labels the pod requires.
        tolerations: Per-task tolerations.
        parameter_defaults: Defaults of the pipeline parameters (TFX writes them into a PipelineJob's runtime
            config, which the IR YAML does not have).
    """

    image: str
    resources: Resources
    task_resources: Mapping[str, Resources] = field(default_factory=dict)
    retry: RetryPolicy | None = None
    enable_cache: bool = True
    uncached_tasks: frozenset[str] = frozenset()
    display_name: str = ""
    pipeline_root: str = ""
    node_selectors: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    tolerations: Mapping[str, tuple[Toleration, ...]] = field(default_factory=dict)
    parameter_defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class PipelineDoc:
    """A compiled pipeline: the IR and the (optional) platform config, the YAML's first and later documents."""

    pipeline_spec: pipeline_spec_pb2.PipelineSpec
    platform_spec: pipeline_spec_pb2.PlatformSpec

    def to_dicts(self) -> list[dict[str, Any]]:
        """The YAML documents, as kfp's compiler writes them (platform spec only when it has content)."""
        documents = [json_format.MessageToDict(self.pipeline_spec)]
        if self.platform_spec != pipeline_spec_pb2.PlatformSpec():
            documents.append(json_format.MessageToDict(self.platform_spec))
        return documents


def load_pipeline_doc(path: Path) -> PipelineDoc:
    """Reads a compiled pipeline YAML the way `kfp.Client.create_run_from_pipeline_package` does, but with aliases
    and nesting bounded (`foundation.yaml_files`): `tfxp submit`, `pipeline upload` and `schedule create` call
    this before they hand the file to kfp, whose own `yaml.safe_load` is unbounded.

    The first YAML document is the `PipelineSpec`; later documents merge into the `PlatformSpec`.

    Raises:
        SpecPatchError: the file is not YAML, has an alias bomb or a key written twice, or is not a KFP pipeline
            spec (e.g. TFX's `pipeline.json` wrapper).
    """
    try:
        documents = [doc for doc in read_yaml_all(path) if doc is not None]
    except UnicodeDecodeError:
        raise SpecPatchError(f"{path} is not text; compile a pipeline with `tfxp compile --out {path}`") from None
    except YamlLimitError as error:
        raise SpecPatchError(f"{error}; tfxp compile writes no aliases, so recompile with `tfxp compile`") from None
    except YamlDuplicateKeyError as error:
        raise SpecPatchError(f"{error}; tfxp compile writes each key once: recompile with `tfxp compile`") from None
    except yaml.YAMLError as error:
        raise SpecPatchError(f"{path} is not YAML ({error}); compile it with `tfxp compile --out {path}`") from None
    if not documents or not isinstance(documents[0], dict):
        raise SpecPatchError(f"{path} holds no pipeline spec; compile it with `tfxp compile --out {path}`")
    if "pipelineSpec" in documents[0]:
        raise SpecPatchError(
            f"{path} is a PipelineJob wrapper (TFX's default pipeline.json), which kfp.Client rejects; "
            f"compile the IR YAML with `tfxp compile --out pipeline.yaml`"
        )
    platform: dict[str, Any] = {}
    for document in documents[1:]:
        platform.update(document)
    try:
        doc = PipelineDoc(
            pipeline_spec=json_format.ParseDict(documents[0], pipeline_spec_pb2.PipelineSpec()),
            platform_spec=json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec()),
        )
    except json_format.ParseError as error:
        raise SpecPatchError(f"{path} is not a KFP pipeline spec: {error}") from None
    if not doc.pipeline_spec.root.dag.tasks or not doc.pipeline_spec.deployment_spec:
        raise SpecPatchError(
            f"{path} is not a complete KFP pipeline spec (no root DAG tasks or no deploymentSpec): nothing would "
            f"run; compile it with `tfxp compile --out {path}`"
        )
    return doc


def dump_pipeline_doc(doc: PipelineDoc, header: str = "") -> str:
    """The YAML text of `doc` (keys sorted, as kfp's compiler writes it), after optional `#` comment lines."""
    comments = "".join(f"# {line}\n" for line in header.splitlines())
    return comments + yaml.safe_dump_all(doc.to_dicts(), sort_keys=True)


def write_pipeline_doc(doc: PipelineDoc, path: Path, header: str = "") -> None:
    """Writes `doc` to `path` (parent directories are created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_pipeline_doc(doc, header))


def _deployment_config(spec: pipeline_spec_pb2.PipelineSpec) -> pipeline_spec_pb2.PipelineDeploymentConfig:
    # The IR stores the deployment config as a Struct; edit it as its real proto, then store it back.
    return json_format.ParseDict(
        json_format.MessageToDict(spec.deployment_spec), pipeline_spec_pb2.PipelineDeploymentConfig()
    )


def _store_deployment_config(
    spec: pipeline_spec_pb2.PipelineSpec, config: pipeline_spec_pb2.PipelineDeploymentConfig
) -> None:
    spec.deployment_spec.Clear()
    spec.deployment_spec.update(json_format.MessageToDict(config))


def dags(spec: pipeline_spec_pb2.PipelineSpec) -> list[pipeline_spec_pb2.DagSpec]:
    """The root DAG, then the DAGs of the DAG components its tasks run, outermost first.

    TFX's compiler nests every pipeline task in one DAG component, `tfx-dag`, when the pipeline has an
    exit handler; the root then runs `tfx-dag` and the exit handler.
    """
    found = [spec.root.dag]
    for dag in found:  # grows while it is walked
        for task in dag.tasks.values():
            component = spec.components.get(task.component_ref.name)
            if component is not None and component.WhichOneof("implementation") == "dag":
                found.append(component.dag)
    return found


def pipeline_tasks(spec: pipeline_spec_pb2.PipelineSpec) -> dict[str, pipeline_spec_pb2.PipelineTaskSpec]:
    """Every task that runs an executor (not a nested DAG), by name, from every DAG.

    TFX names tasks after component ids, which are unique across the pipeline.
    """
    return {
        name: task
        for dag in dags(spec)
        for name, task in dag.tasks.items()
        if spec.components[task.component_ref.name].WhichOneof("implementation") != "dag"
    }


def executor_label(spec: pipeline_spec_pb2.PipelineSpec, task: str) -> str:
    """The executor label of a task in any DAG (task → component → executor)."""
    component = pipeline_tasks(spec)[task].component_ref.name
    return spec.components[component].executor_label


def container_tasks(spec: pipeline_spec_pb2.PipelineSpec) -> Iterator[tuple[str, ContainerSpec]]:
    """(task name, container spec) of every task that runs a container, in sorted order."""
    config = _deployment_config(spec)
    for task in sorted(pipeline_tasks(spec)):
        executor = config.executors.get(executor_label(spec, task))
        if executor is not None and executor.WhichOneof("spec") == "container":
            yield task, executor.container


def _resource_spec(resources: Resources) -> ResourceSpec:
    cpu = cpu_cores(resources.cpu)
    memory = memory_gigabytes(resources.memory)
    # The string fields are what current KFP reads; the float fields keep older backends working
    # (kfp's own compiler sets both the same way).
    spec = ResourceSpec(
        resource_cpu_request=resources.cpu,
        resource_cpu_limit=resources.cpu,
        resource_memory_request=resources.memory,
        resource_memory_limit=resources.memory,
        cpu_request=cpu,
        cpu_limit=cpu,
        memory_request=memory,
        memory_limit=memory,
    )
    accelerator = resources.accelerator
    if accelerator is not None and accelerator.count > 0:
        spec.accelerator.CopyFrom(
            ResourceSpec.AcceleratorConfig(
                type=accelerator.type,
                count=accelerator.count,
                resource_type=accelerator.type,
                resource_count=str(accelerator.count),
            )
        )
    return spec


def _check_task_names(spec: pipeline_spec_pb2.PipelineSpec, names: Any, what: str) -> None:
    tasks = pipeline_tasks(spec)
    unknown = sorted(set(names) - set(tasks))
    if unknown:
        raise SpecPatchError(
            f"{what} names {', '.join(unknown)}, which the compiled pipeline does not have; "
            f"its tasks are {', '.join(sorted(tasks))}"
        )


def _is_exit_handler(task: pipeline_spec_pb2.PipelineTaskSpec) -> bool:
    return any(spec.WhichOneof("kind") == "task_final_status" for spec in task.inputs.parameters.values())


def exit_handler_tasks(spec: pipeline_spec_pb2.PipelineSpec) -> list[str]:
    """The tasks, in any DAG, that take a task's final status as an input (an exit handler), sorted."""
    return sorted(name for name, task in pipeline_tasks(spec).items() if _is_exit_handler(task))


def wire_exit_handler(spec: pipeline_spec_pb2.PipelineSpec) -> None:
    """Completes what TFX's compiler leaves out when a pipeline has both an exit handler and run parameters.

    TFX moves the pipeline's tasks into the DAG component `tfx-dag` but declares the run parameters on the
    root only, so a task's `componentInputParameter` would name an input `tfx-dag` does not have: the
    DAG component gets the root's parameter definitions and the root's `tfx-dag` task passes them on,
    as kfp's compiler does for `dsl.ExitHandler`. The exit handler's final-status input is declared
    `TASK_FINAL_STATUS`, the type kfp gives `dsl.PipelineTaskFinalStatus` (TFX declares `STRING`).
    """
    for task in spec.root.dag.tasks.values():
        component = spec.components[task.component_ref.name]
        if component.WhichOneof("implementation") == "dag":
            for name, definition in spec.root.input_definitions.parameters.items():
                component.input_definitions.parameters[name].parameter_type = definition.parameter_type
                task.inputs.parameters[name].component_input_parameter = name
        for key, value in task.inputs.parameters.items():
            if value.WhichOneof("kind") == "task_final_status":
                definition = component.input_definitions.parameters[key]
                definition.parameter_type = pipeline_spec_pb2.ParameterType.TASK_FINAL_STATUS


def _set_kubernetes_executor_config(doc: PipelineDoc, label: str, values: dict[str, Any]) -> None:
    platform = doc.platform_spec.platforms[KUBERNETES_PLATFORM]
    platform.deployment_spec.executors[label].update(values)


def patch_pipeline_doc(doc: PipelineDoc, patch: SpecPatch) -> None:
    """Applies `patch` to `doc` in place.

    An exit handler is wired up first (see `wire_exit_handler`). Resources, the image and retries apply to
    container tasks; caching to every task in any DAG but the exit handler, which must run on every run.

    Raises:
        SpecPatchError: a task name in the patch is not in the spec, a quantity is malformed, or the
            accelerator has a count but no type.
    """
    spec = doc.pipeline_spec
    _check_patch(spec, patch)
    wire_exit_handler(spec)
    config = _deployment_config(spec)
    tasks = pipeline_tasks(spec)
    for task in sorted(tasks):
        body = tasks[task]
        # A cached exit handler would not run, and so not report the run.
        cached = patch.enable_cache and task not in patch.uncached_tasks and not _is_exit_handler(body)
        body.caching_options.enable_cache = cached
        label = executor_label(spec, task)
        executor = config.executors.get(label)
        if executor is not None and executor.WhichOneof("spec") == "container":
            _patch_container_task(doc, task, body, executor.container, label, patch)
    _store_deployment_config(spec, config)
    _set_parameter_defaults(spec, patch.parameter_defaults)
    if patch.display_name:
        spec.pipeline_info.display_name = patch.display_name
    if patch.pipeline_root:
        spec.default_pipeline_root = patch.pipeline_root


def _check_patch(spec: pipeline_spec_pb2.PipelineSpec, patch: SpecPatch) -> None:
    """Refuses a patch that does not fit `spec`: an empty image, unknown task names, an accelerator without a type.

    Raises:
        SpecPatchError: names what does not fit.
    """
    try:
        image_warnings(patch.image)
    except ValueError as error:  # an empty image
        raise SpecPatchError(str(error)) from None
    _check_task_names(spec, patch.task_resources, "the per-task resources")
    _check_task_names(spec, patch.uncached_tasks, "kubeflow.uncached_components")
    _check_task_names(spec, patch.node_selectors, "the node selectors")
    _check_task_names(spec, patch.tolerations, "the tolerations")
    for task, resources in [("every task", patch.resources), *patch.task_resources.items()]:
        accelerator = resources.accelerator
        if accelerator is not None and accelerator.count > 0 and not accelerator.type:
            raise SpecPatchError(f"{task}: {accelerator.count} accelerators requested without an accelerator type")


def _patch_container_task(
    doc: PipelineDoc,
    task: str,
    body: pipeline_spec_pb2.PipelineTaskSpec,
    container: ContainerSpec,
    label: str,
    patch: SpecPatch,
) -> None:
    """A container task's image, entrypoint, resources, retries, node selector and tolerations.

    Raises:
        SpecPatchError: a malformed quantity in the task's resources.
    """
    container.image = patch.image
    if list(container.command) == ["python", "-m", TFX_ENTRYPOINT]:
        # TFX's runner cannot read the executor input open-source KFP builds (components.kfp.entrypoint).
        container.command[:] = ["python", "-m", ENTRYPOINT]
    try:
        container.resources.CopyFrom(_resource_spec(patch.task_resources.get(task, patch.resources)))
    except ValueError as error:
        raise SpecPatchError(f"resources of task {task}: {error}") from None
    body.ClearField("retry_policy")
    if patch.retry is not None and patch.retry.max_retries > 0:
        body.retry_policy.CopyFrom(
            pipeline_spec_pb2.PipelineTaskSpec.RetryPolicy(
                max_retry_count=patch.retry.max_retries,
                backoff_duration=duration_pb2.Duration(seconds=patch.retry.backoff_seconds),
                backoff_factor=patch.retry.backoff_factor,
                backoff_max_duration=duration_pb2.Duration(seconds=patch.retry.backoff_max_seconds),
            )
        )
    kubernetes: dict[str, Any] = {}
    if patch.node_selectors.get(task):
        kubernetes["nodeSelector"] = {"labels": dict(patch.node_selectors[task])}
    if patch.tolerations.get(task):
        kubernetes["tolerations"] = [toleration.to_dict() for toleration in patch.tolerations[task]]
    if kubernetes:
        _set_kubernetes_executor_config(doc, label, kubernetes)


def _set_parameter_defaults(spec: pipeline_spec_pb2.PipelineSpec, defaults: Mapping[str, Any]) -> None:
    """The run parameters' compiled defaults, written as kfp's compiler writes a parameter with a default.

    Raises:
        SpecPatchError: a default for a parameter the spec does not declare.
    """
    parameters = spec.root.input_definitions.parameters
    unknown = sorted(set(defaults) - set(parameters))
    if unknown:
        raise SpecPatchError(
            f"defaults given for {', '.join(unknown)}, which the compiled pipeline does not declare; "
            f"its parameters are {', '.join(sorted(parameters)) or 'none'}"
        )
    for name, default in defaults.items():
        # As kfp's compiler writes a parameter with a default: the value, and optional.
        parameters[name].default_value.CopyFrom(json_format.ParseDict(default, struct_pb2.Value()))
        parameters[name].is_optional = True
