"""Compiles the tfxp pipeline for Kubeflow Pipelines (KFP v2, open source).

`KubeflowV2DagRunner` turns `create_pipeline(config)` into the KFP IR YAML (`pipeline.yaml`, the format
`kfp.Client` accepts; its default `pipeline.json` is a PipelineJob wrapper that the client rejects), then
`pipeline.kubeflow.compiler.spec` sets what the compiler leaves out, from the config: the image, per-component
resources (the Trainer's accelerators), retries, caching, display name and pipeline root.

What changes from run to run is a pipeline parameter (`RUN_PARAMETERS`, defaults from the config), so a
run or a schedule sets it without recompiling; `create_pipeline` itself stays free of them (LocalDagRunner
runs it as is). With `kubeflow.notify_url` set, an exit handler (`components.notify.component.RunNotice`)
posts every run's outcome there.

The Trainer's run_fn is referenced by dotted path and lives in the image, so compiling builds and
stages no user-module wheel; `check_nothing_staged` keeps it that way.

Example:
    result = compile_pipeline(load_config(Path("configs/imagenet_a100.yaml")), Path("pipeline.yaml"))
    for warning in result.warnings:
        print("warning:", warning)
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.kfp import fingerprint_task
from components.multinode.settings import TfJobLaunch
from components.multinode.tfjob import tfjob_template
from components.notify.run_record import RUN_RECORDS_DIR
from foundation.contract import LabelMapError
from foundation.data.errors import DataError
from foundation.data.probe import FileProbe
from foundation.errors import TfxpError
from foundation.paths import is_remote
from pipeline.config import TfxpConfig
from pipeline.kubeflow.compiler import pod, storage
from pipeline.kubeflow.compiler.cache_keys import check_input_fingerprint, wire_input_fingerprint
from pipeline.kubeflow.compiler.spec import (
    RetryPolicy,
    SpecPatch,
    load_pipeline_doc,
    patch_pipeline_doc,
    pipeline_tasks,
    write_pipeline_doc,
)
from pipeline.kubeflow.compiler.workers import WorkersConfigError, worker_template, write_manifests
from pipeline.layout import output_layout, resolve_data

# What KubeflowV2DagRunner writes; a `.yaml` name selects the IR YAML instead of the PipelineJob JSON.
COMPILED_FILENAME = "pipeline.yaml"
# Exec properties that make the V2 compiler build and stage a user-module wheel.
_STAGING_PROPERTIES = ("module_file", "module_path")


class KubeflowCompileError(TfxpError, ValueError):
    """The config cannot be compiled for Kubeflow; the message names the key and the fix."""


@dataclass(frozen=True)
class RunParameter:
    """A pipeline parameter: a component's exec property that each run may set, compiled with the config's value
    as its default.

    Attributes:
        name: The parameter's name in the spec (`--param NAME=VALUE`, the KFP UI's run form).
        component: The TFX component id whose exec property it sets.
        exec_property: That exec property.
        key: The config key the default comes from.
    """

    name: str
    component: str
    exec_property: str
    key: str


# What changes from run to run. TFX 1.21 can make only a whole exec property a pipeline parameter: a plain
# value, or a proto as its JSON text (`train_args` is TFX's TrainArgs, `{"num_steps": 300}`). Values inside
# a proto or a dict stay compiled in: `evaluator.min_accuracy` (TFMA's EvalConfig), the Trainer's
# custom_config (the trainer section) and the label map path.
RUN_PARAMETERS = (
    RunParameter("data_path", "ImportExampleGen", "input_base", "data.path"),
    RunParameter("train_args", "Trainer", "train_args", "trainer.train_steps"),
)
# For data in span folders (`data.spans` other than `none`), which spans a run reads: `latest`, `all` or N.
SPANS_PARAMETER = RunParameter("spans", "ImportExampleGen", "spans", "data.spans")


def run_parameters(config: TfxpConfig) -> tuple[RunParameter, ...]:
    """`RUN_PARAMETERS`, plus the span selection when the config reads span folders (compiled patterns differ
    for data without spans, so `none` cannot be switched at run time)."""
    return RUN_PARAMETERS if config.data.spans == "none" else (*RUN_PARAMETERS, SPANS_PARAMETER)


# The RunReport component's id (components.report.component.COMPONENT_ID; not imported here: it loads TFX).
REPORT_ID = "RunReport"
# What KFP fills in for the exit handler (placeholders it resolves in parameter constants).
RUN_ID_PLACEHOLDER = "{{$.pipeline_job_uuid}}"
RUN_NAME_PLACEHOLDER = "{{$.pipeline_job_name}}"


@dataclass(frozen=True)
class CompileResult:
    """Attributes:
    path: The compiled, patched pipeline YAML.
    tasks: The pipeline's tasks: `InputFingerprint`, then the TFX component ids in the pipeline's order; the exit
        handler last.
    warnings: Problems a run on Kubeflow would hit (local paths, a `latest` image).
    parameters: The pipeline parameters and their compiled defaults.
    beside: Files written beside the spec for review: with `trainer.workers` > 1 the workers' TFJob
        (`pipeline.tfjob.yaml`) and the RBAC the pipeline's service account needs (`pipeline.rbac.yaml`).
    """

    path: Path
    tasks: tuple[str, ...]
    warnings: tuple[str, ...]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    beside: tuple[Path, ...] = ()


def pipeline_root(config: TfxpConfig) -> str:
    """`kubeflow.pipeline_root`, else the layout's root when `pipeline.output` is a bucket path, else ""."""
    if config.kubeflow.pipeline_root:
        return config.kubeflow.pipeline_root.rstrip("/")
    root = output_layout(config).pipeline_root
    return root if is_remote(root) else ""


