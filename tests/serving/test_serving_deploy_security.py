"""Deployment assets a cluster accepts and a security review passes (issue 19).

Kubernetes names from one rule; every object valid against the Kubernetes schemas (kubernetes-validate,
strict, offline), named by its kind's rule, its pods within the "restricted" Pod Security Standard; checkov
finding nothing beyond the exceptions of serving/checkov.yaml, on the manifests and on the Dockerfile; and
`tfxp deploy-assets --check`, which runs the same checks.
"""

from __future__ import annotations

import random
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from foundation.k8s.names import DNS1035_LABEL, MAX_INFERENCE_SERVICE_NAME, NAME_RULES, name_problem
from pipeline.cli import app
from pipeline.config import ConfigError, load_config
from pipeline.layout import output_layout
from serving.checkov_scan import CHECKOV_CONFIG, checkov_exceptions, find_checkov, run_checkov
from serving.deploy import WARNINGS_FILE, render_deploy_assets, write_deploy_assets
from serving.k8s_check import (
    KUBERNETES_VERSION,
    check_deploy_assets,
    load_manifests,
    predictor_pod,
    restricted_violations,
)
from serving.k8s_names import kubernetes_name, serving_names
from serving.options import local_model_dir

REPO = Path(__file__).resolve().parents[2]
LONG_NAME = "Very_Long_ResNet50_ImageNet_Model_Name_With_Capitals_And_Underscores_X"  # 70 characters
DIGEST = "sha256:" + "0123456789abcdef" * 4
CASES = {
    "default": (REPO / "configs/default.yaml", []),
    "imagenet_a100": (REPO / "configs/imagenet_a100.yaml", []),
    "long_name": (REPO / "configs/default.yaml", [f"serving.model_name={LONG_NAME}", "serving.gpus=1"]),
}
CHECKOV = find_checkov()
_checkov_installed = pytest.mark.skipif(
    CHECKOV is None, reason="checkov not installed (make setup puts it in .venv-checkov)"
)


def needs_checkov(test: Callable[..., None]) -> Callable[..., None]:
    """Runs checkov from .venv-checkov, a process of seconds per check: skipped without it, and `slow` (out of
    `make unit`)."""
    return pytest.mark.slow(_checkov_installed(test))


def _write(tmp_path: Path, config_path: Path | None, overrides: list[str]) -> Path:
    config = load_config(config_path, overrides)
    write_deploy_assets(config.serving, tmp_path, local_model_dir(config.serving, output_layout(config).serving_base))
    return tmp_path


@pytest.fixture(scope="module", params=sorted(CASES))
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    config_path, overrides = CASES[request.param]
    return _write(tmp_path_factory.mktemp(request.param), config_path, overrides)


# --- names -----------------------------------------------------------------------------------------------------


def test_a_valid_model_name_is_used_as_it_is() -> None:
    names = serving_names("digits")
    assert (names.app, names.config_map, names.pvc, names.inference_service) == (
        "tf-serving-digits",
        "tf-serving-digits-config",
        "digits-models",
        "digits",
    )


def test_the_a100_model_name_gets_a_stable_valid_name() -> None:
    # Pinned: changing the rule renames deployed objects, which `kubectl apply` would duplicate.
    assert serving_names("resnet50_imagenet").app == "tf-serving-resnet50-imagenet-1e30cf8b"
    assert serving_names("resnet50_imagenet").pvc == "resnet50-imagenet-1e30cf8b-models"


def test_seventy_characters_fit_and_keep_the_kind_suffix() -> None:
    assert len(LONG_NAME) == 70
    names = serving_names(LONG_NAME)
    for name in (names.app, names.config_map, names.pvc):
        assert len(name) <= 63 and re.fullmatch(DNS1035_LABEL, name), name
    assert names.config_map.endswith("-config") and names.pvc.endswith("-models")
    assert names.app.startswith("tf-serving-very-long-resnet50-imagenet-model")
    assert len(names.inference_service) <= MAX_INFERENCE_SERVICE_NAME


