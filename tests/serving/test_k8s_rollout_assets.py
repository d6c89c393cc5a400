"""The deploy assets of `serving.rollout: canary` (issue 34): what they route and serve, and that every custom
resource validates against the CRD schemas pinned in tests/data/crds (README: repo@commit:path), unknown fields
included, which a structural schema alone would let the API server drop."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import load_config
from serving.checkov_scan import find_checkov
from serving.config_error import ServingConfigError
from serving.deploy import deploy_warnings, render_deploy_assets, render_rollout_assets
from serving.k8s_check import check_deploy_assets, value_problems
from serving.k8s_crds import CRD_SCHEMA_DIR, CRD_SCHEMAS, crd_problems, is_custom
from serving.k8s_rollout import RolloutVersions

REPO = Path(__file__).resolve().parents[2]
CANARY = ["serving.rollout=canary", "serving.version_policy=specific"]
BUCKET = ["serving.base_path=gs://models/digits", "serving.versions=[3,4]"]


def _serving(*overrides: str) -> Any:
    return load_config(REPO / "configs/default.yaml", [*CANARY, *overrides]).serving


def _objects(assets: dict[str, str]) -> list[dict[str, Any]]:
    return [
        document
        for name, text in assets.items()
        if name.endswith(".yaml")
        for document in yaml.safe_load_all(text)
        if document
    ]


def _by_kind(assets: dict[str, str], kind: str) -> list[dict[str, Any]]:
    return [document for document in _objects(assets) if document["kind"] == kind]


@pytest.fixture(scope="module", params=["none", "argo", "flagger"])
def assets(request: pytest.FixtureRequest) -> dict[str, str]:
    return render_deploy_assets(_serving(*BUCKET, f"serving.canary.controller={request.param}"))


def test_every_custom_resource_validates_against_its_pinned_schema(assets: dict[str, str]) -> None:
    custom = [document for document in _objects(assets) if is_custom(document)]
    assert custom
    for document in custom:
        assert crd_problems(document) == [], document["kind"]


def test_every_pinned_schema_is_recorded_in_the_readme() -> None:
    readme = (CRD_SCHEMA_DIR / "README.md").read_text()
    for file_name in CRD_SCHEMAS.values():
        assert (CRD_SCHEMA_DIR / file_name).is_file()
        assert f"`{file_name}`" in readme
        json.loads((CRD_SCHEMA_DIR / file_name).read_text())


@pytest.mark.parametrize(
    ("kind", "path", "field"),
    [
        ("HTTPRoute", ["spec", "rules", 0, "backendRefs", 0], "weigth"),
        ("InferenceService", ["spec", "predictor"], "canaryTrafficPercnt"),
        ("InferenceService", ["spec", "predictor", "storageUris", 0], "mountpath"),
    ],
)
def test_a_field_the_schema_does_not_declare_fails(kind: str, path: list[Any], field: str) -> None:
    document = copy.deepcopy(_by_kind(render_deploy_assets(_serving(*BUCKET)), kind)[0])
    node = document
    for step in path:
        node = node[step]
    node[field] = 1
    problems = crd_problems(document)
    assert any(f"{field} is not a field of the schema" in problem for problem in problems), problems


@pytest.mark.parametrize("controller", ["argo", "flagger"])
def test_unknown_controller_fields_fail(controller: str) -> None:
    assets = render_deploy_assets(_serving(*BUCKET, f"serving.canary.controller={controller}"))
    kind = "Rollout" if controller == "argo" else "Canary"
    document = copy.deepcopy(_by_kind(assets, kind)[0])
    document["spec"]["strategy" if controller == "argo" else "analysis"]["stepz"] = []
    assert any("stepz is not a field of the schema" in problem for problem in crd_problems(document))
    document = copy.deepcopy(_by_kind(assets, kind)[0])
    document["spec"]["replicas" if controller == "argo" else "progressDeadlineSeconds"] = "two"
    assert any("'two' is not of type" in problem for problem in crd_problems(document))


def test_tracks_read_their_own_models_config_and_are_labelled_for_prometheus() -> None:
    assets = render_deploy_assets(_serving(*BUCKET))
    deployments = {d["metadata"]["name"]: d for d in _by_kind(assets, "Deployment")}
    assert sorted(deployments) == ["tf-serving-digits-canary", "tf-serving-digits-stable"]
    for track in ("stable", "canary"):
        pod = deployments[f"tf-serving-digits-{track}"]["spec"]["template"]
        assert pod["metadata"]["labels"] == {"app": "tf-serving-digits", "track": track}
        args = pod["spec"]["containers"][0]["args"]
        assert f"--model_config_file=gs://models/digits/tfxp_rollout/{track}.models.config" in args
        assert "--allow_version_labels_for_unavailable_models=true" in args
        assert any(arg.startswith("--model_config_file_poll_wait_seconds=") for arg in args)
    services = {s["metadata"]["name"]: s["spec"]["selector"] for s in _by_kind(assets, "Service")}
    assert services["tf-serving-digits-canary"] == {"app": "tf-serving-digits", "track": "canary"}
    assert services["tf-serving-digits"] == {"app": "tf-serving-digits"}
    assert "models.config" not in assets  # each track's file lives under the model base, written by the rollout


def test_routes_split_by_the_canary_share() -> None:
    assets = render_deploy_assets(_serving(*BUCKET, "serving.canary.traffic_percent=25"))
    for kind, port in (("HTTPRoute", 8501), ("GRPCRoute", 8500)):
        (route,) = _by_kind(assets, kind)
        assert route["spec"]["parentRefs"] == [
            {"group": "", "kind": "Service", "name": "tf-serving-digits", "port": port}
        ]
        weights = {ref["name"]: ref["weight"] for ref in route["spec"]["rules"][0]["backendRefs"]}
        assert weights == {"tf-serving-digits-stable": 75, "tf-serving-digits-canary": 25}


def test_kserve_canary_is_serverless_with_one_version_in_tf_servings_layout() -> None:
    (isvc,) = _by_kind(render_deploy_assets(_serving(*BUCKET)), "InferenceService")
    assert isvc["metadata"]["annotations"] == {"serving.kserve.io/deploymentMode": "Serverless"}
    predictor = isvc["spec"]["predictor"]
    assert predictor["canaryTrafficPercent"] == 10
    assert predictor["storageUris"] == [{"uri": "gs://models/digits/4", "mountPath": "/mnt/models/4"}]
    assert "storageUri" not in predictor["model"]  # KServe refuses storageUri with storageUris
    stable_only = render_rollout_assets(_serving(*BUCKET), versions=RolloutVersions(stable=3))
    (isvc,) = _by_kind(stable_only, "InferenceService")
    assert "canaryTrafficPercent" not in isvc["spec"]["predictor"]
    assert isvc["spec"]["predictor"]["storageUris"][0]["mountPath"] == "/mnt/models/3"


def test_kserve_canary_is_left_out_with_the_reason_where_it_cannot_work() -> None:
    on_pvc = _serving("serving.versions=[3,4]")
    assert "kserve/inferenceservice.yaml" not in render_deploy_assets(on_pvc)
    assert any("PersistentVolumeClaim entry of storageUris whole" in warning for warning in deploy_warnings(on_pvc))
    no_versions = _serving("serving.base_path=gs://models/digits")
    assert "kserve/inferenceservice.yaml" not in render_deploy_assets(no_versions)
    assert any("--set serving.versions=[stable]" in warning for warning in deploy_warnings(no_versions))


def test_argo_rollout_steps_analysis_and_track_labels() -> None:
    assets = render_deploy_assets(
        _serving(*BUCKET, "serving.canary.controller=argo", "serving.canary.window_seconds=600")
    )
    assert not _by_kind(assets, "HTTPRoute") and not _by_kind(assets, "Deployment")  # Argo owns them
    (rollout,) = _by_kind(assets, "Rollout")
    canary = rollout["spec"]["strategy"]["canary"]
    assert canary["steps"] == [{"setWeight": 10}, {"pause": {"duration": "600s"}}]
    assert canary["canaryMetadata"] == {"labels": {"track": "canary"}}
    assert canary["stableMetadata"] == {"labels": {"track": "stable"}}
    template = rollout["spec"]["template"]
    assert template["metadata"]["annotations"]["tfxp/model-version"] == "4"
    (config_map,) = _by_kind(assets, "ConfigMap")
    assert template["spec"]["volumes"][0]["configMap"]["name"] == config_map["metadata"]["name"]
    assert "versions: 4" in config_map["data"]["models.config"]
    (analysis,) = _by_kind(assets, "AnalysisTemplate")
    metrics = {metric["name"]: metric for metric in analysis["spec"]["metrics"]}
    assert metrics["error-rate-increase"]["successCondition"] == "result[0] <= 0.01"
    assert metrics["p99-latency-ratio"]["failureCondition"] == "result[0] > 1.5"
    assert metrics["canary-requests"]["failureCondition"] == "false"  # too few requests: inconclusive, a hold
    query = metrics["error-rate-increase"]["provider"]["prometheus"]["query"]
    assert (
        ':tensorflow:serving:request_count{namespace="{{args.namespace}}",model_name="digits",track="canary",status!="OK"}'
        in query
    )
    assert "request_latency_bucket" in metrics["p99-latency-ratio"]["provider"]["prometheus"]["query"]


def test_a_new_version_is_a_new_revision_with_its_own_config_map() -> None:
    first = _by_kind(render_deploy_assets(_serving(*BUCKET, "serving.canary.controller=argo")), "ConfigMap")[0]
    second = _by_kind(
        render_deploy_assets(
            _serving("serving.base_path=gs://models/digits", "serving.versions=[4,5]", "serving.canary.controller=argo")
        ),
        "ConfigMap",
    )[0]
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_flagger_canary_and_metric_templates() -> None:
    assets = render_deploy_assets(_serving(*BUCKET, "serving.canary.controller=flagger"))
    assert not _by_kind(assets, "HTTPRoute") and not _by_kind(assets, "Service")  # Flagger creates them
    (canary,) = _by_kind(assets, "Canary")
    assert canary["spec"]["provider"] == "gatewayapi:v1"
    assert canary["spec"]["analysis"]["stepWeight"] == canary["spec"]["analysis"]["maxWeight"] == 10
    templates = {t["metadata"]["name"]: t for t in _by_kind(assets, "MetricTemplate")}
    for metric in canary["spec"]["analysis"]["metrics"]:
        assert metric["templateRef"]["name"] in templates
    query = templates["tf-serving-digits-error-rate-increase"]["spec"]["query"]
    assert 'pod=~"{{ target }}-primary-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"' in query
    (policy,) = _by_kind(assets, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchExpressions"][0]["values"] == [
        "tf-serving-digits",
        "tf-serving-digits-primary",
    ]


@pytest.mark.parametrize("controller", ["argo", "flagger"])
def test_a_controller_needs_the_version_to_roll_out(controller: str) -> None:
    with pytest.raises(ServingConfigError, match=r"renders the pod template of one model version.*serving.versions"):
        render_deploy_assets(_serving(f"serving.canary.controller={controller}"))


def test_more_than_two_versions_are_refused() -> None:
    with pytest.raises(ServingConfigError, match=r"names more than two versions"):
        render_deploy_assets(_serving("serving.versions=[2,3,4]"))


def test_out_of_range_integers_of_custom_resources_fail() -> None:
    (route,) = _by_kind(render_deploy_assets(_serving(*BUCKET)), "HTTPRoute")
    route["spec"]["parentRefs"][0]["port"] = 2**31
    assert crd_problems(route)
    assert value_problems(route) == []  # no core schema: the pinned one is what checks it


@pytest.mark.slow  # checkov from .venv-checkov
@pytest.mark.skipif(find_checkov() is None, reason="checkov not installed (make setup puts it in .venv-checkov)")
def test_cli_check_passes_the_lead_command_and_fails_an_unknown_field(tmp_path: Path) -> None:
    overrides = [arg for pair in (("--set", value) for value in CANARY) for arg in pair]
    result = CliRunner().invoke(app, ["deploy-assets", "--out", str(tmp_path), *overrides, "--check"])
    assert result.exit_code == 0, result.output
    assert "HTTPRoute tf-serving-digits-http" in result.output
    route = tmp_path / "kubernetes/route.yaml"
    route.write_text(route.read_text().replace("weight: 10", "weight: 10\n      wieght: 10"))
    report = check_deploy_assets(tmp_path)
    assert not report.ok
    assert any("wieght is not a field of the schema" in finding.message for finding in report.findings)
