"""Deployment assets for TensorFlow Serving, rendered from the `serving` section (`serving.options.ServingOptions`).

`render_deploy_assets(options, local_model_dir)` returns file name → text for:

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

The container sees the models at `options.container_base_path`: a bucket `serving.base_path` as it is, else
`/models/<model_name>`, where the docker scripts mount `local_model_dir` and Kubernetes the models volume.

Example:
    options = ServingOptions(model_name="digits")
    for name, text in render_deploy_assets(options, local_model_dir="/srv/tfxp/serving/digits").items():
        (out / name).write_text(text)
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from serving.manager import VersionPolicy
from serving.options import ServingOptions

CONFIG_DIR = "/config"  # where the container sees models.config and the other config files
MONITORING_PATH = "/monitoring/prometheus/metrics"


def _checked(options: ServingOptions) -> ServingOptions:
    labels = options.labels
    if options.version_policy == "specific" and not options.versions:
        if not labels:
            raise ValueError(
                "serving.version_policy=specific needs serving.versions (e.g. `--set serving.versions=[3,4]`) "
                "or version labels (serving.stable_version / serving.canary_version)"
            )
        options = options.model_copy(update={"versions": tuple(sorted(set(labels.values())))})
    if labels and options.version_policy == "latest":
        raise ValueError(
            f"version labels {labels} need the labelled versions loaded, which the `latest` policy does not "
            "promise; set `--set serving.version_policy=specific` (serving the labelled versions) or `all`"
        )
    missing = sorted(set(labels.values()) - set(options.versions)) if options.version_policy == "specific" else []
    if missing:
        raise ValueError(
            f"serving.versions {list(options.versions)} does not include the labelled version(s) {missing}; TF Serving "
            "can only label a loaded version"
        )
    if options.allowed_batch_sizes and options.allowed_batch_sizes[-1] != options.max_batch_size:
        raise ValueError(
            f"serving.allowed_batch_sizes {list(options.allowed_batch_sizes)} must end with serving.max_batch_size "
            f"({options.max_batch_size}), as TF Serving requires"
        )
    return options


def models_config(options: ServingOptions) -> str:
    """TF Serving's `--model_config_file`, a ModelServerConfig text proto."""
    config = model_server_config_pb2.ModelServerConfig()
    entry = config.model_config_list.config.add(
        name=options.model_name, base_path=options.container_base_path, model_platform="tensorflow"
    )
    policy = VersionPolicy(options.version_policy, options.num_versions, options.versions)
    entry.model_version_policy.CopyFrom(policy.to_proto())
    for label, version in options.labels.items():
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


def batching_parameters(options: ServingOptions, gpu: bool = False) -> str:
    """`--batching_parameters_file` for CPU (the config's knobs) or GPU (per the batching guide)."""
    if not gpu:
        return _batching_text(
            options.max_batch_size,
            options.batch_timeout_micros,
            options.num_batch_threads,
            options.max_enqueued_batches,
            options.allowed_batch_sizes,
        )
    threads = _cpu_count(options.cpu)
    # The guide, for online serving on GPUs: threads = CPU cores, batches in the hundreds, a timeout that
    # bounds tail latency, and a queue no deeper than the batch threads (overload goes to other replicas).
    return _batching_text(options.gpu_max_batch_size, options.gpu_batch_timeout_micros, threads, threads, ())


def monitoring_config() -> str:
    """`--monitoring_config_file`: Prometheus metrics on the REST port."""
    return f'prometheus_config {{\n  enable: true\n  path: "{MONITORING_PATH}"\n}}\n'


def server_args(options: ServingOptions) -> list[str]:
    """`tensorflow_model_server` flags shared by the docker scripts and the Kubernetes Deployment."""
    args = [
        f"--port={options.grpc_port}",
        f"--rest_api_port={options.rest_port}",
        f"--model_config_file={CONFIG_DIR}/models.config",
        f"--model_config_file_poll_wait_seconds={options.config_poll_seconds}",
        f"--file_system_poll_wait_seconds={max(1, round(options.poll_interval_seconds))}",
        f"--monitoring_config_file={CONFIG_DIR}/monitoring.config",
    ]
    if options.intra_op_threads:
        args.append(f"--tensorflow_intra_op_parallelism={options.intra_op_threads}")
    if options.inter_op_threads:
        args.append(f"--tensorflow_inter_op_parallelism={options.inter_op_threads}")
    if options.labels:
        # TF Serving checks labels before its first load finishes; without this flag a labelled config
        # fails at startup ("not currently available for inference").
        args.append("--allow_version_labels_for_unavailable_models=true")
    return args