def config_warnings(config: TfxpConfig) -> list[str]:
    """What would break or surprise on Kubeflow but still compiles: local paths no PVC holds, a `latest`
    image, a Vertex-style accelerator name (`pipeline.kubeflow.compiler.storage` refuses what cannot work)."""
    layout = output_layout(config)
    warnings = list(pod.image_warnings(config.kubeflow.image))
    warnings.extend(storage.storage_problems(config, pipeline_root(config), layout.serving_base, layout.edge_base)[1])
    accelerator = config.kubeflow.trainer_accelerator
    if accelerator.count > 0 and "/" not in accelerator.type:
        warnings.append(
            f"kubeflow.trainer_accelerator.type={accelerator.type} looks like a Vertex AI accelerator name; "
            "open-source KFP requests it as a Kubernetes resource, e.g. nvidia.com/gpu (pick A100 nodes with "
            "kubeflow.trainer_node_selector)"
        )
    return warnings


def _checked(key: str, value: str, parse: Callable[[str], Any]) -> Any:
    try:
        return parse(value)
    except ValueError as error:
        raise KubeflowCompileError(f"{key}: {error}") from None


def spec_patch(config: TfxpConfig, trainer_id: str, parameter_defaults: Mapping[str, Any] | None = None) -> SpecPatch:
    """The `SpecPatch` the config asks for; `trainer_id` is the Trainer's component id, `parameter_defaults` the
    run parameters' defaults (from `set_run_parameters`).

    Raises:
        KubeflowCompileError: a malformed quantity, node label or toleration (the message names the key),
            or an empty image.
    """
    kubeflow = config.kubeflow
    _checked("kubeflow.image", kubeflow.image, pod.image_warnings)
    for key in ("cpu_request", "trainer_cpu"):
        _checked(f"kubeflow.{key}", getattr(kubeflow, key), pod.cpu_cores)
    for key in ("memory_request", "trainer_memory"):
        _checked(f"kubeflow.{key}", getattr(kubeflow, key), pod.memory_gigabytes)
    labels = dict(
        _checked("kubeflow.trainer_node_selector", entry, pod.parse_node_label)
        for entry in kubeflow.trainer_node_selector
    )
    tolerations = tuple(
        _checked("kubeflow.trainer_tolerations", entry, pod.parse_toleration) for entry in kubeflow.trainer_tolerations
    )
    wanted = kubeflow.trainer_accelerator
    accelerator = pod.Accelerator(type=wanted.type, count=wanted.count) if wanted.count > 0 else None
    trainer_resources = pod.Resources(kubeflow.trainer_cpu, kubeflow.trainer_memory, accelerator)
    if config.trainer.workers > 1:
        # The Trainer task only submits the workers' TFJob and waits for it: the trainer's resources, accelerators,
        # node selector and tolerations are the worker pods' (pipeline.kubeflow.compiler.workers), not the task's.
        trainer_resources = pod.Resources(cpu=kubeflow.cpu_request, memory=kubeflow.memory_request)
        labels, tolerations = {}, ()
    return SpecPatch(
        image=kubeflow.image,
        resources=pod.Resources(cpu=kubeflow.cpu_request, memory=kubeflow.memory_request),
        task_resources={trainer_id: trainer_resources},
        retry=RetryPolicy(
            max_retries=kubeflow.retries,
            backoff_seconds=kubeflow.retry_backoff_seconds,
            backoff_factor=2.0,
            backoff_max_seconds=kubeflow.retry_backoff_max_seconds,
        ),
        enable_cache=config.pipeline.enable_cache,
        uncached_tasks=frozenset(kubeflow.uncached_components),
        display_name=kubeflow.display_name or config.pipeline.name,
        pipeline_root=pipeline_root(config),
        node_selectors={trainer_id: labels} if labels else {},
        tolerations={trainer_id: tolerations} if tolerations else {},
        parameter_defaults=dict(parameter_defaults or {}),
    )


