"""Hostile and careless values on their way into generated scripts and Kubernetes manifests: quantities the API
server would refuse or read otherwise, image strings carrying shell or flags, int32 fields beyond range, and
namespaces Kubernetes manages.

Every config key of each kind is tried with every value, so a key that skips the shared rule
(`foundation.k8s`) fails here. `kubernetes.utils.parse_quantity` serves as the oracle for values where it and
the API server agree, and as the counter-example for the ones it accepts and the API server refuses.
"""

from __future__ import annotations

import os
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as oracle

from foundation.k8s.image import ImageError, check_image, parse_image
from foundation.k8s.quantity import SUFFIXES, QuantityError, memory_bytes, parse_quantity
from pipeline.config import ConfigError, TfxpConfig, load_config
from pipeline.kubeflow.compiler import pod, storage
from serving.checkov_scan import find_checkov
from serving.deploy import _docker_script, render_deploy_assets, write_deploy_assets
from serving.k8s_check import check_deploy_assets, policy_problems, value_problems
from serving.options import ServingOptions

CPU_KEYS = ("serving.cpu", "kubeflow.cpu_request", "kubeflow.trainer_cpu")
MEMORY_KEYS = ("serving.memory", "kubeflow.memory_request", "kubeflow.trainer_memory")
IMAGE_KEYS = ("serving.cpu_image", "serving.gpu_image", "kubeflow.image")
RESERVED = ("kube-system", "kube-public", "kube-node-lease", "default")
INT32_OVER = 2**31
CHECKOV = find_checkov()

# --- quantities ---------------------------------------------------------------------------------------------------

# Accepted by kubernetes.utils.parse_quantity, refused by the API server (or, for -1, by every resource field).
ORACLE_ACCEPTS_API_REFUSES = ("8K", "NaN", "-1", "١٠Gi", " 8Gi", "1e3k", "1mi", "Infinity", "٣")
REFUSED = (
    *ORACLE_ACCEPTS_API_REFUSES,
    "1e2147483648",
    "1e9223372036854775807",
    "1e-9223372036854775807",
    "8Ei",
    "0.1n",
    "1e-10",
    "",
    "8Gi ",
    "8 Gi",
    "8GB",
    "1.2.3",
    "0x10",
    "1_000",
    "e3",
    "0",
    "-5Gi",
    "8ki",
)
ACCEPTED = {
    "8k": Decimal(8000),
    "1e3": Decimal(1000),
    "1E3": Decimal(1000),
    "0.5Gi": Decimal(2**29),
    "100m": Decimal("0.1"),
    "1.5Ki": Decimal(1536),
    "32Gi": Decimal(32 * 2**30),
    "2E": Decimal(2 * 10**18),
    ".5": Decimal("0.5"),
    "+7M": Decimal(7 * 10**6),
}


def _config_file(tmp_path: Path, values: dict[str, object]) -> Path:
    # A config file, not --set: --set reads `.5` as a number and drops the spaces around a value.
    document: dict[str, dict[str, object]] = {}
    for key, value in values.items():
        section, name = key.split(".", 1)
        document.setdefault(section, {})[name] = value
    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    return path


def _load(tmp_path: Path, values: dict[str, object]) -> TfxpConfig:
    return load_config(_config_file(tmp_path, values), [])


def _refused(tmp_path: Path, key: str, value: object) -> str:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, {key: value})
    assert f"`{key}`" in str(caught.value), caught.value
    return str(caught.value)


@pytest.mark.parametrize("text", ORACLE_ACCEPTS_API_REFUSES)
def test_what_parse_quantity_accepts_and_the_api_server_refuses_is_refused(text: str) -> None:
    oracle(text)  # the library tfxp used for kubeflow.artifact_volume_size takes it
    with pytest.raises(QuantityError):
        memory_bytes(text)


@pytest.mark.parametrize("text", REFUSED)
def test_a_quantity_the_api_server_refuses_fails_every_key_when_the_config_loads(tmp_path: Path, text: str) -> None:
    for key in (*CPU_KEYS, *MEMORY_KEYS):
        message = _refused(tmp_path, key, text)
        assert "e.g." in message  # shows valid values
    with pytest.raises(storage.StorageError, match=r"kubeflow\.artifact_volume_size"):
        storage.artifact_volume(_load(tmp_path, {"kubeflow.artifact_volume_size": text}), "", None)