def test_names_that_differ_only_in_case_or_separators_do_not_collide() -> None:
    variants = ["resnet-50", "resnet_50", "Resnet_50", "RESNET-50", "resnet.50", "resnet__50", "resnet-50-"]
    # Two long names equal in their first 70 characters.
    variants += [LONG_NAME + "_a", LONG_NAME + "_b"]
    for field in ("app", "config_map", "pvc", "inference_service"):
        names = [getattr(serving_names(variant), field) for variant in variants]
        assert len(set(names)) == len(variants), (field, names)


def test_any_model_name_gives_names_valid_for_every_kind() -> None:
    rng = random.Random(19)
    alphabet = "abcXYZ019_.-"
    model_names = {"9lives", "_", "a" * 200, "A.B", "x-"}
    model_names |= {rng.choice("aZ7") + "".join(rng.choices(alphabet, k=rng.randint(0, 90))) for _ in range(500)}
    seen: dict[str, str] = {}
    for model_name in model_names:
        names = serving_names(model_name)
        for kind in NAME_RULES:
            name = names.inference_service if kind == "InferenceService" else names.app
            assert name_problem(kind, name) is None, (model_name, kind, name)
        assert name_problem("ConfigMap", names.config_map) is None and len(names.config_map) <= 63
        assert name_problem("PersistentVolumeClaim", names.pvc) is None and len(names.pvc) <= 63
        assert seen.setdefault(names.app, model_name) == model_name, "two model names, one Kubernetes name"


def test_name_rules_follow_the_api_server() -> None:
    assert name_problem("Service", "tf-serving-resnet50_imagenet")
    assert name_problem("Deployment", "tf-serving-resnet50_imagenet")
    assert name_problem("Service", "9-models")  # DNS-1035: a letter first
    assert name_problem("ConfigMap", "9-models") is None
    assert name_problem("ConfigMap", "a.b") is None and name_problem("Service", "a.b")
    assert name_problem("Namespace", "x" * 64)


@pytest.mark.parametrize(("prefix", "suffix"), [("tf_serving-", ""), ("tf-serving", ""), ("", "config"), ("", "-x-")])
def test_a_malformed_prefix_or_suffix_is_refused(prefix: str, suffix: str) -> None:
    with pytest.raises(ValueError, match=r"prefix|suffix"):
        kubernetes_name("digits", prefix=prefix, suffix=suffix)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("serving.namespace=ML_Team", "serving.namespace"),
        ("serving.namespace=", "serving.namespace"),
        ("serving.allowed_namespaces=[frontend, Bad_NS]", "serving.allowed_namespaces.1"),
        ("serving.allowed_pod_labels=[app]", "serving.allowed_pod_labels.0"),
        ("serving.allowed_pod_labels=[app=front end]", "serving.allowed_pod_labels.0"),
        ("serving.model_pvc=My_Models", "serving.model_pvc"),
        ("serving.run_as_user=0", "serving.run_as_user"),
    ],
)
def test_invalid_kubernetes_settings_are_refused_naming_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"`{key}`")):
        load_config(None, [override])


def test_the_tf_serving_model_name_stays_as_configured() -> None:
    assets = render_deploy_assets(load_config(None, [f"serving.model_name={LONG_NAME}"]).serving)
    assert f'name: "{LONG_NAME}"' in assets["models.config"]
    assert f'base_path: "/models/{LONG_NAME}"' in assets["models.config"]
    (container,) = yaml.safe_load(assets["kubernetes/deployment.yaml"])["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == f"/v1/models/{LONG_NAME}"
    model = yaml.safe_load(assets["kserve/inferenceservice.yaml"])["spec"]["predictor"]["model"]
    assert model["storageUri"] == f"pvc://{serving_names(LONG_NAME).pvc}/{LONG_NAME}"


# --- the written manifests -------------------------------------------------------------------------------------


def test_every_object_validates_strictly_and_is_named_by_its_rule(written: Path) -> None:
    documents = load_manifests(written)
    assert sorted(document["kind"] for _, document in documents) == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "InferenceService",
        "Namespace",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Service",
    ]
    for path, document in documents:
        # kubernetes-validate has no KServe schema: the InferenceService is checked as the Pod KServe makes.
        checked = predictor_pod(document) if document["kind"] == "InferenceService" else document
        kubernetes_validate.validate(checked, KUBERNETES_VERSION, strict=True)
        assert name_problem(document["kind"], document["metadata"]["name"]) is None, path
        assert len(document["metadata"]["name"]) <= 63


