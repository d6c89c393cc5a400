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
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from foundation.path_rules import claim_dir
from pipeline.kubeflow.compiler.params import pipeline_parameters, typed_arguments
from pipeline.kubeflow.compiler.spec import PipelineDoc, load_pipeline_doc
from pipeline.kubeflow.emulator import local_task
from pipeline.kubeflow.emulator.backend import BACKENDS, DEFAULT_ROOT, KFP, Backend, BackendError
from pipeline.kubeflow.emulator.dag_runner import POD_DIR, POD_WHAT, DagRunner
from pipeline.kubeflow.emulator.mlmd_cache import MetadataStore
from pipeline.kubeflow.emulator.spec_check import check_runnable
from pipeline.kubeflow.emulator.spec_run import RunSpecError, SpecRun, TaskRun

# The run's record, under the state folder: runs/<run id>.json.
RUNS_DIR = "runs"


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
    doc = _runnable_doc(spec_path)
    spec = doc.pipeline_spec
    values = pipeline_arguments(spec, params or {})
    store = _open_store(state)
    claim_dir(state / POD_DIR, POD_WHAT)  # before the first task: a pod folder the user keeps there is refused
    run = _new_run(spec.pipeline_info.name, run_id or str(uuid.uuid4()), backend, root, state)
    run.parameters = {name: json_format.MessageToDict(value) for name, value in values.items()}
    DagRunner(spec, run, emulated, store, on_task or (lambda task: None), _pvc_names(doc)).run_pipeline(values)
    record = state / RUNS_DIR / f"{run.run_id}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(run.to_dict(), indent=2) + "\n")
    return run


def _runnable_doc(spec_path: Path) -> PipelineDoc:
    """The compiled spec, checked as a whole before the first task.

    Raises:
        RunSpecError: every problem `spec_check.spec_problems` finds.
    """
    doc = load_pipeline_doc(spec_path)
    try:
        check_runnable(doc.pipeline_spec, str(spec_path))
    except ValueError as error:
        raise RunSpecError(str(error)) from None
    return doc


def _open_store(state: Path) -> MetadataStore:
    """The state folder's MLMD and cache store, the folder created.

    Raises:
        RunSpecError: the store is not run-spec's, or the folder cannot be written.
    """
    try:
        state.mkdir(parents=True, exist_ok=True)
        return MetadataStore(state / "mlmd.json")
    except BackendError as error:
        raise RunSpecError(str(error)) from None
    except OSError as error:
        raise RunSpecError(f"--state {state}: cannot write there ({error.strerror}); pass a writable folder") from None


def _new_run(pipeline: str, run_id: str, backend: str, root: str, state: Path) -> SpecRun:
    """The run's record before its first task: its id, resource name and folder as `backend` names them."""
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    # metadata/client.go:420: a run's root is <root>/<pipeline>/<run id> (a query string, e.g. ?region=, stays on the
    # run's root only; driver.go:767 drops it for the tasks' folders); Vertex: <root>/<project number>/<job>.
    base = root.split("?", 1)[0].rstrip("/")
    run_dir = f"{base}/{pipeline}/{run_id}" if backend == KFP else f"{root}/123456789/{pipeline}-{stamp}"
    return SpecRun(
        pipeline=pipeline,
        run_id=run_id,
        run_name=f"{pipeline}-{run_id[:5]}" if backend == KFP else f"{pipeline}-{stamp}",
        backend=backend,
        pipeline_root=root,
        run_dir=run_dir,
        state_dir=str(state),
    )