@pytest.mark.parametrize(("text", "value"), sorted(ACCEPTED.items()))
def test_a_quantity_the_api_server_accepts_is_accepted_by_every_key_with_its_value(
    tmp_path: Path, text: str, value: Decimal
) -> None:
    assert parse_quantity(text).value == value == oracle(text)
    config = _load(tmp_path, dict.fromkeys((*CPU_KEYS, *MEMORY_KEYS), text))
    assert config.serving.memory == config.kubeflow.trainer_memory == config.serving.cpu == text
    assert pod.memory_gigabytes(text) == pytest.approx(float(value) / 1e9)
    assert pod.cpu_cores(text) == pytest.approx(float(value))
    if value <= storage.MAX_VOLUME_BYTES:
        volume = storage.artifact_volume(_load(tmp_path, {"kubeflow.artifact_volume_size": text}), "", None)
        assert volume is not None and volume.size == text


def test_kilo_is_lower_case_for_serving_and_kubeflow_alike(tmp_path: Path) -> None:
    # serving refused 8k and took 8K; the Kubeflow pod took 8K and refused 8k; Kubernetes takes only 8k.
    config = _load(tmp_path, dict.fromkeys(MEMORY_KEYS, "8k"))
    assert pod.memory_gigabytes(config.kubeflow.trainer_memory) == pytest.approx(8e-6)
    for key in MEMORY_KEYS:
        assert "kilo is lower-case k" in _refused(tmp_path, key, "8K")


_DIGITS = st.text("0123456789", min_size=1, max_size=6)
_NUMBERS = st.one_of(
    _DIGITS,
    st.builds("{}.{}".format, _DIGITS, st.text("0123456789", max_size=3)),
    st.builds(".{}".format, _DIGITS),
)
_SUFFIX = st.one_of(
    st.sampled_from(sorted(SUFFIXES)),
    st.builds("{}{}{}".format, st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 20)),
)


@settings(max_examples=300, deadline=None)
@given(sign=st.sampled_from(["", "+", "-"]), number=_NUMBERS, suffix=_SUFFIX)
def test_quantities_of_the_grammar_read_as_parse_quantity_reads_them(sign: str, number: str, suffix: str) -> None:
    text = f"{sign}{number}{suffix}"
    ours, theirs = parse_quantity(text).value, oracle(text)
    assert abs(ours - theirs) <= abs(theirs) * Decimal("1e-24"), text


@settings(max_examples=300, deadline=None)
@given(st.text("0123456789.+-eEinumkKMGTP ٣\n", max_size=8))
def test_every_quantity_the_module_accepts_with_a_digit_the_oracle_reads_the_same(text: str) -> None:
    try:
        ours = parse_quantity(text).value
    except QuantityError:
        return
    assert text.isascii() and " " not in text and "\n" not in text and "K" not in text.replace("Ki", "")
    if any(character.isdigit() for character in text.split("e")[0].split("E")[0]):
        assert abs(ours - oracle(text)) <= abs(ours) * Decimal("1e-24"), text


# --- image references ---------------------------------------------------------------------------------------------

HOSTILE_IMAGES = (
    "$(touch /tmp/x)",
    "tensorflow/serving:$(touch /tmp/x)",
    "`touch /tmp/x`",
    "tensorflow/serving:2.19.1;touch /tmp/x",
    "tensorflow/serving:2.19.1\ntouch /tmp/x",
    "tensorflow/serving:2.19.1 --privileged",
    "--privileged",
    "--privileged=true tensorflow/serving",
    "tensorflow/serving:2.19.1'",
    'tensorflow/serving:2.19.1"',
    "Tensorflow/Serving:2.19.1",
    "tensorflow/serving@sha256:abc",
    "tensorflow/serving:" + "x" * 129,
    " tensorflow/serving:2.19.1",
    "",
)
VALID_IMAGES = (
    "tensorflow/serving:2.19.1-gpu",
    "localhost:5000/team/tfxp:0.1.0",
    "[::1]:5000/tfxp:latest",
    "registry.example.com/a__b/c-d.e:T_1",
    "tfxp@sha256:" + "0123456789abcdef" * 4,
    "us-docker.pkg.dev/p/r/tfxp:0.1.0@sha256:" + "ab" * 32,
)


