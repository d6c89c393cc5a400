"""Compiles the tfxp pipeline for Kubeflow Pipelines (KFP v2, open source).

`KubeflowV2DagRunner` turns `create_pipeline(config)` into the KFP IR YAML (`pipeline.yaml`, the format
`kfp.Client` accepts; its default `pipeline.json` is a PipelineJob wrapper that the client rejects), then
`pipeline.kubeflow.compiler.spec` sets what the compiler leaves out, from the config: the image, per-component
resources (the Trainer's accelerators), retries, caching, display name and pipeline root.

Before the V2 compiler runs, `pipeline.kubeflow.compiler.component_setup` makes what changes from run to run a
pipeline parameter, points the run record at its folder and checks that no user code is staged by file. With
`kubeflow.notify_url` set, an exit handler (`components.notify.component.RunNotice`) posts every run's outcome
there.

Example:
    result = compile_pipeline(load_config(Path("configs/imagenet_a100.yaml")), Path("pipeline.yaml"))
    for warning in result.warnings:
        print("warning:", warning)
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.kfp import fingerprint_task
from foundation.contract import LabelMapError
from foundation.data.errors import DataError
from foundation.data.probe import FileProbe
from foundation.path_rules import check_not_input
from foundation.paths import is_remote
from pipeline.config import TfxpConfig
from pipeline.kubeflow.compiler import pod, storage
from pipeline.kubeflow.compiler.cache_keys import check_input_fingerprint, wire_input_fingerprint
from pipeline.kubeflow.compiler.component_setup import (
    REPORT_ID,
    KubeflowCompileError,
    check_nothing_staged,
    run_notice,
    run_parameters,
    set_run_parameters,
    set_run_record,
    trainer_id,
    trainer_tfjob,
)
from pipeline.kubeflow.compiler.spec import (
    PipelineDoc,
    RetryPolicy,
    SpecPatch,
    load_pipeline_doc,
    patch_pipeline_doc,
    pipeline_tasks,
    write_pipeline_doc,
)
from pipeline.kubeflow.compiler.workers import manifest_paths, write_manifests
from pipeline.layout import OutputLayout, check_data_apart, output_layout, resolve_data

# What KubeflowV2DagRunner writes; a `.yaml` name selects the IR YAML instead of the PipelineJob JSON.
COMPILED_FILENAME = "pipeline.yaml"
_NO_CACHE_WARNING = (
    "pipeline.enable_cache=false: KFP reruns every task on every run, so a nightly schedule retrains on "
    "unchanged data; with the cache on, a night without new data trains nothing"
)
_NOTIFY_URL_WARNING = (
    "kubeflow.notify_url is written into the compiled spec: anyone who can read the pipeline can post "
    "to it; prefer a relay without credentials in its URL over a raw webhook"
)


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


def config_warnings(config: TfxpConfig, root: str, layout: OutputLayout) -> list[str]:
    """What would break or surprise on Kubeflow but still compiles: local paths no PVC holds, a `latest`
    image, a Vertex-style accelerator name (`pipeline.kubeflow.compiler.storage` refuses what cannot work).
    `root` is `pipeline_root(config)`, `layout` the config's `output_layout`."""
    warnings = list(pod.image_warnings(config.kubeflow.image))
    warnings.extend(storage.storage_problems(config, root, layout.serving_base, layout.edge_base)[1])
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


