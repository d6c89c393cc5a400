"""The one typed, validated, frozen configuration of a tfxp run.

Override chain (as in Model Garden): defaults in these classes → a YAML file →
`--set section.key=value` overrides → validation → a frozen `TfxpConfig`, written
as YAML beside the run's outputs. Unknown keys are errors that name the valid keys.

Example:
    config = load_config(Path("configs/default.yaml"), ["trainer.train_steps=50"])
    config.trainer.train_steps  # 50
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ConfigError(ValueError):
    """A configuration problem: names the key, the value and what is expected."""


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader whose booleans are YAML 1.2's `true`/`false` only.

    PyYAML follows YAML 1.1, where `on`, `off`, `yes` and `no` are booleans too, so `trainer.xla: on` would
    arrive as True instead of the setting "on".
    """


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Yaml12Loader)


class _Section(BaseModel):
    # coerce_numbers_to_str: `--set kubeflow.cpu_request=4` or `data.path=2024` are strings, not numbers.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, coerce_numbers_to_str=True)


class PipelineSection(_Section):
    """Attributes:
    name: TFX pipeline name; also names `OUT/<name>/` (root and MLMD).
    output: Output directory OUT (pipeline root, MLMD, serving/, edge/, run-summary.json).
    enable_cache: Reuse component outputs when inputs and parameters are unchanged.
    """

    name: str = Field("tfxp-digits", pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    output: str = "tfxp_output"
    enable_cache: bool = True


class DataSection(_Section):
    """Attributes:
    path: Directory of TFRecords: with `train/` and `eval/` subfolders (split by file pattern),
      or TFRecords directly inside it (split by hash buckets).
    labels: Label map file, one class name a line; empty = `<path>/labels.txt`.
    label_offset: Subtracted from `image/class/label` (1 for ImageNet's 1-based build script).
    split: `folders` (train/ and eval/ subfolders), `hash` (hash buckets) or `auto` (folders when both exist).
    schema: `label_map` (a schema derived from the label map: label in range, image present),
      `infer` (TFX SchemaGen) or a path to a curated `schema.pbtxt` (ImportSchemaGen).
    file_pattern: TFRecord files to read when the data has no train/eval folders (relative to `path`).
    train_buckets: Hash buckets for train when the data has no train/eval folders.
    eval_buckets: Hash buckets for eval when the data has no train/eval folders.
    """

    path: str = "data/digits"
    labels: str = ""
    label_offset: int = Field(0, ge=0)
    split: Literal["auto", "folders", "hash"] = "auto"
    schema_source: str = Field("label_map", alias="schema")
    file_pattern: str = Field("*.tfrecord*", min_length=1)
    train_buckets: int = Field(9, ge=1)
    eval_buckets: int = Field(1, ge=1)

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, coerce_numbers_to_str=True, populate_by_name=True
    )

    @property
    def labels_path(self) -> str:
        return self.labels or f"{self.path.rstrip('/')}/labels.txt"