@pytest.mark.parametrize("image", HOSTILE_IMAGES)
def test_an_image_string_that_is_no_reference_fails_every_image_key_when_the_config_loads(
    tmp_path: Path, image: str
) -> None:
    for key in IMAGE_KEYS:
        assert "e.g. `tensorflow/serving:2.19.1`" in _refused(tmp_path, key, image)


@pytest.mark.parametrize("image", VALID_IMAGES)
def test_valid_image_references_load(tmp_path: Path, image: str) -> None:
    config = _load(tmp_path, dict.fromkeys(IMAGE_KEYS, image))
    assert config.serving.cpu_image == config.kubeflow.image == image
    assert check_image(image) == image


def test_a_reference_splits_as_distribution_reference_splits_it() -> None:
    reference = parse_image("localhost:5000/team/tfxp:0.1.0@sha256:" + "ab" * 32)
    assert (reference.domain, reference.path, reference.tag) == ("localhost:5000", "team/tfxp", "0.1.0")
    assert parse_image("team/tfxp").domain == ""  # no `.`, `:` or localhost: a path component
    assert parse_image("Registry/tfxp").domain == "Registry"  # capitals: a registry, as Docker reads it
    with pytest.raises(ImageError, match="upper-case"):
        parse_image("team/Tfxp")


def _fake_docker(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "docker"
    fake.write_text('#!/bin/sh\nfor arg in "$@"; do printf "%s\\0" "$arg"; done > "$ARGV_FILE"\n')
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGV_FILE": str(tmp_path / "argv")}


@pytest.mark.parametrize("image", [image for image in HOSTILE_IMAGES if image])
def test_the_docker_script_passes_an_unchecked_image_as_one_inert_argument(tmp_path: Path, image: str) -> None:
    # Defence in depth: options built without validation (model_copy) still cannot run code through the script.
    marker = tmp_path / "ran"
    image = image.replace("/tmp/x", str(marker))
    options = ServingOptions().model_copy(update={"cpu_image": image})
    with pytest.raises(ImageError, match=r"serving\.cpu_image"):
        render_deploy_assets(options, local_model_dir=str(tmp_path))
    script = tmp_path / "run_tf_serving_cpu.sh"
    script.write_text(_docker_script(options, gpu=False, local_model_dir=str(tmp_path)))
    result = subprocess.run(["bash", str(script)], env=_fake_docker(tmp_path), capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr
    argv = (tmp_path / "argv").read_bytes().decode().split("\0")[:-1]
    assert not marker.exists()
    benign = ServingOptions()
    script.write_text(_docker_script(benign, gpu=False, local_model_dir=str(tmp_path)))
    subprocess.run(["bash", str(script)], env=_fake_docker(tmp_path), check=True, capture_output=True, timeout=30)
    expected = (tmp_path / "argv").read_bytes().decode().split("\0")[:-1]
    assert argv == [image if arg == benign.cpu_image else arg for arg in expected]
    assert argv[argv.index(image) - 1] == "--"  # after `--`: never one of docker's flags


# --- int32 fields, quantities and namespaces in the manifests -----------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        *((key, value) for key in ("serving.max_replicas", "serving.min_replicas") for value in (INT32_OVER, 10**30)),
        ("serving.gpus", 2**63),
        ("serving.run_as_user", 2**63),
        ("kubeflow.trainer_accelerator.count", 2**63),
    ],
)
def test_counts_beyond_what_kubernetes_stores_fail_when_the_config_loads(tmp_path: Path, key: str, value: int) -> None:
    if key.count(".") == 2:  # a nested section
        section, sub_section, name = key.split(".")
        with pytest.raises(ConfigError, match=name):
            _load(tmp_path, {f"{section}.{sub_section}": {name: value, "type": "nvidia.com/gpu"}})
    else:
        _refused(tmp_path, key, value)


@pytest.mark.parametrize("namespace", RESERVED)
def test_a_namespace_kubernetes_manages_is_never_relabelled(tmp_path: Path, namespace: str) -> None:
    message = _refused(tmp_path, "serving.namespace", namespace)
    assert "never relabels" in message and "tfxp-serving" in message
    _load(tmp_path, {"serving.allowed_namespaces": [namespace]})  # selecting callers there is fine


