"""The pipeline's own config sections: `pipeline`, `data`, `evaluator`, `kubeflow` and `beam`.

The other sections are declared in the packages that use them (`trainer`, `edge`, `serving`, and
`kubeflow.workers` in `components.multinode.settings`); `pipeline.config` composes them all into `TfxpConfig`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, PlainValidator, field_validator, model_validator

from components.multinode.settings import WORKER_KEYS_MOVED, WorkerSettings
from components.validation.drift_options import DriftOptions
from foundation.config_section import MAX_DURATION_SECONDS, ConfigSection, refuse_moved_keys
from foundation.data.layout import DEFAULT_FILE_PATTERN, DataSpec
from foundation.data.spans import POLICY_HELP, SpanError, parse_policy
from foundation.k8s.image import Image
from foundation.k8s.names import check_resource_name
from foundation.k8s.quantity import INT32_MAX, INT64_MAX, CpuQuantity, MemoryQuantity
from foundation.path_rules import relative_problem

# TFX's SplitConfig.Split.hash_buckets is a uint32.
MAX_HASH_BUCKETS = 2**32 - 1


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
    min_span_examples: With spans, the fewest records each split of each span a run reads must hold: a span with
      fewer stops the run at the ExampleValidator, before the Trainer, naming the span and its counts. 1 (the
      default) refuses a span that arrived empty; 0 = no check.
    """

    path: str = "data/digits"
    labels: str = ""
    label_offset: LabelOffset = "auto"
    split: Literal["auto", "folders", "hash"] = "auto"
    train_pattern: str = ""
    eval_pattern: str = ""
    spans: SpansPolicy = "none"
    schema_source: str = Field("label_map", alias="schema")
    file_pattern: str = Field(DEFAULT_FILE_PATTERN, min_length=1)
    train_buckets: int = Field(9, ge=1, le=MAX_HASH_BUCKETS)
    eval_buckets: int = Field(1, ge=1, le=MAX_HASH_BUCKETS)
    drift: DriftOptions = DriftOptions()
    min_span_examples: int = Field(1, ge=0, le=INT64_MAX)

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
            problem = relative_problem(pattern)
            if problem is not None or "{" in pattern:
                raise ValueError(
                    f"data.{key} = {pattern!r}{' ' + problem if problem else ''}: a glob relative to data.path (or "
                    "to each span-N folder; no leading /, no URI, no .. that leaves it), without {SPAN}; spans are "
                    "chosen with data.spans"
                )
        return self

    @field_validator("path")
    @classmethod
    def _path_given(cls, value: str) -> str:
        if not value.strip():  # a blank path would read the working directory
            raise ValueError("is empty; set it to the directory of the TFRecords, e.g. `--set data.path=data/digits`")
        return value

    def spec(self) -> DataSpec:
        """The keys that decide which files are read, for `foundation.data.layout`: each `DataSpec` field is the
        key of this section with its name."""
        return DataSpec(**{key.name: getattr(self, key.name) for key in fields(DataSpec)})

    @property
    def labels_path(self) -> str:
        return self.spec().labels_path

    @property
    def first_label(self) -> int:
        """`label_offset` as a number: an unresolved `auto` (the runners resolve it, `pipeline.layout`) reads as 0."""
        return self.spec().first_label


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