class TrainerSection(_Section):
    """Attributes:
    model: Model registry name (`small_resnet`, `resnet50`, `mobilenet_v2`).
    train_steps: Optimizer steps in total.
    steps_per_epoch: Steps between checkpoints/backups and metric logs.
    eval_steps: Evaluation batches after training; 0 = the whole eval split.
    batch_size: Batch size per replica; global batch = batch_size × replicas.
    learning_rate: Base learning rate for a global batch of `base_batch_size`.
    base_batch_size: Batch size `learning_rate` was tuned for (linear scaling).
    warmup_steps: Linear warmup steps before cosine decay.
    precision: `auto`, `float32`, `mixed_float16` or `mixed_bfloat16`.
    xla: `auto`, `on` or `off` (Keras `jit_compile`).
    strategy: `auto`, `default`, `mirrored` or `multi_worker`.
    image_size: Square input size in pixels (images are resized to it).
    channels: 1 (grayscale) or 3 (RGB).
    width: Width multiplier / base filters of the model.
    gpu_memory: `growth`, `default` or `limit_mb:<N>`.
    cache: Cache decoded images in memory (small data sets).
    shuffle_buffer: Shuffle buffer in examples.
    augment: Augmentations applied per batch: any of `flip`, `crop`, `translate`.
    deterministic: Deterministic input order and ops (tests); slower.
    profile_steps: Profiler step window `start,stop`; empty = off.
    seed: Random seed.
    """

    model: str = "small_resnet"
    train_steps: int = Field(300, ge=1)
    steps_per_epoch: int = Field(100, ge=1)
    eval_steps: int = Field(0, ge=0)
    batch_size: int = Field(64, ge=1)
    learning_rate: float = Field(0.002, gt=0)
    base_batch_size: int = Field(64, ge=1)
    warmup_steps: int = Field(30, ge=0)
    precision: Literal["auto", "float32", "mixed_float16", "mixed_bfloat16"] = "auto"
    xla: Literal["auto", "on", "off"] = "auto"
    strategy: Literal["auto", "default", "mirrored", "multi_worker"] = "auto"
    image_size: int = Field(16, ge=8)
    channels: Literal[1, 3] = 1
    width: int = Field(16, ge=1)
    gpu_memory: str = Field("growth", pattern=r"^(growth|default|limit_mb:[1-9][0-9]*)$")
    cache: bool = True
    shuffle_buffer: int = Field(2048, ge=1)
    augment: tuple[Literal["flip", "crop", "translate"], ...] = ()
    deterministic: bool = False
    profile_steps: str = Field("", pattern=r"^$|^[0-9]+,[0-9]+$")
    seed: int = 42


class EvaluatorSection(_Section):
    """Attributes:
    min_accuracy: Lower bound on eval accuracy for a blessing.
    max_accuracy_drop: The candidate may be at most this much less accurate than the last
      blessed model (absolute, e.g. 0.01 = one point); no baseline on the first run.
    """

    min_accuracy: float = Field(0.9, ge=0, le=1)
    max_accuracy_drop: float = Field(0.01, ge=0, le=1)