def _documents(assets: dict[str, str], name: str) -> list[dict]:
    return [document for document in yaml.safe_load_all(assets[name]) if document]


def _edited(edit: str) -> dict:
    assets = render_deploy_assets(ServingOptions(), local_model_dir="/srv/models")
    documents = {
        "hpa": _documents(assets, "kubernetes/hpa.yaml")[0],
        "deployment": _documents(assets, "kubernetes/deployment.yaml")[0],
        "service": _documents(assets, "kubernetes/service.yaml")[0],
        "kserve": _documents(assets, "kserve/inferenceservice.yaml")[0],
        "namespace": _documents(assets, "kubernetes/00-namespace.yaml")[0],
    }
    pod_spec = documents["deployment"]["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    {
        "hpa.maxReplicas": lambda: documents["hpa"]["spec"].update(maxReplicas=INT32_OVER),
        "hpa.minReplicas": lambda: documents["hpa"]["spec"].update(minReplicas=-INT32_OVER - 1),
        "deployment.replicas": lambda: documents["deployment"]["spec"].update(replicas=INT32_OVER),
        "containerPort": lambda: container["ports"][0].update(containerPort=INT32_OVER),
        "probe": lambda: container["readinessProbe"].update(periodSeconds=2**40),
        "probe port": lambda: container["readinessProbe"]["httpGet"].update(port=INT32_OVER),
        "service port": lambda: documents["service"]["spec"]["ports"][0].update(targetPort=INT32_OVER),
        "kserve.maxReplicas": lambda: documents["kserve"]["spec"]["predictor"].update(maxReplicas=INT32_OVER),
        "memory 8K": lambda: container["resources"]["limits"].update(memory="8K"),
        "memory NaN": lambda: container["resources"]["requests"].update(memory="NaN"),
        "sizeLimit": lambda: pod_spec["volumes"][1]["emptyDir"].update(sizeLimit="١٠Gi"),
        "kserve cpu": lambda: documents["kserve"]["spec"]["predictor"]["model"]["resources"]["limits"].update(cpu=" 4"),
        "runAsUser": lambda: pod_spec["securityContext"].update(runAsUser=2**63),
        "gpus": lambda: container["resources"]["limits"].update({"nvidia.com/gpu": 2**63}),
    }[edit]()
    return documents


