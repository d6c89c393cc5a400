"""The one typed, validated, frozen configuration of a tfxp run.

Override chain (as in Model Garden): defaults in these classes → a YAML file →
`--set section.key=value` overrides → validation → a frozen `TfxpConfig`, written
as YAML beside the run's outputs. Unknown keys are errors that name the valid keys.

Each section is declared once, in the package that uses it, and composed here (as Model Garden's
`ExperimentConfig` composes task configs): `trainer` is `components.trainer.options.TrainerOptions`,
`edge` is `edge.options.EdgeOptions`, `serving` is `serving.options.ServingOptions`; the pipeline's own
sections (`pipeline`, `data`, `evaluator`, `kubeflow`, `beam`) are declared below. Loading a config imports
no TensorFlow: registry names (`trainer.model`, `edge.mode`) are checked against their light declarations.

Example:
    config = load_config(Path("configs/default.yaml"), ["trainer.train_steps=50"])
    config.trainer.train_steps  # 50
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

from components.multinode.settings import WORKER_KEYS_MOVED, WorkerSettings
from components.trainer.options import TrainerOptions
from components.trainer.recipe import global_batch, recipe_problems
from components.validation.drift_options import DriftOptions
from edge.options import EdgeOptions
from foundation.config_section import (
    MAX_DURATION_SECONDS,
    ConfigSection,
    describe_errors,
    refuse_moved_keys,
    section_keys,
)
from foundation.data.spans import POLICY_HELP, SpanError, parse_policy
from foundation.errors import TfxpError
from foundation.k8s.image import Image
from foundation.k8s.names import check_resource_name
from foundation.k8s.quantity import INT32_MAX, INT64_MAX, CpuQuantity, MemoryQuantity
from foundation.paths import is_relative
from foundation.yaml_files import Yaml12Loader, YamlDuplicateKeyError, YamlLimitError, load_yaml
from serving.options import ServingOptions


class ConfigError(TfxpError, ValueError):
    """A configuration problem: names the key, the value and what is expected."""


# TFX's SplitConfig.Split.hash_buckets is a uint32.
MAX_HASH_BUCKETS = 2**32 - 1


def _load_yaml(text: str, source: str) -> Any:
    # YAML 1.2 booleans only (`trainer.xla: on` stays the text "on"); aliases bounded (foundation.yaml_files).
    try:
        return load_yaml(text, source, Yaml12Loader)
    except ValueError as error:  # PyYAML's int() of a number with more than 4300 digits
        raise ConfigError(f"{source}: {error.args[0].split(';')[0]}; no setting takes a number that long") from None


class PipelineSection(ConfigSection):
    """Attributes:
    name: TFX pipeline name; also names `OUT/<name>/` (root and MLMD).
    output: Output directory OUT (pipeline root, MLMD, serving/, edge/, run-summary.json).
    enable_cache: Reuse component outputs when inputs and parameters are unchanged.
    """

    name: str = Field("tfxp-digits", pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    output: str = "tfxp_output"
    enable_cache: bool = True


def _spans_policy(value: Any) -> str | int:
    try:
        return parse_policy(value) if not isinstance(value, bool) else parse_policy("")
    except SpanError:
        raise ValueError(f"expected {POLICY_HELP}") from None


def _label_offset(value: Any) -> str | int:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value  # type: ignore[no-any-return]
    raise ValueError("expected auto or a number ≥ 0 (the label of the first class: 1 for ImageNet's build scripts)")


SpansPolicy = Annotated[str | int, PlainValidator(_spans_policy)]
LabelOffset = Annotated[str | int, PlainValidator(_label_offset)]


class DataSection(ConfigSection):
    """Attributes:
    path: Directory of TFRecords, read as they are (docs/data.md, "Data layouts"): `train/` + `eval/` or
      `train/` + `validation/` folders, flat `train-*` + `validation-*` shards (TensorFlow's ImageNet build scripts), or
      TFRecords directly inside it (split by hash buckets); or span folders `span-N/` each holding one of those.
    labels: Label map file, one class a line (a name, or a WordNet synset and optionally its description);
      empty = `<path>/labels.txt`.
    label_offset: Subtracted from `image/class/label` (1 for ImageNet's 1-based build scripts). `auto`: read
      from the first train examples by matching `image/class/synset` or `image/class/text` with the label map,
      0 when they carry neither.
    split: `auto` (recognise the layout), `folders` (the train and eval patterns; tfxp's `train/` + `eval/`
      unless `train_pattern` and `eval_pattern` are set) or `hash` (hash buckets over `file_pattern`).
    train_pattern: Glob of the train files relative to `path` (or to each span folder), e.g. `train-*`; set
      together with `eval_pattern` for a layout `auto` does not recognise.
    eval_pattern: Glob of the eval files, e.g. `validation-*`.
    spans: Which `span-N/` folders a run reads: `none` (the data has no span folders), `latest`, `all`, or N
      (the newest N: spans newest-N+1 to newest, as TFX's RollingRange).
    schema: `label_map` (a schema derived from the label map: label in range, image present),
      `infer` (TFX SchemaGen) or a path to a curated `schema.pbtxt` (ImportSchemaGen).
    file_pattern: TFRecord files to read when the data is split by hash buckets (relative to `path`).
    train_buckets: Hash buckets for train when the data is split by hash buckets.
    eval_buckets: Hash buckets for eval when the data is split by hash buckets.
    drift: Drift checks between spans (`components.validation.drift_options.DriftOptions`), in the
      ExampleValidator: on by default with spans; the newest span against the earlier ones, before the Trainer.
    """

    path: str = "data/digits"
    labels: str = ""
    label_offset: LabelOffset = "auto"
    split: Literal["auto", "folders", "hash"] = "auto"
    train_pattern: str = ""
    eval_pattern: str = ""
    spans: SpansPolicy = "none"
    schema_source: str = Field("label_map", alias="schema")
    file_pattern: str = Field("*.tfrecord*", min_length=1)
    train_buckets: int = Field(9, ge=1, le=MAX_HASH_BUCKETS)
    eval_buckets: int = Field(1, ge=1, le=MAX_HASH_BUCKETS)
    drift: DriftOptions = DriftOptions()

    model_config = ConfigDict(populate_by_name=True)  # merged with ConfigSection's

    @model_validator(mode="after")
    def _check_patterns(self) -> DataSection:
        if bool(self.train_pattern) != bool(self.eval_pattern):
            given, missing = ("train", "eval") if self.train_pattern else ("eval", "train")
            raise ValueError(
                f"data.{given}_pattern is set but data.{missing}_pattern is not; set both, e.g. "
                "`--set data.train_pattern='train-*' --set data.eval_pattern='validation-*'`"
            )
        if self.train_pattern and self.split == "hash":
            raise ValueError(
                "data.train_pattern and data.eval_pattern name the splits, but data.split is hash (one set of "
                "files split by hash buckets, data.file_pattern); use data.split=auto or folders with the patterns"
            )
        for key in ("train_pattern", "eval_pattern", "file_pattern"):
            pattern = getattr(self, key)
            if not is_relative(pattern) or "{" in pattern:
                raise ValueError(
                    f"data.{key} = {pattern!r}: a glob relative to data.path (or to each span-N folder), without "
                    "{SPAN}; spans are chosen with data.spans"
                )
        return self

    @field_validator("path")
    @classmethod
    def _path_given(cls, value: str) -> str:
        if not value.strip():  # a blank path would read the working directory
            raise ValueError("is empty; set it to the directory of the TFRecords, e.g. `--set data.path=data/digits`")
        return value

    @property
    def labels_path(self) -> str:
        return self.labels or f"{self.path.rstrip('/')}/labels.txt"

    @property
    def first_label(self) -> int:
        """`label_offset` as a number: an unresolved `auto` (the runners resolve it, `pipeline.layout`) reads as 0."""
        return self.label_offset if isinstance(self.label_offset, int) else 0


class EvaluatorSection(ConfigSection):
    """Attributes:
    min_accuracy: Lower bound on eval accuracy for a blessing.
    max_accuracy_drop: The candidate may be at most this much less accurate than the served model
      (absolute, e.g. 0.01 = one point), both measured on this run's eval split; no check while
      nothing is served yet.
    baseline: What the candidate is compared with: `served` (the newest complete version under the
      serving base path, what TF Serving serves; a served version that cannot be loaded or lacks the
      eval signatures fails the run before evaluation) or `none` (compare with nothing: `min_accuracy`
      alone; the explicit way past a broken served model).
    """

    min_accuracy: float = Field(0.9, ge=0, le=1)
    max_accuracy_drop: float = Field(0.01, ge=0, le=1)
    baseline: Literal["served", "none"] = "served"


class AcceleratorSpec(ConfigSection):
    """Attributes:
    type: Kubernetes accelerator resource or node type, e.g. `nvidia.com/gpu` or `NVIDIA_TESLA_A100`.
    count: Accelerators per Trainer pod; 0 = none.
    """

    type: Annotated[str, AfterValidator(check_resource_name)] = ""
    count: int = Field(0, ge=0, le=INT64_MAX)


class KubeflowSection(ConfigSection):
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
    uncached_components: Components KFP never serves from its cache; none by default. KFP's cache key sees
      `data.path`, not the files under it, and nothing of the served model: the compiled spec keys ImportExampleGen
      and ServedBaseline by the `InputFingerprint` task (the selected spans' files, the served version), so they
      rerun exactly when those change (`pipeline.kubeflow.compiler.cache_keys`).
    trainer_node_selector: Node labels the Trainer pod requires, `key=value`, e.g.
      `cloud.google.com/gke-accelerator=nvidia-tesla-a100`.
    trainer_tolerations: Taints the Trainer pod tolerates, `key=value:Effect` or `key:Effect`,
      e.g. `nvidia.com/gpu:NoSchedule`.
    image_pull_secrets: Secrets (type docker-registry, in the run's namespace) every pod pulls the image with,
      e.g. `regcred`.
    pod_labels: Labels of every component pod, `key=value`, e.g. `team=ml-platform`.
    pod_annotations: Annotations of every component pod, `key=value`, e.g. `sidecar.istio.io/inject=false`.
    notify_url: Where an exit handler posts each run's outcome as JSON (with a Slack-compatible `text`), e.g.
      a Slack incoming webhook; empty = no exit handler. It is compiled into the spec, readable by anyone who
      can read the pipeline.
    volumes: PersistentVolumeClaims mounted into every pod, `pvc-name:/mount/path`; local paths under a mount
      (`data.path`, the serving base, ...) are what the pods see there (`pipeline.kubeflow.compiler.storage`).
    artifact_volume_size: The per-pod volume where KFP's launcher keeps its copies of the input and output
      artifacts (`/gcs`, `/minio` or `/s3`): `auto` (1.25 × the size of `data.path` + 10Gi, measured at compile
      time), a Kubernetes quantity such as `200Gi`, or `none` (the node's ephemeral storage holds them).
    artifact_volume_storage_class: Storage class of that volume; empty = the cluster's default.
    namespace: The namespace runs execute in (KFP standalone: `kubeflow`; multi-user: the profile's namespace);
      the RBAC written beside the compiled spec binds `service_account` there.
    service_account: The service account of the pipeline's pods (KFP's default `pipeline-runner`).
    workers: The workers' TFJob with `trainer.workers` > 1 (`components.multinode.settings.WorkerSettings`:
      deadline, scheduling, restarts, `/dev/shm`, environment, the shared folder). Each worker is sized like the
      one-pod Trainer, by `trainer_cpu`, `trainer_memory`, `trainer_accelerator`, `trainer_node_selector` and
      `trainer_tolerations` above.
    """

    image: Image = "tfxp:0.1.0"
    pipeline_root: str = ""
    trainer_accelerator: AcceleratorSpec = AcceleratorSpec()
    cpu_request: CpuQuantity = "2"
    memory_request: MemoryQuantity = "8G"
    trainer_cpu: CpuQuantity = "8"
    trainer_memory: MemoryQuantity = "32G"
    retries: int = Field(2, ge=0, le=INT32_MAX)  # KFP's RetryPolicy.max_retry_count is an int32
    retry_backoff_seconds: int = Field(60, ge=0, le=MAX_DURATION_SECONDS)
    retry_backoff_max_seconds: int = Field(3600, ge=0, le=MAX_DURATION_SECONDS)
    display_name: str = ""
    uncached_components: tuple[str, ...] = ()
    trainer_node_selector: tuple[str, ...] = ()
    trainer_tolerations: tuple[str, ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    pod_labels: tuple[str, ...] = ()
    pod_annotations: tuple[str, ...] = ()
    notify_url: str = Field("", pattern=r"^(https?://\S+)?$")
    volumes: tuple[str, ...] = ()
    artifact_volume_size: str = "auto"
    artifact_volume_storage_class: str = ""
    namespace: str = "kubeflow"
    service_account: str = "pipeline-runner"
    workers: WorkerSettings = WorkerSettings()

    @model_validator(mode="before")
    @classmethod
    def _refuse_moved_keys(cls, values: Any) -> Any:
        return refuse_moved_keys(values, "kubeflow", WORKER_KEYS_MOVED, 'docs/kubeflow.md, "Training on several nodes"')


class BeamSection(ConfigSection):
    """Attributes:
    direct_running_mode: Beam DirectRunner mode: `in_memory`, `multi_threading` or `multi_processing`.
    direct_num_workers: DirectRunner workers; 0 = one per core.
    extra_args: Further Beam pipeline args, e.g. `--runner=DataflowRunner` for large data.
    """

    direct_running_mode: Literal["in_memory", "multi_threading", "multi_processing"] = "in_memory"
    direct_num_workers: int = Field(0, ge=0)
    extra_args: tuple[str, ...] = ()


class TfxpConfig(ConfigSection):
    """The whole configuration; see each section's attributes."""

    pipeline: PipelineSection = PipelineSection()
    data: DataSection = DataSection()
    trainer: TrainerOptions = TrainerOptions()
    evaluator: EvaluatorSection = EvaluatorSection()
    serving: ServingOptions = ServingOptions()
    edge: EdgeOptions = EdgeOptions()
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
        # The global batch the Trainer will have: kubeflow.trainer_accelerator.count GPUs on each worker
        # (one device when none is requested, as locally). The Trainer checks again with the devices it finds.
        problems = recipe_problems(self.trainer, global_batch(self.trainer, accelerator.count))
        if problems:
            raise ValueError("the training recipe would not train: " + "; ".join(problems))
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


def valid_keys() -> list[str]:
    """Every settable key, `section.key` (nested: `section.key.sub`)."""
    return section_keys(TfxpConfig)


def parse_override(override: str) -> tuple[list[str], Any]:
    """Splits `section.key=value`; the value is read as a YAML scalar or list.

    Raises:
        ConfigError: when the override has no `=` or an empty key.
    """
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {override!r}: expected `section.key=value`, e.g. `--set trainer.train_steps=100`")
    try:
        value = _load_yaml(raw, f"--set {override}") if raw.strip() else ""
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
        problems = describe_errors(error, TfxpConfig)
        raise ConfigError(f"invalid configuration ({source}):\n  " + "\n  ".join(problems)) from None


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
            loaded = _load_yaml(path.read_text(), f"config file {path}")
        except OSError as error:
            raise ConfigError(f"cannot read config file {path}: {error.strerror}; pass an existing --config") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not UTF-8 text; --config takes a YAML file") from None
        except (YamlLimitError, YamlDuplicateKeyError) as error:
            raise ConfigError(str(error)) from None
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