def check_nothing_staged(components: Sequence[Any]) -> None:
    """Refuses components that reference user code by file: the V2 compiler would build and stage a wheel.

    Raises:
        KubeflowCompileError: names the component and the property.
    """
    for component in components:
        properties = getattr(component, "exec_properties", {}) or {}
        for key in _STAGING_PROPERTIES:
            if properties.get(key):
                raise KubeflowCompileError(
                    f"component {component.id} sets {key}={properties[key]!r}: compiling would build and stage "
                    "a user-module wheel; reference the code by dotted path (e.g. Trainer(run_fn=...)) and ship "
                    "it in the image"
                )


def set_run_parameters(
    components: Sequence[Any], parameters: Sequence[RunParameter] = RUN_PARAMETERS
) -> dict[str, Any]:
    """Replaces the exec properties named in `parameters` by TFX `RuntimeParameter`s whose defaults are
    the values the factory set; the V2 compiler turns them into pipeline parameters.

    Returns:
        Parameter name → default.

    Raises:
        KubeflowCompileError: a component or exec property in `RUN_PARAMETERS` is not in the pipeline.
    """
    from tfx import v1 as tfx

    by_id = {component.id: component for component in components}
    defaults = {}
    for parameter in parameters:
        properties = by_id[parameter.component].exec_properties if parameter.component in by_id else {}
        value = properties.get(parameter.exec_property)
        if not isinstance(value, str):
            raise KubeflowCompileError(
                f"run parameter {parameter.name}: {parameter.component}.{parameter.exec_property} is not a "
                f"compiled text value ({value!r}); RUN_PARAMETERS no longer matches create_pipeline"
            )
        properties[parameter.exec_property] = tfx.dsl.experimental.RuntimeParameter(
            name=parameter.name, ptype=str, default=value
        )
        defaults[parameter.name] = value
    return defaults


def set_run_record(components: Sequence[Any], serving_base: str) -> None:
    """Gives the RunReport the run's id (KFP fills in `{{$.pipeline_job_uuid}}`) and where the run record goes
    (`<serving base>/runs`), which the exit handler reads (`components.notify.run_record`); and the ExampleValidator
    with drift checks the same folder, for the record of a drift stop."""
    from components.report import spec as report_keys
    from components.validation import strict_example_validator as validator_keys

    record_dir = f"{serving_base.rstrip('/')}/{RUN_RECORDS_DIR}"
    for component in components:
        if component.id == REPORT_ID:
            component.exec_properties[report_keys.RUN_ID_KEY] = RUN_ID_PLACEHOLDER
            component.exec_properties[report_keys.RUN_RECORD_DIR_KEY] = record_dir
        elif component.id == validator_keys.COMPONENT_ID and component.exec_properties.get(validator_keys.DRIFT_KEY):
            # A drift stop files the record itself (a constant: the task's KFP cache key does not change per run).
            component.exec_properties[validator_keys.RUN_RECORD_DIR_KEY] = record_dir


