"""Deployment assets for TensorFlow Serving, rendered from plain values (the CLI passes the config's).

`render_deploy_assets(spec)` returns file name → text for:

- `models.config`: the model (name, base path, platform), its version policy and `stable`/`canary` labels,
  built as a `ModelServerConfig` proto and printed as text proto;
- `batching_parameters.txt` (CPU) and `batching_parameters_gpu.txt`, per TF Serving's batching guide (CPU:
  one batch thread per core, short timeout; GPU: large batches, a timeout that bounds tail latency, queue
  bounded to the batch threads for online serving);
- `monitoring.config`: Prometheus metrics at `/monitoring/prometheus/metrics`;
- `run_tf_serving_cpu.sh`, `run_tf_serving_gpu.sh`: `docker run` with pinned image tags;
- `kubernetes/{configmap,deployment,service,hpa}.yaml`: readiness on `/v1/models/<name>`, ports 8500/8501,
  autoscaling on CPU, the model volume;
- `kserve/inferenceservice.yaml`: a KServe `tensorflow` predictor.

Example:
    for name, text in render_deploy_assets(DeploySpec(model_name="digits", base_path="/models/digits")).items():
        (out / name).write_text(text)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path

import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from serving.manager import VersionPolicy

CONFIG_DIR = "/config"  # where the container sees models.config and the other config files
MONITORING_PATH = "/monitoring/prometheus/metrics"


@dataclass(frozen=True)
class DeploySpec:
    """Everything the assets depend on.

    Attributes:
        model_name: TF Serving model name.
        base_path: Model base path as TF Serving sees it (`/models/<name>` in the container, or `gs://...`).
        local_model_dir: Host directory mounted at `base_path` by the docker scripts (empty: set MODEL_DIR).
        version_policy: `latest`, `all` or `specific`.
        num_versions: Versions kept by `latest`.
        versions: Versions served by `specific` (default: the labelled ones).
        stable_version: Version labelled `stable` (0 = no label).
        canary_version: Version labelled `canary` (0 = no label).
        grpc_port: gRPC port.
        rest_port: REST port.
        poll_interval_seconds: Base-path polling (--file_system_poll_wait_seconds).
        config_poll_seconds: models.config re-reading, so moved labels take effect without a restart.
        enable_batching: Server-side batching.
        max_batch_size, batch_timeout_micros, num_batch_threads, max_enqueued_batches: CPU batching.
        allowed_batch_sizes: Batch sizes to pad to (empty = any).
        intra_op_threads, inter_op_threads: TensorFlow thread pools (0 = TF's choice).
        gpu_max_batch_size: GPU batching: largest batch.
        gpu_batch_timeout_micros: GPU batching: longest wait to fill a batch.
        cpu_image: Pinned CPU image, e.g. `tensorflow/serving:2.19.1`.
        gpu_image: Pinned GPU image, e.g. `tensorflow/serving:2.19.1-gpu`.
        cpu: CPU request/limit per pod (also the GPU batch threads).
        memory: Memory request/limit per pod.
        gpus: GPUs per pod (0 = the CPU image).
        min_replicas: Autoscaler minimum.
        max_replicas: Autoscaler maximum.
        target_cpu_percent: Autoscaler CPU utilisation target.
        model_pvc: PersistentVolumeClaim holding the models (empty = `<model>-models`).
        storage_uri: KServe storageUri (empty = `pvc://<pvc>/<model>`).
        namespace: Kubernetes namespace (empty = omitted).
    """

    model_name: str
    base_path: str = ""
    local_model_dir: str = ""
    version_policy: str = "latest"
    num_versions: int = 1
    versions: tuple[int, ...] = ()
    stable_version: int = 0
    canary_version: int = 0
    grpc_port: int = 8500
    rest_port: int = 8501
    poll_interval_seconds: float = 1.0
    config_poll_seconds: int = 60
    enable_batching: bool = True
    max_batch_size: int = 32
    batch_timeout_micros: int = 2000
    num_batch_threads: int = 2
    max_enqueued_batches: int = 100
    allowed_batch_sizes: tuple[int, ...] = ()
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    gpu_max_batch_size: int = 128
    gpu_batch_timeout_micros: int = 5000
    cpu_image: str = "tensorflow/serving:2.19.1"
    gpu_image: str = "tensorflow/serving:2.19.1-gpu"
    cpu: str = "4"
    memory: str = "8Gi"
    gpus: int = 0
    min_replicas: int = 2
    max_replicas: int = 10
    target_cpu_percent: int = 70
    model_pvc: str = ""
    storage_uri: str = ""
    namespace: str = ""

    @property
    def container_base_path(self) -> str:
        return self.base_path or f"/models/{self.model_name}"

    @property
    def labels(self) -> dict[str, int]:
        return {
            name: version
            for name, version in (("stable", self.stable_version), ("canary", self.canary_version))
            if version
        }

    @property
    def pvc(self) -> str:
        return self.model_pvc or f"{self.model_name}-models"

    @property
    def remote_base(self) -> bool:
        return "://" in self.container_base_path


def _checked(spec: DeploySpec) -> DeploySpec:
    labels = spec.labels
    if spec.version_policy == "specific" and not spec.versions:
        if not labels:
            raise ValueError(
                "serving.version_policy=specific needs serving.versions (e.g. `--set serving.versions=[3,4]`) "
                "or version labels (serving.stable_version / serving.canary_version)"
            )
        spec = replace(spec, versions=tuple(sorted(set(labels.values()))))
    if labels and spec.version_policy == "latest":
        raise ValueError(
            f"version labels {labels} need the labelled versions loaded, which the `latest` policy does not "
            "promise; set `--set serving.version_policy=specific` (serving the labelled versions) or `all`"
        )
    missing = sorted(set(labels.values()) - set(spec.versions)) if spec.version_policy == "specific" else []
    if missing:
        raise ValueError(
            f"serving.versions {list(spec.versions)} does not include the labelled version(s) {missing}; TF Serving "
            "can only label a loaded version"
        )
    if spec.allowed_batch_sizes and spec.allowed_batch_sizes[-1] != spec.max_batch_size:
        raise ValueError(
            f"serving.allowed_batch_sizes {list(spec.allowed_batch_sizes)} must end with serving.max_batch_size "
            f"({spec.max_batch_size}), as TF Serving requires"
        )
    return spec


def models_config(spec: DeploySpec) -> str:
    """TF Serving's `--model_config_file`, a ModelServerConfig text proto."""
    config = model_server_config_pb2.ModelServerConfig()
    entry = config.model_config_list.config.add(
        name=spec.model_name, base_path=spec.container_base_path, model_platform="tensorflow"
    )
    policy = VersionPolicy(spec.version_policy, spec.num_versions, spec.versions)
    entry.model_version_policy.CopyFrom(policy.to_proto())
    for label, version in spec.labels.items():
        entry.version_labels[label] = version
    return text_format.MessageToString(config)


def _batching_text(max_batch: int, timeout: int, threads: int, enqueued: int, allowed: tuple[int, ...]) -> str:
    # BatchingParameters (session_bundle_config.proto) wraps each knob in a google.protobuf wrapper message.
    lines = [
        f"max_batch_size {{ value: {max_batch} }}",
        f"batch_timeout_micros {{ value: {timeout} }}",
        f"num_batch_threads {{ value: {threads} }}",
        f"max_enqueued_batches {{ value: {enqueued} }}",
    ]
    lines += [f"allowed_batch_sizes: {size}" for size in allowed]
    return "\n".join(lines) + "\n"


def _cpu_count(cpu: str) -> int:
    return max(1, int(float(cpu[:-1]) / 1000) if cpu.endswith("m") else int(float(cpu)))


def batching_parameters(spec: DeploySpec, gpu: bool = False) -> str:
    """`--batching_parameters_file` for CPU (the config's knobs) or GPU (per the batching guide)."""
    if not gpu:
        return _batching_text(
            spec.max_batch_size,
            spec.batch_timeout_micros,
            spec.num_batch_threads,
            spec.max_enqueued_batches,
            spec.allowed_batch_sizes,
        )
    threads = _cpu_count(spec.cpu)
    # The guide, for online serving on GPUs: threads = CPU cores, batches in the hundreds, a timeout that
    # bounds tail latency, and a queue no deeper than the batch threads (overload goes to other replicas).
    return _batching_text(spec.gpu_max_batch_size, spec.gpu_batch_timeout_micros, threads, threads, ())


def monitoring_config() -> str:
    """`--monitoring_config_file`: Prometheus metrics on the REST port."""
    return f'prometheus_config {{\n  enable: true\n  path: "{MONITORING_PATH}"\n}}\n'


def server_args(spec: DeploySpec) -> list[str]:
    """`tensorflow_model_server` flags shared by the docker scripts and the Kubernetes Deployment."""
    args = [
        f"--port={spec.grpc_port}",
        f"--rest_api_port={spec.rest_port}",
        f"--model_config_file={CONFIG_DIR}/models.config",
        f"--model_config_file_poll_wait_seconds={spec.config_poll_seconds}",
        f"--file_system_poll_wait_seconds={max(1, round(spec.poll_interval_seconds))}",
        f"--monitoring_config_file={CONFIG_DIR}/monitoring.config",
    ]
    if spec.intra_op_threads:
        args.append(f"--tensorflow_intra_op_parallelism={spec.intra_op_threads}")
    if spec.inter_op_threads:
        args.append(f"--tensorflow_inter_op_parallelism={spec.inter_op_threads}")
    if spec.labels:
        # TF Serving checks labels before its first load finishes; without this flag a labelled config
        # fails at startup ("not currently available for inference").
        args.append("--allow_version_labels_for_unavailable_models=true")
    return args


def _docker_script(spec: DeploySpec, gpu: bool) -> str:
    image = spec.gpu_image if gpu else spec.cpu_image
    batching_file = "batching_parameters_gpu.txt" if gpu else "batching_parameters.txt"
    args = server_args(spec)
    if spec.enable_batching:
        args += ["--enable_batching=true", f"--batching_parameters_file={CONFIG_DIR}/{batching_file}"]
    mount = (
        []
        if spec.remote_base
        else ['-v "${MODEL_DIR:?set MODEL_DIR to the model base directory}:' + spec.container_base_path + ':ro"']
    )
    lines = [
        "#!/usr/bin/env bash",
        f"# TensorFlow Serving ({'GPU' if gpu else 'CPU'}) for model {spec.model_name}; from `tfxp deploy-assets`.",
        "# Ports are published on HOST (default 127.0.0.1); set HOST=0.0.0.0 to accept remote clients.",
        "set -euo pipefail",
        'CONFIG_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        f"MODEL_DIR=${{MODEL_DIR:-{shlex.quote(spec.local_model_dir)}}}"
        if spec.local_model_dir
        else "MODEL_DIR=${MODEL_DIR:-}",
        'HOST="${HOST:-127.0.0.1}"',
        "exec docker run --rm --name " + shlex.quote(f"tf-serving-{spec.model_name}") + " \\",
        *(["  --gpus all \\"] if gpu else []),
        f'  -p "${{HOST}}:{spec.grpc_port}:{spec.grpc_port}" -p "${{HOST}}:{spec.rest_port}:{spec.rest_port}" \\',
        f'  -v "${{CONFIG_DIR}}:{CONFIG_DIR}:ro" \\',
        *[f"  {volume} \\" for volume in mount],
        f"  {image} \\",
        *[f"  {arg} \\" for arg in args[:-1]],
        f"  {args[-1]}",
    ]
    return "\n".join(lines) + "\n"


def _metadata(spec: DeploySpec, name: str) -> dict[str, object]:
    metadata: dict[str, object] = {"name": name, "labels": {"app": f"tf-serving-{spec.model_name}"}}
    if spec.namespace:
        metadata["namespace"] = spec.namespace
    return metadata


def _dump(document: object) -> str:
    return yaml.safe_dump(document, sort_keys=False)


def kubernetes_manifests(spec: DeploySpec) -> dict[str, str]:
    """ConfigMap (the config files), Deployment, Service and HorizontalPodAutoscaler."""
    app = f"tf-serving-{spec.model_name}"
    batching_file = "batching_parameters_gpu.txt" if spec.gpus else "batching_parameters.txt"
    args = server_args(spec)
    if spec.enable_batching:
        args += ["--enable_batching=true", f"--batching_parameters_file={CONFIG_DIR}/{batching_file}"]
    resources: dict[str, dict[str, object]] = {
        "requests": {"cpu": spec.cpu, "memory": spec.memory},
        "limits": {"cpu": spec.cpu, "memory": spec.memory},
    }
    if spec.gpus:
        resources["limits"]["nvidia.com/gpu"] = spec.gpus
    volume_mounts: list[dict[str, object]] = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    volumes: list[dict[str, object]] = [{"name": "config", "configMap": {"name": f"{app}-config"}}]
    if not spec.remote_base:
        volume_mounts.append({"name": "models", "mountPath": spec.container_base_path, "readOnly": True})
        volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": spec.pvc, "readOnly": True}})
    probe_path = f"/v1/models/{spec.model_name}"
    container = {
        "name": "tf-serving",
        "image": spec.gpu_image if spec.gpus else spec.cpu_image,
        "args": args,
        "ports": [
            {"name": "grpc", "containerPort": spec.grpc_port},
            {"name": "http", "containerPort": spec.rest_port},
        ],
        # The status URL answers 200 once the model has an AVAILABLE version: ready = can serve.
        "readinessProbe": {
            "httpGet": {"path": probe_path, "port": spec.rest_port},
            "initialDelaySeconds": 5,
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "tcpSocket": {"port": spec.grpc_port},
            "initialDelaySeconds": 30,
            "periodSeconds": 10,
        },
        "resources": resources,
        "volumeMounts": volume_mounts,
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(spec, app),
        "spec": {
            "replicas": spec.min_replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {
                    "labels": {"app": app},
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(spec.rest_port),
                        "prometheus.io/path": MONITORING_PATH,
                    },
                },
                "spec": {"containers": [container], "volumes": volumes},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, app),
        "spec": {
            "selector": {"app": app},
            "ports": [
                {"name": "grpc", "port": spec.grpc_port, "targetPort": spec.grpc_port},
                {"name": "http", "port": spec.rest_port, "targetPort": spec.rest_port},
            ],
        },
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(spec, app),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
            "minReplicas": spec.min_replicas,
            "maxReplicas": spec.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": spec.target_cpu_percent},
                    },
                }
            ],
        },
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(spec, f"{app}-config"),
        "data": {
            "models.config": models_config(spec),
            "monitoring.config": monitoring_config(),
            "batching_parameters.txt": batching_parameters(spec),
            "batching_parameters_gpu.txt": batching_parameters(spec, gpu=True),
        },
    }
    return {
        "kubernetes/configmap.yaml": _dump(configmap),
        "kubernetes/deployment.yaml": _dump(deployment),
        "kubernetes/service.yaml": _dump(service),
        "kubernetes/hpa.yaml": _dump(hpa),
    }