def spec_patch(
    config: TfxpConfig, trainer: str, root: str, parameter_defaults: Mapping[str, Any] | None = None
) -> SpecPatch:
    """The `SpecPatch` the config asks for; `trainer` is the Trainer's component id, `root` the pipeline root
    (`pipeline_root(config)`), `parameter_defaults` the run parameters' defaults (from `set_run_parameters`).

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
        task_resources={trainer: trainer_resources},
        retry=RetryPolicy(
            max_retries=kubeflow.retries,
            backoff_seconds=kubeflow.retry_backoff_seconds,
            backoff_factor=2.0,
            backoff_max_seconds=kubeflow.retry_backoff_max_seconds,
        ),
        enable_cache=config.pipeline.enable_cache,
        uncached_tasks=frozenset(kubeflow.uncached_components),
        display_name=kubeflow.display_name or config.pipeline.name,
        pipeline_root=root,
        node_selectors={trainer: labels} if labels else {},
        tolerations={trainer: tolerations} if tolerations else {},
        parameter_defaults=dict(parameter_defaults or {}),
    )


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


def compile_pipeline(config: TfxpConfig, out: Path, inputs: Mapping[str, Path | None] | None = None) -> CompileResult:
    """Compiles and patches the pipeline into `out` (a `.yaml` file).

    Args:
        config: The validated config.
        out: Where the pipeline YAML goes; parent directories are created.
        inputs: What the command reads, by the option that names it (`{"--config": path}`): neither the spec nor
            a file beside it (`manifest_paths`) is written over one of them.

    Returns:
        The written path, the task ids and the warnings.

    Raises:
        KubeflowCompileError: `out` is not a `.yaml`/`.yml` file, the config does not fit Kubeflow, or the data
            cannot be read for an `auto` (`resolve_data_for_kubeflow`).
        foundation.path_rules.PathRuleError: the spec or a file beside it would overwrite one of `inputs`; the
            spec, the pipeline root or an output lies in `data.path` (`pipeline.layout.check_data_apart`).
        pipeline.kubeflow.compiler.spec.SpecPatchError: the patch does not fit the compiled spec, a pod setting is
            malformed, or the Kubernetes platform document does not parse strictly.
    """
    if out.suffix not in (".yaml", ".yml"):
        raise KubeflowCompileError(f"--out {out}: kfp.Client accepts .yaml/.yml pipeline files; use e.g. pipeline.yaml")
    # Before anything is read or written: the spec, and with workers (`trainer_tfjob`) the manifests beside it.
    for path in (out, *(manifest_paths(out) if config.trainer.workers > 1 else ())):
        check_not_input(path, inputs or {}, "--out")
    check_data_apart(config, {"--out": str(out), "kubeflow.pipeline_root": config.kubeflow.pipeline_root})
    from pipeline.kubeflow.compiler.platform import pod_settings
    from pipeline.pipeline import create_pipeline

    settings = pod_settings(config.kubeflow)  # before the slow compile: a typo fails at once
    root, layout = pipeline_root(config), output_layout(config)
    # Before the data is read: a path no pod can open is the first thing to fix.
    errors, _ = storage.storage_problems(config, root, layout.serving_base, layout.edge_base)
    if errors:
        raise KubeflowCompileError("storage pods cannot use:\n- " + "\n- ".join(errors))
    config = resolve_data_for_kubeflow(config)
    mounts, volume, measured = _storage_plan(config, root)
    warnings = config_warnings(config, root, layout)
    if not measured:
        warnings.append(storage.unmeasured_warning(config.data.path))
    tfjob = trainer_tfjob(config)
    pipeline = create_pipeline(config, pipeline_root=root or None, tfjob=tfjob)
    components = list(pipeline.components)
    check_nothing_staged(components)
    parameters = set_run_parameters(components, run_parameters(config))
    set_run_record(components, layout.serving_base)
    patch = spec_patch(config, trainer_id(components), root, parameters)
    # The fingerprint task keys the cache and so must always run; the RunReport writes this run's record.
    patch = dataclasses.replace(patch, uncached_tasks=patch.uncached_tasks | {fingerprint_task.TASK, REPORT_ID})
    if not config.pipeline.enable_cache:
        warnings.append(_NO_CACHE_WARNING)
    notice = run_notice(config, root, layout.serving_base)
    if notice is not None:
        warnings.append(_NOTIFY_URL_WARNING)
        components.append(notice)
    doc = _compiled_doc(pipeline, patch, notice)
    _patch_doc(doc, patch, settings, mounts, volume)
    write_pipeline_doc(doc, out, _header(config, out))
    beside = write_manifests(config, out) if tfjob is not None else ()
    compiled = pipeline_tasks(doc.pipeline_spec)
    tasks = (fingerprint_task.TASK, *(component.id for component in components if component.id in compiled))
    return CompileResult(path=out, tasks=tasks, warnings=tuple(warnings), parameters=parameters, beside=beside)


def _storage_plan(
    config: TfxpConfig, root: str
) -> tuple[tuple[storage.VolumeMount, ...], storage.ArtifactVolume | None, bool]:
    """The PVC mounts, the launcher's artifact volume, and whether an `auto` volume size measured the data.

    Raises:
        KubeflowCompileError: a mount or the artifact volume does not fit (`pipeline.kubeflow.compiler.storage`).
    """
    mounts = storage.volumes(config)
    storage.check_mounts(mounts)
    auto = config.kubeflow.artifact_volume_size == storage.AUTO
    try:
        size = storage.data_size(config.data.path) if auto else None
        volume = storage.artifact_volume(config, root, size)
    except storage.StorageError as error:
        raise KubeflowCompileError(str(error)) from None
    return mounts, volume, not (auto and size is None)


def _compiled_doc(pipeline: Any, patch: SpecPatch, notice: Any | None) -> PipelineDoc:
    """The pipeline through TFX's KubeflowV2DagRunner (with the exit handler `notice`), read back unpatched."""
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as kubeflow_v2

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
        return load_pipeline_doc(Path(tmp) / COMPILED_FILENAME)


def _patch_doc(
    doc: PipelineDoc,
    patch: SpecPatch,
    settings: pod.PodSettings,
    mounts: tuple[storage.VolumeMount, ...],
    volume: storage.ArtifactVolume | None,
) -> None:
    """What the compiler leaves out, set in `doc`: the input fingerprint, the config's patch, the pods' settings
    and storage.

    Raises:
        pipeline.kubeflow.compiler.spec.SpecPatchError: the patch does not fit, or the platform document does
            not parse strictly.
    """
    from pipeline.kubeflow.compiler.platform import apply_pod_settings, check_platform_doc

    wire_input_fingerprint(doc, patch.image)
    patch_pipeline_doc(doc, patch)
    check_input_fingerprint(doc)
    apply_pod_settings(doc, settings)
    storage.apply_storage(doc, mounts, volume)
    check_platform_doc(doc)  # KFP ignores a platform document it cannot parse: refuse to write one


def _header(config: TfxpConfig, out: Path) -> str:
    """The comment at the top of the written spec."""
    return (
        f"tfxp pipeline {config.pipeline.name} for Kubeflow Pipelines (KFP v2 IR, "
        "patched by pipeline.kubeflow.compiler.spec).\n"
        f"Submit: tfxp submit {out.name} --host URL [--wait]"
    )