def run_notice(config: TfxpConfig) -> Any | None:
    """The exit handler that posts each run's outcome to `kubeflow.notify_url`; None when it is empty."""
    if not config.kubeflow.notify_url:
        return None
    from tfx.orchestration.kubeflow.decorators import FinalStatusStr

    from components.notify.component import RunNotice

    return RunNotice(
        final_status=FinalStatusStr(),
        notify_url=config.kubeflow.notify_url,
        pipeline_name=config.pipeline.name,
        pipeline_root=pipeline_root(config),
        serving_base=output_layout(config).serving_base,
        run_id=RUN_ID_PLACEHOLDER,
        run_name=RUN_NAME_PLACEHOLDER,
    )


def trainer_tfjob(config: TfxpConfig) -> TfJobLaunch | None:
    """With `trainer.workers` > 1, the TFJob the Trainer task runs its workers as (it travels in the Trainer's
    custom_config); None with one worker.

    Raises:
        KubeflowCompileError: a malformed worker setting (names the key).
    """
    if config.trainer.workers == 1:
        return None
    try:
        manifest = tfjob_template(worker_template(config))
    except WorkersConfigError as error:
        raise KubeflowCompileError(str(error)) from None
    return TfJobLaunch(
        manifest=manifest,
        deadline_seconds=config.kubeflow.workers.job_deadline_seconds,
        schedule_timeout_seconds=config.kubeflow.workers.schedule_timeout_seconds,
        shared_dir=config.kubeflow.workers.shared_dir,
    )


def _trainer_id(components: Sequence[Any]) -> str:
    from tfx.components import Trainer

    ids = [component.id for component in components if isinstance(component, Trainer)]
    if len(ids) != 1:
        raise KubeflowCompileError(f"the pipeline has {len(ids)} Trainer components; tfxp expects exactly one")
    return ids[0]


def resolve_data_for_kubeflow(config: TfxpConfig) -> TfxpConfig:
    """The data section made concrete at compile time (`pipeline.layout.resolve_data`), reading `data.path` with
    `tf.io.gfile` where it can: the pods run what is compiled here, so an `auto` that cannot look at the data
    is an error naming the keys to set, never a guess.

    Raises:
        KubeflowCompileError: the data cannot be read for an `auto`, its layout is not recognised, or its span
            folders do not fit `data.spans`.
    """
    try:
        return resolve_data(config, FileProbe())
    except (DataError, LabelMapError) as error:
        raise KubeflowCompileError(str(error)) from None