def _docker_script(options: ServingOptions, gpu: bool, local_model_dir: str) -> str:
    image = options.gpu_image if gpu else options.cpu_image
    grpc, rest = options.grpc_port, options.rest_port
    batching_file = "batching_parameters_gpu.txt" if gpu else "batching_parameters.txt"
    args = server_args(options)
    if options.enable_batching:
        args += ["--enable_batching=true", f"--batching_parameters_file={CONFIG_DIR}/{batching_file}"]
    mount = (
        []
        if options.remote_base
        else ['-v "${MODEL_DIR:?set MODEL_DIR to the model base directory}:' + options.container_base_path + ':ro"']
    )
    lines = [
        "#!/usr/bin/env bash",
        f"# TensorFlow Serving ({'GPU' if gpu else 'CPU'}) for model {options.model_name}; from `tfxp deploy-assets`.",
        "# Ports are published on HOST (default 127.0.0.1); set HOST=0.0.0.0 to accept remote clients.",
        "set -euo pipefail",
        'CONFIG_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        f"MODEL_DIR=${{MODEL_DIR:-{shlex.quote(local_model_dir)}}}" if local_model_dir else "MODEL_DIR=${MODEL_DIR:-}",
        'HOST="${HOST:-127.0.0.1}"',
        "exec docker run --rm --name " + shlex.quote(f"tf-serving-{options.model_name}") + " \\",
        *(["  --gpus all \\"] if gpu else []),
        f'  -p "${{HOST}}:{grpc}:{grpc}" -p "${{HOST}}:{rest}:{rest}" \\',
        f'  -v "${{CONFIG_DIR}}:{CONFIG_DIR}:ro" \\',
        *[f"  {volume} \\" for volume in mount],
        f"  {image} \\",
        *[f"  {arg} \\" for arg in args[:-1]],
        f"  {args[-1]}",
    ]
    return "\n".join(lines) + "\n"


def _metadata(options: ServingOptions, name: str) -> dict[str, object]:
    metadata: dict[str, object] = {"name": name, "labels": {"app": f"tf-serving-{options.model_name}"}}
    if options.namespace:
        metadata["namespace"] = options.namespace
    return metadata


def _dump(document: object) -> str:
    return yaml.safe_dump(document, sort_keys=False)


