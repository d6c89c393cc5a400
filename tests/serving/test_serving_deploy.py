"""Deployment assets: every file parses, and the values come from the config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf import wrappers_pb2 as _wrappers  # registers the wrapper types in the default pool
from tensorflow_serving.config import model_server_config_pb2
from typer.testing import CliRunner

from foundation.path_rules import WRITTEN_MANIFEST
from pipeline.cli import app
from pipeline.config import ConfigError, TfxpConfig, load_config
from pipeline.layout import output_layout
from serving.deploy import render_deploy_assets
from serving.model_config import read_model_config_file
from serving.options import ServingOptions, deployed_serving, local_model_dir

LABELLED = [
    "serving.model_name=flowers",
    "serving.version_policy=specific",
    "serving.stable_version=3",
    "serving.canary_version=4",
    "serving.max_batch_size=64",
    "serving.batch_timeout_micros=500",
    "serving.num_batch_threads=6",
    "serving.max_enqueued_batches=12",
    "serving.cpu=8",
    "serving.gpus=1",
    "serving.min_replicas=3",
    "serving.max_replicas=9",
    "serving.target_cpu_percent=60",
    "serving.grpc_port=9000",
    "serving.rest_port=9001",
    "serving.gpu_image=tensorflow/serving:2.19.1-gpu",
    "serving.namespace=ml",
]

SET_LABELLED = [argument for setting in LABELLED for argument in ("--set", setting)]


def _pushes(config: TfxpConfig) -> str:
    """Where the config's pipeline pushes the model (what `tfxp deploy-assets` passes on)."""
    return output_layout(config).serving_base


def _batching_parameters_type() -> type:
    # BatchingParameters (tensorflow_serving/servables/tensorflow/session_bundle_config.proto) is not in the
    # tensorflow-serving-api wheel; this declares its fields we write, with the real field numbers and
    # wrapper types, so the text is parsed by protobuf rather than by regex.
    file = descriptor_pb2.FileDescriptorProto(
        name="tfxp_test_batching.proto",
        package="tfxp_test",
        dependency=["google/protobuf/wrappers.proto"],
    )
    message = file.message_type.add(name="BatchingParameters")
    for name, number, type_name in (
        ("max_batch_size", 1, ".google.protobuf.Int64Value"),
        ("batch_timeout_micros", 2, ".google.protobuf.Int64Value"),
        ("max_enqueued_batches", 3, ".google.protobuf.Int64Value"),
        ("num_batch_threads", 4, ".google.protobuf.Int64Value"),
    ):
        message.field.add(name=name, number=number, type=11, type_name=type_name, label=1)
    message.field.add(name="allowed_batch_sizes", number=6, type=3, label=3)
    assert _wrappers.Int64Value.DESCRIPTOR.full_name == "google.protobuf.Int64Value"
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tfxp_test.BatchingParameters"))


BatchingParameters = _batching_parameters_type()


@pytest.fixture(scope="module")
def assets() -> dict[str, str]:
    return render_deploy_assets(load_config(None, LABELLED).serving, local_model_dir="/srv/models/flowers")


def test_models_config_carries_name_path_policy_and_labels(assets: dict[str, str]) -> None:
    config = text_format.Parse(assets["models.config"], model_server_config_pb2.ModelServerConfig())
    (entry,) = config.model_config_list.config
    assert (entry.name, entry.base_path, entry.model_platform) == ("flowers", "/models/flowers", "tensorflow")
    assert list(entry.model_version_policy.specific.versions) == [3, 4]
    assert dict(entry.version_labels) == {"stable": 3, "canary": 4}