class ServingSection(_Section):
    """Attributes:
    model_name: TF Serving model name; pushes go to `OUT/serving/<model_name>/<version>/`.
    base_path: Model base path as TF Serving sees it (deploy assets); empty = the local push dir.
    grpc_port: gRPC port (TF Serving's default 8500).
    rest_port: REST port (TF Serving's default 8501).
    max_batch_size: Server-side batching: largest batch.
    batch_timeout_micros: Server-side batching: longest wait to fill a batch.
    num_batch_threads: Server-side batching: batches processed in parallel.
    max_enqueued_batches: Server-side batching: queue bound before requests are refused.
    warmup_requests: Warmup records written into `assets.extra/`.
    enable_batching: Server-side batching on (`tfxp serve` and the deploy assets).
    allowed_batch_sizes: Batch sizes batches are padded to (empty = any); the last must be max_batch_size.
    version_policy: Versions served: `latest` (num_versions newest), `all`, or `specific` (versions).
    num_versions: Versions kept by the `latest` policy.
    versions: Versions served by the `specific` policy (empty = the labelled ones).
    stable_version: Version labelled `stable` in models.config (0 = no label).
    canary_version: Version labelled `canary` in models.config (0 = no label).
    poll_interval_seconds: How often the server checks the base path for new versions.
    config_poll_seconds: How often TF Serving re-reads models.config (moved labels apply without restart).
    max_request_mb: Largest request body the local server accepts.
    intra_op_threads: TensorFlow threads within one op (TF Serving's --tensorflow_intra_op_parallelism); 0 = TF's.
    inter_op_threads: TensorFlow ops run in parallel (--tensorflow_inter_op_parallelism); 0 = TF's choice.
    gpu_max_batch_size: GPU batching (batching_parameters_gpu.txt): largest batch.
    gpu_batch_timeout_micros: GPU batching: longest wait to fill a batch.
    cpu_image: Pinned TF Serving CPU image for the docker script and Kubernetes.
    gpu_image: Pinned TF Serving GPU image.
    cpu: CPU request/limit per serving pod (also the GPU batch threads).
    memory: Memory request/limit per serving pod.
    gpus: GPUs per serving pod (0 = the CPU image).
    min_replicas: Serving pods the autoscaler keeps at least.
    max_replicas: Serving pods the autoscaler may add up to.
    target_cpu_percent: Autoscaler CPU utilisation target.
    model_pvc: PersistentVolumeClaim with the models (empty = `<model_name>-models`).
    storage_uri: KServe storageUri (empty = `pvc://<model_pvc>/<model_name>`).
    namespace: Kubernetes namespace of the manifests (empty = none set).
    """

    model_name: str = Field("digits", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    base_path: str = ""
    grpc_port: int = Field(8500, ge=1, le=65535)
    rest_port: int = Field(8501, ge=1, le=65535)
    max_batch_size: int = Field(32, ge=1)
    batch_timeout_micros: int = Field(2000, ge=0)
    num_batch_threads: int = Field(2, ge=1)
    max_enqueued_batches: int = Field(100, ge=1)
    warmup_requests: int = Field(4, ge=0)
    enable_batching: bool = True
    allowed_batch_sizes: tuple[int, ...] = ()
    version_policy: Literal["latest", "all", "specific"] = "latest"
    num_versions: int = Field(1, ge=1)
    versions: tuple[int, ...] = ()
    stable_version: int = Field(0, ge=0)
    canary_version: int = Field(0, ge=0)
    poll_interval_seconds: float = Field(1.0, gt=0)
    config_poll_seconds: int = Field(60, ge=0)
    max_request_mb: int = Field(16, ge=1)
    intra_op_threads: int = Field(0, ge=0)
    inter_op_threads: int = Field(0, ge=0)
    gpu_max_batch_size: int = Field(128, ge=1)
    gpu_batch_timeout_micros: int = Field(5000, ge=0)
    cpu_image: str = "tensorflow/serving:2.19.1"
    gpu_image: str = "tensorflow/serving:2.19.1-gpu"
    cpu: str = Field("4", pattern=r"^[0-9]+(\.[0-9]+)?m?$", coerce_numbers_to_str=True)
    memory: str = "8Gi"
    gpus: int = Field(0, ge=0)
    min_replicas: int = Field(2, ge=1)
    max_replicas: int = Field(10, ge=1)
    target_cpu_percent: int = Field(70, ge=1, le=100)
    model_pvc: str = ""
    storage_uri: str = ""
    namespace: str = ""


class EdgeSection(_Section):
    """Attributes:
    enabled: Run the EdgeExporter in the pipeline.
    mode: `none` (float32), `dynamic`, `float16` or `int8` (full integer).
    io_dtype: Input/output type of an int8 model: `int8`, `uint8` or `float32`.
    representative_samples: Train examples used to calibrate int8 quantization.
    supported_ops: `builtins`, or `builtins+select_tf` to allow TF ops (needs the Flex delegate).
    max_accuracy_drop: Largest accuracy loss (absolute) of the TFLite model vs the SavedModel.
    threads: LiteRT interpreter threads for evaluation and benchmarks.
    eval_samples: Eval examples the EdgeExporter evaluates both models on; 0 = the whole eval split.
    keep_tensor_names: Keep the converter's tensor debug names in `model.tflite` (for Netron); by default they are
      stripped, a few KB less per model; signatures and their input/output names stay either way.
    """

    enabled: bool = True
    mode: Literal["none", "dynamic", "float16", "int8"] = "int8"
    io_dtype: Literal["int8", "uint8", "float32"] = "int8"
    representative_samples: int = Field(200, ge=1)
    supported_ops: Literal["builtins", "builtins+select_tf"] = "builtins"
    max_accuracy_drop: float = Field(0.01, ge=0, le=1)
    threads: int = Field(2, ge=1)
    eval_samples: int = Field(0, ge=0)
    keep_tensor_names: bool = False


class AcceleratorSpec(_Section):
    """Attributes:
    type: Kubernetes accelerator resource or node type, e.g. `nvidia.com/gpu` or `NVIDIA_TESLA_A100`.
    count: Accelerators per Trainer pod; 0 = none.
    """

    type: str = ""
    count: int = Field(0, ge=0)


class KubeflowSection(_Section):
    """Attributes:
    image: Component image with tfxp installed (pin a tag or digest, not `latest`).
    pipeline_root: Pipeline root on shared storage, e.g. `gs://bucket/tfxp`; empty = `<pipeline.output>/<name>/root`
      when `pipeline.output` is a bucket path.
    trainer_accelerator: Accelerators for the Trainer.
    cpu_request: CPU request/limit for every component, e.g. `2`.
    memory_request: Memory request/limit for every component, e.g. `8G`.
    trainer_cpu: CPU request/limit for the Trainer.
    trainer_memory: Memory request/limit for the Trainer.
    retries: Retries per component.
    retry_backoff_seconds: First retry backoff; doubles each retry.
    retry_backoff_max_seconds: Longest backoff between two retries.
    display_name: Pipeline name shown in the KFP UI; empty = `pipeline.name`.
    uncached_components: Components KFP never serves from its cache. ImportExampleGen by default: KFP's cache key
      sees `data.path`, not the files under it, so a cached run would miss new data.
    trainer_node_selector: Node labels the Trainer pod requires, `key=value`, e.g.
      `cloud.google.com/gke-accelerator=nvidia-tesla-a100`.
    trainer_tolerations: Taints the Trainer pod tolerates, `key=value:Effect` or `key:Effect`,
      e.g. `nvidia.com/gpu:NoSchedule`.
    """

    image: str = "tfxp:0.1.0"
    pipeline_root: str = ""
    trainer_accelerator: AcceleratorSpec = AcceleratorSpec()
    cpu_request: str = "2"
    memory_request: str = "8G"
    trainer_cpu: str = "8"
    trainer_memory: str = "32G"
    retries: int = Field(2, ge=0)
    retry_backoff_seconds: int = Field(60, ge=0)
    retry_backoff_max_seconds: int = Field(3600, ge=0)
    display_name: str = ""
    uncached_components: tuple[str, ...] = ("ImportExampleGen",)
    trainer_node_selector: tuple[str, ...] = ()
    trainer_tolerations: tuple[str, ...] = ()


class BeamSection(_Section):
    """Attributes:
    direct_running_mode: Beam DirectRunner mode: `in_memory`, `multi_threading` or `multi_processing`.
    direct_num_workers: DirectRunner workers; 0 = one per core.
    extra_args: Further Beam pipeline args, e.g. `--runner=DataflowRunner` for large data.
    """

    direct_running_mode: Literal["in_memory", "multi_threading", "multi_processing"] = "in_memory"
    direct_num_workers: int = Field(0, ge=0)
    extra_args: tuple[str, ...] = ()


class TfxpConfig(_Section):
    """The whole configuration; see each section's attributes."""

    pipeline: PipelineSection = PipelineSection()
    data: DataSection = DataSection()
    trainer: TrainerSection = TrainerSection()
    evaluator: EvaluatorSection = EvaluatorSection()
    serving: ServingSection = ServingSection()
    edge: EdgeSection = EdgeSection()
    kubeflow: KubeflowSection = KubeflowSection()
    beam: BeamSection = BeamSection()

    @model_validator(mode="after")
    def _check_consistency(self) -> TfxpConfig:
        accelerator = self.kubeflow.trainer_accelerator
        if accelerator.count > 0 and not accelerator.type:
            raise ValueError(
                f"kubeflow.trainer_accelerator.count is {accelerator.count} but kubeflow.trainer_accelerator.type "
                "is empty; set it, e.g. `--set kubeflow.trainer_accelerator.type=nvidia.com/gpu`"
            )
        if self.edge.mode != "int8" and self.edge.io_dtype != "int8":
            raise ValueError(f"edge.io_dtype={self.edge.io_dtype} applies to edge.mode=int8 only")
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists, not tuples), as written to YAML and the run summary."""
        return _plain(self.model_dump(by_alias=True))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _section_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(_section_keys(annotation, f"{prefix}{key}."))
        else:
            keys.append(f"{prefix}{key}")
    return keys


def valid_keys() -> list[str]:
    """Every settable key, `section.key` (nested: `section.key.sub`)."""
    return _section_keys(TfxpConfig)


def parse_override(override: str) -> tuple[list[str], Any]:
    """Splits `section.key=value`; the value is read as a YAML scalar or list.

    Raises:
        ConfigError: when the override has no `=` or an empty key.
    """
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {override!r}: expected `section.key=value`, e.g. `--set trainer.train_steps=100`")
    try:
        value = _load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def _apply(tree: dict[str, Any], path: list[str], value: Any, override: str) -> None:
    node = tree
    for depth, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {override}: `{'.'.join(path[: depth + 1])}` is not a section")
        node = child
    node[path[-1]] = value


def _describe(errors: list[Any], source: str) -> str:
    lines = []
    keys = valid_keys()
    for error in errors:
        key = ".".join(str(part) for part in error["loc"])
        if not key:  # a cross-field check of TfxpConfig
            lines.append(str(error["msg"]).removeprefix("Value error, "))
        elif error["type"] == "extra_forbidden":
            section = key.rsplit(".", 1)[0] + "." if "." in key else ""
            options = [k for k in keys if k.startswith(section)] if section else sorted({k.split(".")[0] for k in keys})
            lines.append(f"unknown key `{key}`; valid keys here: {', '.join(options)}")
        else:
            received = error.get("input")
            lines.append(f"`{key}` = {received!r}: {error['msg']}")
    return f"invalid configuration ({source}):\n  " + "\n  ".join(lines)


def build_config(values: Mapping[str, Any], overrides: Sequence[str] = (), source: str = "defaults") -> TfxpConfig:
    """Validates `values` (nested dicts, as read from YAML) plus `--set` overrides.

    Raises:
        ConfigError: unknown keys (with the valid ones), wrong types, out-of-range values.
    """
    tree: dict[str, Any] = _deep_copy(values)
    for override in overrides:
        path, value = parse_override(override)
        _apply(tree, path, value, override)
    if overrides:
        source += " + --set " + " ".join(overrides)
    try:
        return TfxpConfig.model_validate(tree)
    except ValidationError as error:
        raise ConfigError(_describe(error.errors(), source)) from None


def _deep_copy(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _deep_copy(value) if isinstance(value, Mapping) else value for key, value in values.items()}


def load_config(path: Path | None = None, overrides: Sequence[str] = ()) -> TfxpConfig:
    """Defaults → YAML file → `--set` overrides → validated, frozen config.

    Args:
        path: A YAML file with any subset of the sections; None = defaults only.
        overrides: `section.key=value` strings, applied in order.

    Raises:
        ConfigError: unreadable file, non-mapping YAML, unknown keys, wrong types.
    """
    values: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        try:
            loaded = _load_yaml(path.read_text())
        except OSError as error:
            raise ConfigError(f"cannot read config file {path}: {error.strerror}; pass an existing --config") from None
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {path} is not valid YAML: {error}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping of sections, got {type(loaded).__name__}")
        values = loaded
        source = str(path)
    return build_config(values, overrides, source)


def write_config(config: TfxpConfig, path: Path) -> None:
    """Writes the frozen config as YAML (the `params.yaml` beside a run's outputs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