def compile_pipeline(config: TfxpConfig, out: Path) -> CompileResult:
    """Compiles and patches the pipeline into `out` (a `.yaml` file).

    Args:
        config: The validated config.
        out: Where the pipeline YAML goes; parent directories are created.

    Returns:
        The written path, the task ids and the warnings.

    Raises:
        KubeflowCompileError: `out` is not a `.yaml`/`.yml` file, the config does not fit Kubeflow, or the data
            cannot be read for an `auto` (`resolve_data_for_kubeflow`).
        pipeline.kubeflow.compiler.spec.SpecPatchError: the patch does not fit the compiled spec, a pod setting is
            malformed, or the Kubernetes platform document does not parse strictly.
    """
    if out.suffix not in (".yaml", ".yml"):
        raise KubeflowCompileError(f"--out {out}: kfp.Client accepts .yaml/.yml pipeline files; use e.g. pipeline.yaml")
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as kubeflow_v2

    from pipeline.kubeflow.compiler.platform import apply_pod_settings, check_platform_doc, pod_settings
    from pipeline.pipeline import create_pipeline

    settings = pod_settings(config.kubeflow)  # before the slow compile: a typo fails at once
    layout = output_layout(config)
    # Before the data is read: a path no pod can open is the first thing to fix.
    errors, _ = storage.storage_problems(config, pipeline_root(config), layout.serving_base, layout.edge_base)
    if errors:
        raise KubeflowCompileError("storage pods cannot use:\n- " + "\n- ".join(errors))
    config = resolve_data_for_kubeflow(config)
    mounts = storage.volumes(config)
    storage.check_mounts(mounts)
    try:
        size = storage.data_size(config.data.path) if config.kubeflow.artifact_volume_size == storage.AUTO else None
        volume = storage.artifact_volume(config, pipeline_root(config), size)
    except storage.StorageError as error:
        raise KubeflowCompileError(str(error)) from None
    warnings = config_warnings(config)
    if config.kubeflow.artifact_volume_size == storage.AUTO and size is None:
        warnings.append(storage.unmeasured_warning(config.data.path))
    tfjob = trainer_tfjob(config)
    pipeline = create_pipeline(config, pipeline_root=pipeline_root(config) or None, tfjob=tfjob)
    components = list(pipeline.components)
    check_nothing_staged(components)
    parameters = set_run_parameters(components, run_parameters(config))
    set_run_record(components, output_layout(config).serving_base)
    patch = spec_patch(config, _trainer_id(components), parameters)
    # The fingerprint task keys the cache and so must always run; the RunReport writes this run's record.
    patch = dataclasses.replace(patch, uncached_tasks=patch.uncached_tasks | {fingerprint_task.TASK, REPORT_ID})
    if not config.pipeline.enable_cache:
        warnings.append(
            "pipeline.enable_cache=false: KFP reruns every task on every run, so a nightly schedule retrains on "
            "unchanged data; with the cache on, a night without new data trains nothing"
        )
    notice = run_notice(config)
    if notice is not None:
        warnings.append(
            "kubeflow.notify_url is written into the compiled spec: anyone who can read the pipeline can post "
            "to it; prefer a relay without credentials in its URL over a raw webhook"
        )
        components.append(notice)
    runner_config = kubeflow_v2.KubeflowV2DagRunnerConfig(
        display_name=patch.display_name,
        default_image=patch.image,
        # Schema 2.1 writes `runtimeValue.constant`; open-source KFP's driver does not implement the
        # deprecated `constantValue` that schema 2.0 uses.
        use_pipeline_spec_2_1=True,
    )
    with tempfile.TemporaryDirectory(prefix="tfxp-compile-") as tmp:
        runner = kubeflow_v2.KubeflowV2DagRunner(
            config=runner_config, output_dir=tmp, output_filename=COMPILED_FILENAME
        )
        if notice is not None:
            runner.set_exit_handler(notice)
        runner.run(pipeline)
        doc = load_pipeline_doc(Path(tmp) / COMPILED_FILENAME)
    wire_input_fingerprint(doc, patch.image)
    patch_pipeline_doc(doc, patch)
    check_input_fingerprint(doc)
    apply_pod_settings(doc, settings)
    storage.apply_storage(doc, mounts, volume)
    check_platform_doc(doc)  # KFP ignores a platform document it cannot parse: refuse to write one
    header = (
        f"tfxp pipeline {config.pipeline.name} for Kubeflow Pipelines (KFP v2 IR, "
        "patched by pipeline.kubeflow.compiler.spec).\n"
        f"Submit: tfxp submit {out.name} --host URL [--wait]"
    )
    write_pipeline_doc(doc, out, header)
    beside = write_manifests(config, out) if tfjob is not None else ()
    compiled = pipeline_tasks(doc.pipeline_spec)
    tasks = (fingerprint_task.TASK, *(component.id for component in components if component.id in compiled))
    return CompileResult(path=out, tasks=tasks, warnings=tuple(warnings), parameters=parameters, beside=beside)