def test_strict_validation_catches_what_the_issue_describes(written: Path) -> None:
    (deployment,) = [document for _, document in load_manifests(written) if document["kind"] == "Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsRoot"] = False  # no such field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_pods_meet_the_restricted_pod_security_standard(written: Path) -> None:
    documents = dict((document["kind"], document) for _, document in load_manifests(written))
    assert documents["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    deployment_pod = documents["Deployment"]["spec"]["template"]["spec"]
    for pod in (deployment_pod, predictor_pod(documents["InferenceService"])["spec"]):
        assert restricted_violations(pod) == []
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsUser"] >= 10000
        (container,) = pod["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    (container,) = deployment_pod["containers"]
    assert all(container[probe]["httpGet"]["port"] == 8501 for probe in ("livenessProbe", "readinessProbe"))
    assert set(container["resources"]["requests"]) == {"cpu", "memory"} <= set(container["resources"]["limits"])


def test_the_restricted_check_names_what_a_root_pod_breaks() -> None:
    pod = {
        "hostNetwork": True,
        "volumes": [{"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}],
        "containers": [{"name": "app", "securityContext": {"privileged": True}, "ports": [{"hostPort": 80}]}],
    }
    problems = restricted_violations(pod)
    for expected in (
        "hostNetwork is true",
        "volume docker is of type hostPath",
        "container app: privileged",
        "container app: allowPrivilegeEscalation is not false",
        "container app: capabilities do not drop ALL",
        "container app: runAsNonRoot is not true",
        "container app: seccompProfile is not RuntimeDefault or Localhost",
        "container app: uses a hostPort",
    ):
        assert expected in problems


def test_network_policy_admits_only_the_serving_ports_from_the_configured_callers() -> None:
    def policy(overrides: list[str]) -> dict:
        return yaml.safe_load(
            render_deploy_assets(load_config(None, overrides).serving)["kubernetes/networkpolicy.yaml"]
        )

    (rule,) = policy([])["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8500}, {"protocol": "TCP", "port": 8501}]
    assert rule["from"] == [{"podSelector": {"matchLabels": {}}}]  # any pod of the serving namespace, no other
    configured = policy(
        ["serving.allowed_namespaces=[web, monitoring]", "serving.allowed_pod_labels=[app.kubernetes.io/part-of=shop]"]
    )
    (peer,) = configured["spec"]["ingress"][0]["from"]
    assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/part-of": "shop"}}
    assert peer["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring", "web"]}
    ]
    assert configured["spec"]["podSelector"]["matchLabels"]["app"] == "tf-serving-digits"


def test_images_by_digest_are_used_and_images_by_tag_are_warned_about(tmp_path: Path) -> None:
    _write(tmp_path, None, [])
    assert "serving.cpu_image = 'tensorflow/serving:2.19.1' is a tag" in (tmp_path / WARNINGS_FILE).read_text()
    _write(tmp_path, None, [f"serving.cpu_image=tensorflow/serving@{DIGEST}", f"serving.gpu_image=tf/gpu@{DIGEST}"])
    assert not (tmp_path / WARNINGS_FILE).exists()  # the earlier run's warnings are gone
    documents = dict((document["kind"], document) for _, document in load_manifests(tmp_path))
    (container,) = documents["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["imagePullPolicy"]) == (f"tensorflow/serving@{DIGEST}", "IfNotPresent")
    model = documents["InferenceService"]["spec"]["predictor"]["model"]
    assert model["image"] == f"tensorflow/serving@{DIGEST}" and "runtimeVersion" not in model


# --- checkov and --check ---------------------------------------------------------------------------------------


def test_every_checkov_exception_has_a_reason() -> None:
    exceptions = checkov_exceptions()
    assert exceptions, f"{CHECKOV_CONFIG} lists no exceptions; then drop this test"
    for check_id, (kind, reason) in exceptions.items():
        assert len(reason.split()) >= 8, f"{check_id} ({kind}) needs a one-line reason on its line"


@needs_checkov
def test_checkov_finds_nothing_beyond_the_listed_exceptions(written: Path) -> None:
    result = run_checkov(written, "kubernetes", CHECKOV)
    soft = {check_id for check_id, (kind, _) in checkov_exceptions().items() if kind == "soft-fail-on"}
    assert result.passed >= 80
    assert {finding.check_id for finding in result.failed} <= soft, result.failed


@needs_checkov
def test_checkov_passes_images_by_digest(tmp_path: Path) -> None:
    _write(tmp_path, None, [f"serving.cpu_image=tensorflow/serving@{DIGEST}", f"serving.gpu_image=tf/gpu@{DIGEST}"])
    assert run_checkov(tmp_path, "kubernetes", CHECKOV).failed == ()


@needs_checkov
def test_the_dockerfile_passes_checkov() -> None:
    # hadolint: tests/project/test_kubeflow_docker.py::test_hadolint.
    result = run_checkov(REPO / "Dockerfile", "dockerfile", CHECKOV)
    assert result.passed >= 20
    assert result.failed == ()


@needs_checkov
def test_every_skipped_check_would_fail_without_its_skip(tmp_path: Path) -> None:
    targets = {"CKV_DOCKER": ("dockerfile", "-f", REPO / "Dockerfile"), "CKV_K8S": ("kubernetes", "-d", tmp_path)}
    _write(tmp_path, None, [])
    for check_id, (kind, _) in checkov_exceptions().items():
        if kind != "skip-check":
            continue
        framework, flag, target = targets[check_id.rsplit("_", 1)[0]]
        command = [str(CHECKOV), "--framework", framework, "--check", check_id, "--compact", flag, str(target)]
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
        assert "Failed checks: 1" in result.stdout, f"{check_id} passes now: drop its skip ({result.stdout[-500:]})"


@needs_checkov
def test_check_command_passes_what_deploy_assets_writes(tmp_path: Path) -> None:
    arguments = ["deploy-assets", "--out", str(tmp_path), "--check", "--config", str(CASES["imagenet_a100"][0])]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    assert "check passed" in result.output
    assert "kserve/inferenceservice.yaml: InferenceService resnet50-imagenet-1e30cf8b" in result.output
    assert "warning: serving.cpu_image" in result.output  # printed, and in warnings.txt
    assert "CKV_K8S_43" in result.output


@needs_checkov
def test_check_command_fails_on_what_checkov_or_the_schemas_refuse(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["deploy-assets", "--out", str(tmp_path), "--check", "--set", "serving.run_as_user=1000"]
    )
    assert result.exit_code == 1, result.output
    assert "CKV_K8S_40" in result.output  # a UID below 10000 may be a host user
    service = tmp_path / "kubernetes/service.yaml"
    service.write_text(service.read_text().replace("name: tf-serving-digits", "name: tf-serving_digits", 1))
    report = check_deploy_assets(tmp_path, CHECKOV)
    failures = [finding.message for finding in report.findings if finding.status == "fail"]
    assert not report.ok
    assert any("Service name 'tf-serving_digits' is not a DNS-1035 label" in failure for failure in failures)