def kserve_inference_service(spec: DeploySpec) -> str:
    """A KServe v1beta1 InferenceService with the `tensorflow` model format (KServe runs TF Serving)."""
    runtime_version = spec.gpu_image if spec.gpus else spec.cpu_image
    resources: dict[str, dict[str, object]] = {
        "requests": {"cpu": spec.cpu, "memory": spec.memory},
        "limits": {"cpu": spec.cpu, "memory": spec.memory},
    }
    if spec.gpus:
        resources["limits"]["nvidia.com/gpu"] = spec.gpus
    metadata: dict[str, object] = {"name": spec.model_name.lower().replace("_", "-").replace(".", "-")}
    if spec.namespace:
        metadata["namespace"] = spec.namespace
    service = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": metadata,
        "spec": {
            "predictor": {
                "minReplicas": spec.min_replicas,
                "maxReplicas": spec.max_replicas,
                "model": {
                    "modelFormat": {"name": "tensorflow"},
                    "runtimeVersion": runtime_version.rsplit(":", 1)[-1],
                    "storageUri": spec.storage_uri or f"pvc://{spec.pvc}/{spec.model_name}",
                    "resources": resources,
                },
            }
        },
    }
    return _dump(service)


def render_deploy_assets(spec: DeploySpec) -> dict[str, str]:
    """Every asset, relative path → text.

    Raises:
        ValueError: labels the version policy would not load, or batch sizes TF Serving rejects.
    """
    spec = _checked(spec)
    assets = {
        "models.config": models_config(spec),
        "batching_parameters.txt": batching_parameters(spec),
        "batching_parameters_gpu.txt": batching_parameters(spec, gpu=True),
        "monitoring.config": monitoring_config(),
        "run_tf_serving_cpu.sh": _docker_script(spec, gpu=False),
        "run_tf_serving_gpu.sh": _docker_script(spec, gpu=True),
        "kserve/inferenceservice.yaml": kserve_inference_service(spec),
    }
    assets.update(kubernetes_manifests(spec))
    return assets


def write_deploy_assets(spec: DeploySpec, out_dir: Path) -> list[Path]:
    """Renders the assets into `out_dir` (scripts made executable) and returns the written paths."""
    written = []
    for relative, text in render_deploy_assets(spec).items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if path.suffix == ".sh":
            path.chmod(0o755)
        written.append(path)
    return written
