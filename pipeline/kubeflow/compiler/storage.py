"""Storage on the cluster, stated and checked: what goes through KFP's launcher, what TensorFlow and Beam open
themselves, and the disk the launcher's copies need.

On open-source KFP (kubeflow/pipelines `backend/src/v2`, commit 7b70c7b):

- **Artifacts** live under the pipeline root and go through the launcher, any scheme it knows (`gs://`,
  `minio://`, `s3://`): it copies every input artifact into the pod before the task, `gs://` included, and
  uploads every output after it (`component/launcher_v2.go:927-1004`, :778-857); tfxp's entrypoint hands the
  executor those copies where TensorFlow cannot open the URI (`components.kfp.entrypoint`).
- **Everything else** the executors open themselves through TensorFlow's or Beam's filesystems: `data.path`, the
  label map, a schema file, the serving and edge bases. In the tfxp image that is `gs://`, or a local path on a
  PersistentVolumeClaim mounted into every pod (`kubeflow.volumes`, kfp-kubernetes' `pvcMount`, applied by the
  driver: `driver/k8s.go:158`, `makeVolumeMountPatch` :1236). `minio://`/`s3://` there have no filesystem.
- **Beam on Dataflow or Flink** runs on workers outside the pods: they see neither the launcher's copies nor the
  PVCs, so the pipeline root and every path above must be `gs://`.
- **Disk for the copies.** The launcher writes them under `/gcs`, `/minio` or `/s3` in the container's filesystem
  (`LocalPathForURI`, :1239), and KFP's IR has no ephemeral-storage request. With ImageNet the Examples are
  about 150 GB, copied into every pod that takes them (Trainer, Evaluator, RunReport, ...). tfxp mounts a generic
  ephemeral volume there (`kubeflow.artifact_volume_size`, kfp-kubernetes' `genericEphemeralVolume`, created per
  pod by the driver: `driver/k8s.go:548-593`), sized from the data by default.

Example:
    problems = storage_problems(config, root="minio://mlpipeline/v2/artifacts")
    volume = artifact_volume(config, root, data_bytes=147 * 2**30)   # 194Gi at /minio
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.kfp.launcher_paths import DIRECT_SCHEMES, KFP_DEFAULT_ROOT, LAUNCHER_MOUNTS, pipeline_root_problem
from foundation.errors import TfxpError
from foundation.k8s.names import name_problem
from foundation.k8s.quantity import QuantityError, memory_bytes
from foundation.path_rules import is_under, normalized
from foundation.paths import is_remote, scheme, uri
from pipeline.config import TfxpConfig
from pipeline.kubeflow.compiler.spec import (
    KUBERNETES_PLATFORM,
    PipelineDoc,
    SpecPatchError,
    container_tasks,
    executor_label,
)

AUTO = "auto"
NONE = "none"
# Copies of the inputs plus an output of about their size (ImportExampleGen), and room for models and logs.
SIZE_FACTOR = 1.25
SIZE_HEADROOM_GIB = 10
MAX_VOLUME_BYTES = 64 * 2**40
_OUTSIDE_RUNNERS = ("DataflowRunner", "FlinkRunner", "SparkRunner", "PortableRunner")
VOLUME_NAME = "tfxp-artifact-copies"
EXAMPLES_SCHEMA = "title: tfx.Examples\n"


class StorageError(TfxpError, ValueError):
    """A storage combination pods or workers cannot use (the message names the keys)."""


@dataclass(frozen=True)
class VolumeMount:
    """A PersistentVolumeClaim mounted into every pod (`kubeflow.volumes`: `pvc-name:/mount/path`)."""

    pvc: str
    path: str


@dataclass(frozen=True)
class ArtifactVolume:
    """The generic ephemeral volume where the launcher keeps its copies of the artifacts."""

    mount_path: str
    size: str
    storage_class: str = ""


def parse_volume(entry: str) -> VolumeMount:
    """`pvc-name:/mount/path` → VolumeMount.

    Raises:
        ValueError: no colon, a PVC name that is not a Kubernetes name, or a mount path that is not absolute.
    """
    pvc, colon, path = entry.partition(":")
    if not colon or name_problem("PersistentVolumeClaim", pvc):
        raise ValueError(
            f"{entry!r}: expected `pvc-name:/mount/path` with a lowercase Kubernetes name, e.g. data:/data"
        )
    resolved = normalized(path) if path.startswith("/") else ""
    if resolved in ("", "/") or any(is_under(resolved, f"/{mount}") for mount in LAUNCHER_MOUNTS.values()):
        raise ValueError(
            f"{entry!r}: the mount path must be absolute and not / or a launcher folder (/gcs, /minio, /s3) "
            "or under one"
        )
    return VolumeMount(pvc=pvc, path=resolved)


def volumes(config: TfxpConfig) -> tuple[VolumeMount, ...]:
    """`kubeflow.volumes`, parsed.

    Raises:
        StorageError: a malformed entry (names the key).
    """
    try:
        return tuple(parse_volume(entry) for entry in config.kubeflow.volumes)
    except ValueError as error:
        raise StorageError(f"kubeflow.volumes: {error}") from None


def on_volume(path: str, mounts: Sequence[VolumeMount]) -> bool:
    """Whether the local `path` lies on one of the PVC mounts, by its resolved path (`/data/../etc` is not on
    `/data`)."""
    return any(is_under(path, mount.path) for mount in mounts)


def _outside_runner(config: TfxpConfig) -> str:
    """The Beam runner `beam.extra_args` names when its workers run outside the pods, else "". Read as Beam reads
    it (`--runner X` or `--runner=X`; `apache_beam.runners.runner.create_runner`: case-insensitive, `Runner`
    optional, a dotted class path allowed)."""
    args = list(config.beam.extra_args)
    names = []
    for index, arg in enumerate(args):
        if arg.startswith("--runner="):
            names.append(arg.split("=", 1)[1])
        elif arg == "--runner" and index + 1 < len(args):
            names.append(args[index + 1])
    for name in names:
        short = name.rsplit(".", 1)[-1].lower().removesuffix("runner")
        for runner in _OUTSIDE_RUNNERS:
            if short == runner.lower().removesuffix("runner"):
                return runner
    return ""


def direct_paths(config: TfxpConfig, serving_base: str, edge_base: str) -> list[tuple[str, str]]:
    """(key, path) of everything the executors open themselves."""
    paths = [("data.path", config.data.path), ("data.labels", config.data.labels_path),
             ("the serving base (serving.base_path or pipeline.output)", serving_base)]  # fmt: skip
    if config.edge.enabled:
        paths.append(("the edge base (pipeline.output)", edge_base))
    if config.data.schema_source not in ("label_map", "infer"):
        paths.append(("data.schema", config.data.schema_source))
    return [(key, path) for key, path in paths if path]


def opened_path_problem(path: str) -> str | None:
    """Why the executors cannot open `path` themselves (`data.path`, compiled or a run's `data_path`): a URI of a
    scheme TensorFlow in the tfxp image has no filesystem for; None when they can (or it is a local path)."""
    if not is_remote(path) or scheme(path) in DIRECT_SCHEMES:
        return None
    return (
        f"the executors open it themselves with TensorFlow, which has no {uri(scheme(path))} filesystem in the tfxp "
        "image (only artifacts under the pipeline root go through KFP's launcher); use "
        f"{', '.join(map(uri, DIRECT_SCHEMES))} or a PVC (kubeflow.volumes)"
    )


def storage_problems(config: TfxpConfig, root: str, serving_base: str, edge_base: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the storage the config asks for on Kubeflow; see the module docstring.

    Args:
        config: The config.
        root: The compiled pipeline root; "" when the run (or the kfp-launcher ConfigMap) will set it.
        serving_base: The serving base path.
        edge_base: The edge base path.
    """
    errors: list[str] = []
    warnings: list[str] = []
    try:
        mounts = volumes(config)
    except StorageError as error:
        return [str(error)], []
    runner = _outside_runner(config)
    for key, path in direct_paths(config, serving_base, edge_base):
        if (problem := opened_path_problem(path)) is not None:
            errors.append(f"{key}={path}: {problem}")
        elif not is_remote(path) and runner:
            errors.append(
                f"{key}={path} is a local path, but beam.extra_args runs Beam on --runner={runner}, whose workers "
                "see no pod's volumes; use a gs:// path"
            )
        elif not is_remote(path) and not on_volume(path, mounts):
            warnings.append(
                f"{key}={path} is a local path: pods on Kubeflow do not see it; use a bucket path, e.g. gs://bucket/…, "
                "or mount a PVC that holds it (kubeflow.volumes: pvc-name:/mount/path)"
            )
    if not root:
        warnings.append(
            "kubeflow.pipeline_root is empty: runs use the root `tfxp submit --pipeline-root` sends, else the "
            f"kfp-launcher ConfigMap's defaultPipelineRoot, else {KFP_DEFAULT_ROOT}"
        )
    elif not is_remote(root):
        warnings.append(
            f"kubeflow.pipeline_root={root} is a local path: KFP's launcher keeps artifacts only under gs://, "
            "minio:// or s3:// roots; use a bucket path, e.g. gs://bucket/tfxp"
        )
    elif (problem := pipeline_root_problem(root)) is not None:
        key = "kubeflow.pipeline_root" if config.kubeflow.pipeline_root else "the root under pipeline.output"
        shown = root if root.isprintable() else repr(root)
        errors.append(f"{key}={shown} is not a root KFP can use: {problem}; use a bucket path, e.g. gs://bucket/tfxp")
    if runner and scheme(root or "") not in DIRECT_SCHEMES:
        errors.append(
            f"beam.extra_args runs Beam on --runner={runner}, whose workers read and write the artifacts "
            f"themselves, so kubeflow.pipeline_root must be a gs:// bucket (it is {root or KFP_DEFAULT_ROOT})"
        )
    errors.extend(workers_storage_problems(config, root))
    return errors, warnings


def workers_storage_problems(config: TfxpConfig, root: str) -> list[str]:
    """With `trainer.workers` > 1 the workers' pods read the Examples and write the model, backups and logs
    themselves: the artifacts must be on `gs://` (TensorFlow opens them from every pod), or the Trainer task
    stages them into `kubeflow.workers.shared_dir` on a volume every pod mounts
    (`components.multinode.tfjob_launch`). The launcher's copies under /minio, /s3 are only in the task's pod."""
    workers = config.trainer.workers
    shared = config.kubeflow.workers.shared_dir  # on a mount: pipeline.kubeflow.compiler.workers checks it
    if workers == 1 or scheme(root or "") in DIRECT_SCHEMES or shared:
        return []
    return [
        f"trainer.workers={workers}: the worker pods read the Examples and write the model themselves, but the "
        f"artifacts are under {root or KFP_DEFAULT_ROOT}, which only KFP's launcher copies into the Trainer task's "
        "own pod; set kubeflow.pipeline_root to a gs:// bucket, or kubeflow.workers.shared_dir to a folder on a "
        "kubeflow.volumes mount (the Trainer task stages the Examples there)"
    ]


def artifact_volume(config: TfxpConfig, root: str, data_bytes: int | None) -> ArtifactVolume | None:
    """The volume for the launcher's copies: mounted at the root scheme's launcher folder, `kubeflow.
    artifact_volume_size` (`auto`: `SIZE_FACTOR` × the data plus `SIZE_HEADROOM_GIB`, in Gi), or None for `none`
    and for `auto` when the data could not be measured (`unmeasured_warning` says so).

    Raises:
        StorageError: a size that is not a Kubernetes quantity, or not in (0, 64Ti].
    """
    wanted = config.kubeflow.artifact_volume_size
    if wanted == NONE:
        return None
    mount = LAUNCHER_MOUNTS.get(scheme(root or KFP_DEFAULT_ROOT), "minio")
    if wanted == AUTO:
        if data_bytes is None:
            return None
        gib = math.ceil(data_bytes * SIZE_FACTOR / 2**30) + SIZE_HEADROOM_GIB
        size = f"{gib}Gi"
    else:
        try:
            requested = memory_bytes(wanted)
        except QuantityError as error:
            raise StorageError(
                f"kubeflow.artifact_volume_size: {error}; or auto (sized from the data) or none"
            ) from None
        if requested > MAX_VOLUME_BYTES:
            raise StorageError(
                f"kubeflow.artifact_volume_size={wanted}: a volume claim must ask for more than 0 and at most 64Ti "
                "(Kubernetes refuses 0 and negative sizes when it creates the claim, at run time); e.g. 200Gi"
            )
        size = wanted
    return ArtifactVolume(
        mount_path=f"/{mount}", size=size, storage_class=config.kubeflow.artifact_volume_storage_class
    )


def unmeasured_warning(path: str) -> str:
    """The warning for `auto` when `data.path` could not be measured where `tfxp compile` runs."""
    return (
        f"kubeflow.artifact_volume_size=auto: data.path={path} could not be listed here, so no volume is mounted for "
        "the launcher's artifact copies (they go to the node's disk); set a size, e.g. "
        "kubeflow.artifact_volume_size=200Gi, or `none` to silence this"
    )


def data_size(path: str) -> int | None:
    """Total bytes of the files under `path` (local or bucket); None when it is not a folder that can be listed
    (`tf.io.gfile.walk` itself yields nothing for those)."""
    import tensorflow as tf

    try:
        if not tf.io.gfile.isdir(path):
            return None
        return sum(
            tf.io.gfile.stat(f"{folder.rstrip('/')}/{name}").length
            for folder, _, files in tf.io.gfile.walk(path)
            for name in files
        )
    except (OSError, tf.errors.OpError):
        return None


def handles_examples(doc: PipelineDoc, task: str) -> bool:
    """Whether the task takes or makes an Examples artifact, the one whose copy needs a volume (the others, statistics,
    schemas, models and reports, fit the node's disk)."""
    from pipeline.kubeflow.compiler.spec import pipeline_tasks

    component = doc.pipeline_spec.components[pipeline_tasks(doc.pipeline_spec)[task].component_ref.name]
    definitions = [*component.input_definitions.artifacts.values(), *component.output_definitions.artifacts.values()]
    return any(definition.artifact_type.instance_schema.startswith(EXAMPLES_SCHEMA) for definition in definitions)


def apply_storage(doc: PipelineDoc, mounts: Sequence[VolumeMount], volume: ArtifactVolume | None) -> None:
    """Adds the PVC mounts to every container executor's Kubernetes config, and the artifact volume to those of the
    tasks that take or make Examples (`handles_examples`)."""
    from google.protobuf import json_format
    from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s

    if not mounts and volume is None:
        return
    platform = doc.platform_spec.platforms[KUBERNETES_PLATFORM]
    for task, _ in container_tasks(doc.pipeline_spec):
        label = executor_label(doc.pipeline_spec, task)
        task_volume = volume if volume is not None and handles_examples(doc, task) else None
        if not mounts and task_volume is None:
            continue
        current = platform.deployment_spec.executors.get(label)
        config = k8s.KubernetesExecutorConfig()
        if current is not None:
            json_format.ParseDict(json_format.MessageToDict(current), config)
        for mount in mounts:
            pvc = config.pvc_mount.add(mount_path=mount.path)
            pvc.pvc_name_parameter.runtime_value.constant.string_value = mount.pvc
        if task_volume is not None:
            config.generic_ephemeral_volume.add(
                volume_name=VOLUME_NAME,
                mount_path=task_volume.mount_path,
                access_modes=["ReadWriteOnce"],
                size=task_volume.size,
                default_storage_class=not task_volume.storage_class,
                storage_class_name=task_volume.storage_class,
            )
        value: Any = json_format.MessageToDict(config)
        platform.deployment_spec.executors[label].Clear()
        platform.deployment_spec.executors[label].update(value)


def check_mounts(mounts: Sequence[VolumeMount]) -> None:
    """Refuses two mounts at one path.

    Raises:
        SpecPatchError: names the path.
    """
    seen: dict[str, str] = {}
    for mount in mounts:
        if mount.path in seen:
            raise SpecPatchError(f"kubeflow.volumes mounts {seen[mount.path]} and {mount.pvc} both at {mount.path}")
        seen[mount.path] = mount.pvc