def test_models_config_is_what_the_local_server_reads(assets: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "models.config"
    path.write_text(assets["models.config"])
    (model,) = read_model_config_file(path)
    assert (model.name, model.base_path, model.labels) == (
        "flowers",
        Path("/models/flowers"),
        {"stable": 3, "canary": 4},
    )
    assert (model.policy.kind, model.policy.versions) == ("specific", (3, 4))


def test_batching_parameters_follow_the_config_on_cpu_and_the_guide_on_gpu(assets: dict[str, str]) -> None:
    cpu = text_format.Parse(assets["batching_parameters.txt"], BatchingParameters())
    knobs = (cpu.max_batch_size, cpu.batch_timeout_micros, cpu.num_batch_threads, cpu.max_enqueued_batches)
    assert [knob.value for knob in knobs] == [64, 500, 6, 12]
    gpu = text_format.Parse(assets["batching_parameters_gpu.txt"], BatchingParameters())
    # GPU: a batch thread per pod CPU, and a queue no deeper than the threads (online serving).
    assert (gpu.max_batch_size.value, gpu.num_batch_threads.value, gpu.max_enqueued_batches.value) == (128, 8, 8)


def test_monitoring_config_enables_prometheus(assets: dict[str, str]) -> None:
    assert re.search(
        r"prometheus_config \{\s*enable: true\s*path: \"/monitoring/prometheus/metrics\"", assets["monitoring.config"]
    )


def test_docker_scripts_pin_images_and_pass_the_configs(assets: dict[str, str]) -> None:
    cpu, gpu = assets["run_tf_serving_cpu.sh"], assets["run_tf_serving_gpu.sh"]
    assert "  -- tensorflow/serving:2.19.1 \\" in cpu
    assert "  -- tensorflow/serving:2.19.1-gpu \\" in gpu and "--gpus all" in gpu
    for script, batching in ((cpu, "batching_parameters.txt"), (gpu, "batching_parameters_gpu.txt")):
        assert ":latest" not in script
        assert '-p "${HOST}:9000:9000" -p "${HOST}:9001:9001"' in script
        for flag in (
            "--port=9000",
            "--rest_api_port=9001",
            "--model_config_file=/config/models.config",
            "--monitoring_config_file=/config/monitoring.config",
            "--allow_version_labels_for_unavailable_models=true",
            f"--batching_parameters_file=/config/{batching}",
        ):
            assert flag in script
        assert '":/models/flowers:ro' in script
        assert "MODEL_DIR=${MODEL_DIR:-/srv/models/flowers}" in script


def test_kubernetes_manifests_parse_and_carry_the_config(assets: dict[str, str]) -> None:
    deployment = yaml.safe_load(assets["kubernetes/deployment.yaml"])
    service = yaml.safe_load(assets["kubernetes/service.yaml"])
    hpa = yaml.safe_load(assets["kubernetes/hpa.yaml"])
    configmap = yaml.safe_load(assets["kubernetes/configmap.yaml"])
    namespaced = [yaml.safe_load(text) for name, text in assets.items() if name.endswith(".yaml")]
    namespaced = [doc for doc in namespaced if doc["kind"] != "Namespace"]
    assert len(namespaced) == 7  # ConfigMap, Deployment, Service, HPA, PDB, NetworkPolicy, InferenceService
    assert {doc["metadata"]["namespace"] for doc in namespaced} == {"ml"}
    assert yaml.safe_load(assets["kubernetes/00-namespace.yaml"])["metadata"]["name"] == "ml"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "tensorflow/serving:2.19.1-gpu"  # gpus=1
    assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models/flowers", "port": 9001}
    assert container["resources"]["limits"] == {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": 1}
    assert {mount["mountPath"] for mount in container["volumeMounts"]} == {"/config", "/tmp", "/models/flowers"}
    volumes = {volume["name"]: volume for volume in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == "flowers-models"
    assert volumes["config"]["configMap"]["name"] == configmap["metadata"]["name"]
    assert "--batching_parameters_file=/config/batching_parameters_gpu.txt" in container["args"]
    assert {(port["name"], port["port"]) for port in service["spec"]["ports"]} == {("grpc", 9000), ("http", 9001)}
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 9)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert configmap["data"]["models.config"] == assets["models.config"]


def test_kserve_inference_service_uses_the_tensorflow_predictor(assets: dict[str, str]) -> None:
    service = yaml.safe_load(assets["kserve/inferenceservice.yaml"])
    assert (service["apiVersion"], service["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    model = service["spec"]["predictor"]["model"]
    assert model["modelFormat"] == {"name": "tensorflow"}
    assert model["storageUri"] == "pvc://flowers-models/flowers"
    assert model["runtimeVersion"] == "2.19.1-gpu"
    assert (service["spec"]["predictor"]["minReplicas"], service["spec"]["predictor"]["maxReplicas"]) == (3, 9)


def test_remote_base_path_needs_no_model_volume() -> None:
    config = load_config(
        None, ["serving.base_path=gs://bucket/serving/digits", "serving.storage_uri=gs://bucket/serving/digits"]
    )
    assert local_model_dir(config.serving, _pushes(config)) == ""
    assets = render_deploy_assets(config.serving)
    assert 'base_path: "gs://bucket/serving/digits"' in assets["models.config"]
    deployment = yaml.safe_load(assets["kubernetes/deployment.yaml"])
    assert [volume["name"] for volume in deployment["spec"]["template"]["spec"]["volumes"]] == ["config", "tmp"]
    assert "MODEL_DIR" not in assets["run_tf_serving_cpu.sh"].split("exec docker run", 1)[1]
    assert "latest {\n        num_versions: 1" in assets["models.config"]
    assert "--allow_version_labels_for_unavailable_models" not in assets["run_tf_serving_cpu.sh"]


def test_a_bucket_output_serves_from_the_bucket_the_pipeline_pushes_to(tmp_path: Path) -> None:
    config = load_config(None, ["pipeline.output=gs://bucket/tfxp", "serving.model_name=flowers"])
    assert deployed_serving(config.serving, _pushes(config)).base_path == "gs://bucket/tfxp/serving/flowers"
    assert local_model_dir(config.serving, _pushes(config)) == ""
    assets = render_deploy_assets(deployed_serving(config.serving, _pushes(config)))
    assert 'base_path: "gs://bucket/tfxp/serving/flowers"' in assets["models.config"]
    deployment = yaml.safe_load(assets["kubernetes/deployment.yaml"])
    assert [volume["name"] for volume in deployment["spec"]["template"]["spec"]["volumes"]] == ["config", "tmp"]
    predictor = yaml.safe_load(assets["kserve/inferenceservice.yaml"])["spec"]["predictor"]
    assert predictor["model"]["storageUri"] == "gs://bucket/tfxp/serving/flowers"
    result = CliRunner().invoke(
        app, ["deploy-assets", "--out", str(tmp_path), "--set", "pipeline.output=gs://bucket/tfxp"]
    )
    assert result.exit_code == 0, result.output
    assert "models served from gs://bucket/tfxp/serving/digits, where pushes go" in result.output
    assert "/models/digits" not in (tmp_path / "models.config").read_text()
    local = load_config(None, ["serving.model_name=flowers"])
    assert deployed_serving(local.serving, _pushes(local)) == local.serving  # a local push dir is mounted, as before
    chosen = load_config(None, ["pipeline.output=gs://bucket/tfxp", "serving.base_path=gs://other/flowers"])
    assert deployed_serving(chosen.serving, _pushes(chosen)).base_path == "gs://other/flowers"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["serving.min_replicas=5", "serving.max_replicas=2"],
            "serving.min_replicas is 5 but serving.max_replicas is 2",
        ),
        (["serving.grpc_port=8501"], "serving.grpc_port and serving.rest_port are both 8501"),
        (["serving.memory=lots"], r"`serving.memory` = 'lots': 'lots' is not a Kubernetes quantity"),
        (["serving.memory=8 Gi"], "'8 Gi' is not a Kubernetes quantity.*e.g. 8Gi, 512Mi or 8G"),
        (["serving.cpu=four"], "serving.cpu"),
    ],
)
def test_serving_values_that_cannot_deploy_are_config_errors(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_kubernetes_quantities_and_equal_replicas_are_accepted() -> None:
    for memory in ("8Gi", "512Mi", "1.5G", "1000000", "64k"):
        assert ServingOptions(memory=memory).memory == memory
    assert ServingOptions(min_replicas=3, max_replicas=3).max_replicas == 3


def test_cli_check_refuses_manifests_that_cannot_work(tmp_path: Path) -> None:
    settings = ["serving.min_replicas=5", "serving.max_replicas=2", "serving.grpc_port=8501", "serving.memory=lots"]
    arguments = [argument for setting in settings for argument in ("--set", setting)]
    result = CliRunner().invoke(app, ["deploy-assets", *arguments, "--out", str(tmp_path), "--check"])
    assert result.exit_code == 2, result.output
    assert "serving.memory" in result.output and "check passed" not in result.output
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (ServingOptions(stable_version=3), "need the labelled versions loaded"),
        (ServingOptions(version_policy="specific"), "needs serving.versions"),
        (ServingOptions(version_policy="specific", versions=(1,), canary_version=2), r"does not include .* \[2\]"),
        (ServingOptions(allowed_batch_sizes=(8, 16)), "must end with serving.max_batch_size"),
    ],
)
def test_inconsistent_values_are_refused(options: ServingOptions, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_deploy_assets(options)


def test_cli_writes_every_asset(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["deploy-assets", "--out", str(tmp_path), *SET_LABELLED])
    assert result.exit_code == 0, result.output
    written = {str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file()}
    assets = render_deploy_assets(load_config(None, LABELLED).serving)
    assert written == {*assets, WRITTEN_MANIFEST}  # and the list of what tfxp wrote (foundation.path_rules)
    assert set(json.loads((tmp_path / WRITTEN_MANIFEST).read_text())["files"]) == set(assets)
    model_dir = Path(load_config(None, LABELLED).pipeline.output).resolve() / "serving" / "flowers"
    assert f"MODEL_DIR=${{MODEL_DIR:-{model_dir}}}" in (tmp_path / "run_tf_serving_cpu.sh").read_text()
    assert (tmp_path / "run_tf_serving_cpu.sh").stat().st_mode & 0o111
    for path in tmp_path.rglob("*.yaml"):
        assert yaml.safe_load(path.read_text())


def test_cli_reports_inconsistent_labels(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["deploy-assets", "--out", str(tmp_path), "--set", "serving.stable_version=2"])
    assert result.exit_code == 2
    assert "serving.version_policy=specific" in result.output
