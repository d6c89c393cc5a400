"""The `serving` config section: the served model, the server's batching and threads, and its deployment.

`ServingOptions` *is* the `serving` section: `pipeline/config.py` composes it; `tfxp serve` reads the server's
settings from it and `serving.deploy.render_deploy_assets` renders the TF Serving assets from it, after
`deployed_serving` has resolved where TF Serving reads the models.

Example:
    options = ServingOptions(model_name="flowers", version_policy="specific", stable_version=3)
    options.labels  # {'stable': 3}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from foundation.config_section import ConfigSection
from foundation.k8s.image import Image
from foundation.k8s.names import check_claim_name, check_label, check_namespace, check_own_namespace
from foundation.k8s.quantity import INT32_MAX, INT64_MAX, CpuQuantity, MemoryQuantity
from foundation.paths import is_remote
from serving.canary_options import CanarySettings
from serving.k8s_names import kubernetes_name

# gRPC takes its timeouts as int32 milliseconds (`grpc.max_connection_idle_ms`, `grpc.server_handshake_timeout_ms`):
# 24.8 days at most; a 30-day idle timeout was an OverflowError at the server's start.
MAX_GRPC_TIMEOUT_SECONDS = INT32_MAX // 1000
Namespace = Annotated[str, AfterValidator(check_namespace)]
Label = Annotated[str, AfterValidator(check_label)]
# Per request on the local server (`serving.limits`): 2.5 images at the model's default per-image limit, or 48
# full-HD frames; at about 17 bytes a decoded pixel, 1.7 GB at most.
DEFAULT_MAX_REQUEST_PIXELS = 100_000_000
# Beyond 16 MP a request, at most this many decoded pixels per byte of image data (`serving.limits`): photos take
# 2 to 16, screenshots and document scans 20 to 60; a solid PNG 1000 (DEFLATE's largest ratio).
DEFAULT_MAX_PIXELS_PER_BYTE = 64


class ServingOptions(ConfigSection):
    """The `serving` config section.

    Attributes:
        model_name: TF Serving model name; pushes go to `OUT/serving/<model_name>/<version>/`.
        base_path: Model base path as TF Serving sees it (deploy assets); empty = where pushes go: a bucket
            path as it is, a local push dir mounted (the `model_pvc` volume, the docker scripts' MODEL_DIR).
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
        stable_version: Version labelled `stable` in models.config (0 = no label); not with `rollout: canary`,
            whose state moves the labels.
        canary_version: Version labelled `canary` in models.config (0 = no label); not with `rollout: canary`.
        rollout: `direct` (a pushed version takes traffic at the next poll, as the version policy says) or
            `canary` (it serves as the canary beside `stable` until `tfxp rollout` promotes or rolls it back;
            `docs/serving.md`, "Guarded rollout"); `canary` needs `version_policy: specific`.
        canary: The canary's traffic share and the evidence that promotes it (`serving.canary_options`).
        load_check: Before the Pusher publishes a version, load it in a real serving process (TF Serving where
            `tensorflow_model_server` is installed, else the local server) and compare its answers on an eval
            sample with the SavedModel's in-process ones; a model that fails is not pushed (`serving.load_check`,
            `docs/serving.md`). Always on under `rollout: canary`.
        poll_interval_seconds: How often the server checks the base path for new versions.
        config_poll_seconds: How often TF Serving re-reads models.config (moved labels apply without restart).
        max_request_mb: Largest request body the local server accepts.
        max_connections: Most REST connections the local server keeps open; more are answered 503 at once.
        request_timeout_seconds: The local server's deadline for a REST request's line and headers (from
            connecting) and for its body; gRPC's handshake timeout. Stalled or trickling peers get 408.
        idle_timeout_seconds: The local server closes a kept-alive REST connection, or an idle gRPC one, after
            this long without a complete request.
        max_request_pixels: Most pixels the images of one request may declare in total on the local server
            (each image's own limit is `trainer.max_image_pixels`, in the model).
        max_pixels_per_byte: Beyond the first 16 MP of a request, most pixels a byte of its image data may
            decode to on the local server (a 103 KB request of solid PNGs decoded to 1.6 GB); 0 = no limit.
        intra_op_threads: TensorFlow threads within one op (TF Serving's --tensorflow_intra_op_parallelism); 0 = TF's.
        inter_op_threads: TensorFlow ops run in parallel (--tensorflow_inter_op_parallelism); 0 = TF's choice.
        gpu_max_batch_size: GPU batching (batching_parameters_gpu.txt): largest batch.
        gpu_batch_timeout_micros: GPU batching: longest wait to fill a batch.
        cpu_image: Pinned TF Serving CPU image for the docker script and Kubernetes (an OCI image reference,
            `foundation.k8s.image`).
        gpu_image: Pinned TF Serving GPU image.
        cpu: CPU request/limit per serving pod (also the GPU batch threads), a Kubernetes quantity above 0.
        memory: Memory request/limit per serving pod, a Kubernetes quantity above 0 (`foundation.k8s.quantity`).
        gpus: GPUs per serving pod (0 = the CPU image).
        min_replicas: Serving pods the autoscaler keeps at least.
        max_replicas: Serving pods the autoscaler may add up to.
        target_cpu_percent: Autoscaler CPU utilisation target.
        model_pvc: PersistentVolumeClaim with the models (empty = `<model_name>-models`, made a valid name).
        storage_uri: KServe storageUri (empty = a bucket `base_path`, else `pvc://<model_pvc>/<model_name>`).
        namespace: Kubernetes namespace of every object; `kubernetes/00-namespace.yaml` creates it with the
            "restricted" Pod Security Standard enforced, so it may not be one Kubernetes manages (`default`,
            `kube-system`, `kube-public`, `kube-node-lease`).
        allowed_namespaces: Namespaces whose pods may reach the gRPC and REST ports (the NetworkPolicy);
            empty = the serving namespace only. List the serving namespace too if its pods call the model.
        allowed_pod_labels: Labels, `key=value`, a calling pod must carry (all of them); empty = any pod in the
            allowed namespaces.
        run_as_user: UID and GID of the TF Serving container (the image sets none, so it would run as root);
            10000 or more keeps clear of host users. The model files must be readable by it.
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
    rollout: Literal["direct", "canary"] = "direct"
    canary: CanarySettings = CanarySettings()
    load_check: bool = False
    poll_interval_seconds: float = Field(1.0, gt=0)
    config_poll_seconds: int = Field(60, ge=0)
    max_request_mb: int = Field(16, ge=1)
    max_request_pixels: int = Field(DEFAULT_MAX_REQUEST_PIXELS, ge=1)
    max_pixels_per_byte: int = Field(DEFAULT_MAX_PIXELS_PER_BYTE, ge=0)
    max_connections: int = Field(1000, ge=1)
    request_timeout_seconds: float = Field(30.0, gt=0, le=MAX_GRPC_TIMEOUT_SECONDS)
    idle_timeout_seconds: float = Field(75.0, gt=0, le=MAX_GRPC_TIMEOUT_SECONDS)
    intra_op_threads: int = Field(0, ge=0)
    inter_op_threads: int = Field(0, ge=0)
    gpu_max_batch_size: int = Field(128, ge=1)
    gpu_batch_timeout_micros: int = Field(5000, ge=0)
    cpu_image: Image = "tensorflow/serving:2.19.1"
    gpu_image: Image = "tensorflow/serving:2.19.1-gpu"
    cpu: CpuQuantity = "4"
    memory: MemoryQuantity = "8Gi"
    gpus: int = Field(0, ge=0, le=INT64_MAX)
    # int32 fields of the Deployment and the HPA.
    min_replicas: int = Field(2, ge=1, le=INT32_MAX)
    max_replicas: int = Field(10, ge=1, le=INT32_MAX)
    target_cpu_percent: int = Field(70, ge=1, le=100)
    model_pvc: Annotated[str, AfterValidator(check_claim_name)] = ""
    storage_uri: str = ""
    namespace: Annotated[str, AfterValidator(check_own_namespace)] = "tfxp-serving"
    allowed_namespaces: tuple[Namespace, ...] = ()
    allowed_pod_labels: tuple[Label, ...] = ()
    run_as_user: int = Field(10001, ge=1, le=INT64_MAX)

    @model_validator(mode="after")
    def _check_consistency(self) -> ServingOptions:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"serving.min_replicas is {self.min_replicas} but serving.max_replicas is {self.max_replicas}; the "
                "autoscaler needs min_replicas <= max_replicas"
            )
        if self.grpc_port == self.rest_port:
            raise ValueError(
                f"serving.grpc_port and serving.rest_port are both {self.grpc_port}; TF Serving listens on each, so "
                "give them different ports (its defaults are 8500 and 8501)"
            )
        self._check_rollout()
        return self

    def _check_rollout(self) -> None:
        if self.rollout != "canary":
            return
        if self.version_policy != "specific":
            raise ValueError(
                f"serving.rollout is canary but serving.version_policy is {self.version_policy}: under "
                f"{self.version_policy!r} the servers would load every pushed version and send unlabelled requests "
                "to the newest, so the canary would take all traffic; set serving.version_policy: specific (the "
                "rollout state names the versions)"
            )
        static = [f"serving.{key}" for key in ("stable_version", "canary_version") if getattr(self, key)]
        if static:
            raise ValueError(
                f"{' and '.join(static)} set together with serving.rollout: canary; the rollout state "
                "(`tfxp rollout status`) decides which version is stable and which is the canary, so remove "
                f"{' and '.join(static)} (or set serving.rollout: direct to keep static labels)"
            )

    @property
    def labels(self) -> dict[str, int]:
        """Version labels, `stable` and `canary`, for the versions that have one."""
        return {
            name: version
            for name, version in (("stable", self.stable_version), ("canary", self.canary_version))
            if version
        }

    @property
    def load_checked(self) -> bool:
        """Whether a version is load-checked before the Pusher publishes it: `load_check`, or always under
        `rollout: canary`, where the canary takes live traffic as soon as it is published."""
        return self.load_check or self.rollout == "canary"

    @property
    def remote_base(self) -> bool:
        """Whether `base_path` is a bucket path (`gs://…`), which TF Serving reads directly."""
        return is_remote(self.base_path)

    @property
    def container_base_path(self) -> str:
        """The model base path inside the TF Serving container: a bucket `base_path` as it is, else the mount
        point of the local push directory, `/models/<model_name>`."""
        return self.base_path if self.remote_base else f"/models/{self.model_name}"

    @property
    def pvc(self) -> str:
        """The PersistentVolumeClaim that holds the models (`model_pvc`, else `<model_name>-models` made a valid
        Kubernetes name by `serving.k8s_names.kubernetes_name`)."""
        return self.model_pvc or kubernetes_name(self.model_name, suffix="-models")


def deployed_serving(options: ServingOptions, pushes: str) -> ServingOptions:
    """The `serving` section the deploy assets render: as configured, but an empty `base_path` becomes the push
    destination when that is a bucket (`pipeline.output` is one); TF Serving reads it directly, and a volume
    mounted instead would hold no pushed model.

    Args:
        options: The `serving` section.
        pushes: Where the pipeline pushes the model's versions (`pipeline.layout.OutputLayout.serving_base`).

    Returns:
        `options`, or a copy whose `base_path` is `pushes`.
    """
    if options.base_path or not is_remote(pushes):
        return options
    return options.model_copy(update={"base_path": pushes})


def local_model_dir(options: ServingOptions, pushes: str) -> str:
    """The host directory the deploy assets' docker scripts mount: the local push directory `pushes`, or "" when
    the models are in a bucket (TF Serving reads it directly)."""
    return "" if deployed_serving(options, pushes).remote_base else str(Path(pushes).resolve())