EDITS = {
    "hpa.maxReplicas": ("hpa", "HorizontalPodAutoscaler.spec.maxReplicas = 2147483648 is beyond int32"),
    "hpa.minReplicas": ("hpa", "HorizontalPodAutoscaler.spec.minReplicas = -2147483649 is beyond int32"),
    "deployment.replicas": ("deployment", "Deployment.spec.replicas = 2147483648"),
    "containerPort": ("deployment", "containers[0].ports[0].containerPort = 2147483648"),
    "probe": ("deployment", "readinessProbe.periodSeconds = 1099511627776"),
    "probe port": ("deployment", "readinessProbe.httpGet.port = 2147483648"),
    "service port": ("service", "Service.spec.ports[0].targetPort"),
    "kserve.maxReplicas": ("kserve", "spec.predictor.maxReplicas = 2147483648"),
    "memory 8K": ("deployment", "resources.limits.memory: '8K' is not a Kubernetes quantity"),
    "memory NaN": ("deployment", "resources.requests.memory: 'NaN'"),
    "sizeLimit": ("deployment", "emptyDir.sizeLimit: '١٠Gi'"),
    "kserve cpu": ("kserve", "resources.limits.cpu: ' 4'"),
    "runAsUser": ("deployment", "securityContext.runAsUser = 9223372036854775808 is beyond int64"),
    "gpus": ("deployment", "limits.nvidia.com/gpu = 9223372036854775808 is beyond 2^63-1"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_the_check_finds_what_the_api_server_would_refuse_in_a_manifest(edit: str) -> None:
    which, expected = EDITS[edit]
    documents = _edited(edit)
    problems = value_problems(documents[which])
    assert any(expected in problem for problem in problems), problems
    untouched = _edited("hpa.maxReplicas") if which != "hpa" else _edited("deployment.replicas")
    assert value_problems(untouched[which]) == []


@pytest.mark.parametrize("namespace", RESERVED)
def test_the_check_refuses_a_namespace_object_for_a_namespace_kubernetes_manages(namespace: str) -> None:
    document = _edited("hpa.maxReplicas")["namespace"]
    assert policy_problems(document) == []
    document["metadata"]["name"] = namespace
    assert "tfxp never relabels it" in policy_problems(document)[0]


@pytest.mark.skipif(CHECKOV is None, reason="checkov not installed (make setup puts it in .venv-checkov)")
def test_deploy_assets_check_fails_on_an_hpa_beyond_int32_and_kube_system(tmp_path: Path) -> None:
    write_deploy_assets(ServingOptions(), tmp_path, "/srv/models")
    hpa = tmp_path / "kubernetes/hpa.yaml"
    hpa.write_text(hpa.read_text().replace("maxReplicas: 10", f"maxReplicas: {INT32_OVER}"))
    namespace = tmp_path / "kubernetes/00-namespace.yaml"
    namespace.write_text(namespace.read_text().replace("name: tfxp-serving", "name: kube-system"))
    report = check_deploy_assets(tmp_path, CHECKOV)
    failures = [finding.message for finding in report.findings if finding.status == "fail"]
    assert not report.ok
    assert any("maxReplicas = 2147483648 is beyond int32" in failure for failure in failures), failures
    assert any("namespace kube-system is managed by Kubernetes" in failure for failure in failures), failures


# --- one rule each ------------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[3]
# Traces of a quantity, name or image rule written out again: a unit alternation, the DNS-1123 label pattern,
# the permissive client-library parser, a digest pattern.
RULE_TRACES = ("kubernetes.utils", "Gi|", "|Gi", "Ki|", "[a-z0-9]([-a-z0-9]*[a-z0-9])?", "sha256:[0-9a-f]{64}")


def test_quantity_name_and_image_rules_live_only_in_foundation_k8s() -> None:
    found = [
        f"{path.relative_to(REPO)}: {trace}"
        for package in ("foundation", "components", "serving", "pipeline", "edge")
        for path in sorted((REPO / package).rglob("*.py"))
        if "k8s" not in path.relative_to(REPO / package).parts[:1]
        for trace in RULE_TRACES
        if trace in path.read_text()
    ]
    assert found == [], "use foundation.k8s (quantity, names, image) instead of a copy of its rules"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("kubeflow.trainer_node_selector", ["gpu=$(id)"]),
        ("kubeflow.trainer_node_selector", ["gpu type=a100"]),
        ("kubeflow.trainer_node_selector", ["gpu=a100;rm"]),
        ("kubeflow.trainer_tolerations", ["nvidia.com/gpu=`id`:NoSchedule"]),
        ("kubeflow.trainer_tolerations", ["bad key:NoSchedule"]),
    ],
)
def test_node_selectors_and_tolerations_take_label_syntax_only(tmp_path: Path, key: str, value: list[str]) -> None:
    from pipeline.kubeflow.compiler.compile import spec_patch
    from pipeline.kubeflow.compiler.component_setup import KubeflowCompileError

    with pytest.raises(KubeflowCompileError, match=key):
        spec_patch(_load(tmp_path, {key: value}), "Trainer", "")


def test_the_accelerator_type_is_a_resource_name(tmp_path: Path) -> None:
    _refused(tmp_path, "kubeflow.trainer_accelerator.type", "nvidia.com/gpu $(id)")
    config = _load(tmp_path, {"kubeflow.trainer_accelerator": {"type": "nvidia.com/gpu", "count": 1}})
    assert config.kubeflow.trainer_accelerator.type == "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("image", "version"), [("localhost:5000/serving", "latest"), ("r.example.com/s:2.19.1", "2.19.1")]
)
def test_the_kserve_runtime_version_is_the_tag_not_a_piece_of_the_registry(image: str, version: str) -> None:
    assets = render_deploy_assets(ServingOptions(cpu_image=image), local_model_dir="/srv/models")
    model = _documents(assets, "kserve/inferenceservice.yaml")[0]["spec"]["predictor"]["model"]
    assert model["runtimeVersion"] == version