def kubernetes_manifests(options: ServingOptions) -> dict[str, str]:
    """ConfigMap (the config files), Deployment, Service and HorizontalPodAutoscaler."""
    app = f"tf-serving-{options.model_name}"
    batching_file = "batching_parameters_gpu.txt" if options.gpus else "batching_parameters.txt"
    args = server_args(options)
    if options.enable_batching:
        args += ["--enable_batching=true", f"--batching_parameters_file={CONFIG_DIR}/{batching_file}"]
    resources: dict[str, dict[str, object]] = {
        "requests": {"cpu": options.cpu, "memory": options.memory},
        "limits": {"cpu": options.cpu, "memory": options.memory},
    }
    if options.gpus:
        resources["limits"]["nvidia.com/gpu"] = options.gpus
    volume_mounts: list[dict[str, object]] = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    volumes: list[dict[str, object]] = [{"name": "config", "configMap": {"name": f"{app}-config"}}]
    if not options.remote_base:
        volume_mounts.append({"name": "models", "mountPath": options.container_base_path, "readOnly": True})
        volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": options.pvc, "readOnly": True}})
    probe_path = f"/v1/models/{options.model_name}"
    container = {
        "name": "tf-serving",
        "image": options.gpu_image if options.gpus else options.cpu_image,
        "args": args,
        "ports": [
            {"name": "grpc", "containerPort": options.grpc_port},
            {"name": "http", "containerPort": options.rest_port},
        ],
        # The status URL answers 200 once the model has an AVAILABLE version: ready = can serve.
        "readinessProbe": {
            "httpGet": {"path": probe_path, "port": options.rest_port},
            "initialDelaySeconds": 5,
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "tcpSocket": {"port": options.grpc_port},
            "initialDelaySeconds": 30,
            "periodSeconds": 10,
        },
        "resources": resources,
        "volumeMounts": volume_mounts,
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(options, app),
        "spec": {
            "replicas": options.min_replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {
                    "labels": {"app": app},
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(options.rest_port),
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
        "metadata": _metadata(options, app),
        "spec": {
            "selector": {"app": app},
            "ports": [
                {"name": "grpc", "port": options.grpc_port, "targetPort": options.grpc_port},
                {"name": "http", "port": options.rest_port, "targetPort": options.rest_port},
            ],
        },
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(options, app),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
            "minReplicas": options.min_replicas,
            "maxReplicas": options.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": options.target_cpu_percent},
                    },
                }
            ],
        },
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(options, f"{app}-config"),
        "data": {
            "models.config": models_config(options),
            "monitoring.config": monitoring_config(),
            "batching_parameters.txt": batching_parameters(options),
            "batching_parameters_gpu.txt": batching_parameters(options, gpu=True),
        },
    }
    return {
        "kubernetes/configmap.yaml": _dump(configmap),
        "kubernetes/deployment.yaml": _dump(deployment),
        "kubernetes/service.yaml": _dump(service),
        "kubernetes/hpa.yaml": _dump(hpa),
    }


def kserve_inference_service(options: ServingOptions) -> str:
    """A KServe v1beta1 InferenceService with the `tensorflow` model format (KServe runs TF Serving)."""
    runtime_version = options.gpu_image if options.gpus else options.cpu_image
    resources: dict[str, dict[str, object]] = {
        "requests": {"cpu": options.cpu, "memory": options.memory},
        "limits": {"cpu": options.cpu, "memory": options.memory},
    }
    if options.gpus:
        resources["limits"]["nvidia.com/gpu"] = options.gpus
    metadata: dict[str, object] = {"name": options.model_name.lower().replace("_", "-").replace(".", "-")}
    if options.namespace:
        metadata["namespace"] = options.namespace
    service = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": metadata,
        "spec": {
            "predictor": {
                "minReplicas": options.min_replicas,
                "maxReplicas": options.max_replicas,
                "model": {
                    "modelFormat": {"name": "tensorflow"},
                    "runtimeVersion": runtime_version.rsplit(":", 1)[-1],
                    "storageUri": options.storage_uri or f"pvc://{options.pvc}/{options.model_name}",
                    "resources": resources,
                },
            }
        },
    }
    return _dump(service)


def render_deploy_assets(options: ServingOptions, local_model_dir: str = "") -> dict[str, str]:
    """Every asset, relative path → text.

    Args:
        options: The `serving` section.
        local_model_dir: Host directory the docker scripts mount as the model base (the local push directory);
            empty = the scripts require MODEL_DIR. Unused when `serving.base_path` is a bucket path.

    Raises:
        ValueError: labels the version policy would not load, or batch sizes TF Serving rejects.
    """
    options = _checked(options)
    assets = {
        "models.config": models_config(options),
        "batching_parameters.txt": batching_parameters(options),
        "batching_parameters_gpu.txt": batching_parameters(options, gpu=True),
        "monitoring.config": monitoring_config(),
        "run_tf_serving_cpu.sh": _docker_script(options, gpu=False, local_model_dir=local_model_dir),
        "run_tf_serving_gpu.sh": _docker_script(options, gpu=True, local_model_dir=local_model_dir),
        "kserve/inferenceservice.yaml": kserve_inference_service(options),
    }
    assets.update(kubernetes_manifests(options))
    return assets


def write_deploy_assets(options: ServingOptions, out_dir: Path, local_model_dir: str = "") -> list[Path]:
    """Renders the assets into `out_dir` (scripts made executable) and returns the written paths."""
    written = []
    for relative, text in render_deploy_assets(options, local_model_dir).items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if path.suffix == ".sh":
            path.chmod(0o755)
        written.append(path)
    return written
