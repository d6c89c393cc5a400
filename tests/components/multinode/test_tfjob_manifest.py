"""The workers' TFJob and its RBAC (issue 26): what the API server, the Training Operator's webhook and its
controller accept, and the choices that make multi-worker training restart, finish and clean up.

Checked against the operator's own sources, kubeflow/trainer branch release-1.9 at `OPERATOR_COMMIT` (the
Training Operator v1.9):

- (a) the CRD's `openAPIV3Schema` (tests/data/crds/kubeflow.org_tfjobs.yaml, copied from that commit) with
  jsonschema, and a walk that fails on any field the schema does not declare: a CRD's schema is structural, and the
  API server silently *prunes* undeclared fields instead of refusing them (kubectl's and the Python client's
  default is no strict field validation), so a misspelt `cleanPodPolicyy` or a `resource:` instead of
  `resources:` would be accepted and dropped, and the job would run without it;
- (b) kubernetes-validate (strict, offline) on the pod each replica becomes, the job's metadata as ObjectMeta,
  and the Role and RoleBinding;
- (c) the webhook's rules (`pkg/webhooks/tensorflow/tfjob_webhook.go`) and the controller's naming, ported below;
- (d) one test per important choice, each of which a plausible bug fails.

No TensorFlow is imported: everything here is dicts.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from import_probe import heavy_modules_loaded

from components.multinode.tfjob import (
    CONTAINER_NAME,
    FN_ARGS_PLACEHOLDER,
    JOB_NAME_PLACEHOLDER,
    PORT,
    PORT_NAME,
    TFJOB_GROUP,
    TFJOB_KIND,
    TFJOB_PLURAL,
    TFJOB_VERSION,
    TFJobError,
    WorkerTemplate,
    runpolicy_backoff_limit,
    tfjob_template,
)
from components.multinode.tfjob_binding import OwnerReference, bind_tfjob
from components.multinode.tfjob_names import (
    MAX_INDEX_DIGITS,
    MAX_JOB_NAME_LENGTH,
    job_name_for,
    job_name_problem,
    max_job_name_length,
)
from components.multinode.tfjob_rbac import tfjob_rbac
from components.multinode.worker_args import WORKER_MODULE
from components.trainer.options import MAX_WORKERS
from foundation.k8s.names import DNS1035_LABEL, name_problem
from pipeline.config import TfxpConfig, load_config
from pipeline.kubeflow.compiler.workers import (
    WorkersConfigError,
    manifest_paths,
    rbac,
    worker_template,
    write_manifests,
)
from serving.k8s_check import KUBERNETES_VERSION, value_problems

REPO = Path(__file__).resolve().parents[3]
# kubeflow/trainer, branch release-1.9: the commit the CRD was copied from and the sources below were read at.
OPERATOR_COMMIT = "3a3a1da8d5287f9f96e1b2d3be6a4b6ad756566d"
CRD_PATH = REPO / "tests/data/crds/kubeflow.org_tfjobs.yaml"
POD_NAME = "tfxp-imagenet-resnet50-8x7kq-system-container-impl-2471937312"
POD_UID = "0f6c1c3e-5b1e-4a55-9d51-2b9a3c1f9e77"
FN_ARGS_URI = "gs://b/root/Trainer/fn_args/7/fn_args.json"
RUN_LABELS = {"pipeline/runid": "5b2f0f0e-8c0a-4f5e-a0a4-3f7d3a1b2c4d"}
CASES = {
    "imagenet_a100_x4": (
        REPO / "configs/imagenet_a100.yaml",
        ["trainer.workers=4", "trainer.strategy=auto", "kubeflow.pipeline_root=gs://b/root"],
    ),
    "cpu_x2": (None, ["trainer.workers=2"]),
}
# The Kubernetes verbs and resources the Trainer task may use; anything more is a finding
# (components.multinode.tfjob_rbac).
# The operator's names (pkg/apis/kubeflow.org/v1/tensorflow_types.go:22-28), written out here so that the ports
# below check the manifest against the operator, not against tfxp's own constants.
OPERATOR_CONTAINER = "tensorflow"
OPERATOR_PORT_NAME = "tfjob-port"
OPERATOR_PORT = 2222
# What the TFJob client calls (it polls: no watch); tests/components/multinode/test_tfjob_client.py runs it under
# exactly these rules.
ALLOWED_RULES = {
    (TFJOB_GROUP, "tfjobs"): {"create", "get", "delete"},
    ("", "pods"): {"list"},
    ("", "pods/log"): {"get"},
    ("", "events"): {"list"},
}


@dataclass(frozen=True)
class Case:
    config: TfxpConfig
    template: dict[str, Any]
    job: dict[str, Any]


def _case(path: Path | None, overrides: list[str]) -> Case:
    config = load_config(path, overrides)
    template = tfjob_template(worker_template(config))
    job = bind_tfjob(
        template,
        name=job_name_for(POD_NAME),
        namespace=config.kubeflow.namespace,
        fn_args_uri=FN_ARGS_URI,
        owner=OwnerReference(name=POD_NAME, uid=POD_UID),
        labels=RUN_LABELS,
    )
    return Case(config, template, job)


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return _case(*CASES[request.param])


@pytest.fixture(scope="module")
def a100() -> Case:
    return _case(*CASES["imagenet_a100_x4"])


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["tfReplicaSpecs"]["Worker"]


def _container(job: dict[str, Any]) -> dict[str, Any]:
    [container] = [c for c in _worker(job)["template"]["spec"]["containers"] if c["name"] == OPERATOR_CONTAINER]
    return container


# --- (a) the CRD's schema ---------------------------------------------------------------------------------------


@functools.cache
def _crd() -> dict[str, Any]:
    [crd] = [doc for doc in yaml.load_all(CRD_PATH.read_text(), Loader=_LOADER) if doc]
    return crd


def _openapi_schema() -> dict[str, Any]:
    [version] = [v for v in _crd()["spec"]["versions"] if v["name"] == TFJOB_VERSION]
    return version["schema"]["openAPIV3Schema"]


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DROPPED = {"description", "default", "nullable", "example", "externalDocs"}


def json_schema(node: Any) -> Any:
    """An OpenAPI v3 schema as a CRD holds it, as JSON Schema (draft 7): `x-kubernetes-*` extensions dropped (the
    walk below checks the list types; the CEL rules are update-only, `test_crd_cel_rules_only_compare_updates`),
    `x-kubernetes-int-or-string` as integer-or-string, `nullable` as a null type, annotations dropped."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [json_schema(sub) for sub in value]
        elif not key.startswith("x-kubernetes-") and key not in _DROPPED:
            out[key] = value
    if node.get("x-kubernetes-int-or-string") and "type" not in node and "anyOf" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


_INTEGER_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
FORMATS = jsonschema.FormatChecker()
for _format, (_low, _high) in _INTEGER_RANGES.items():
    FORMATS.checks(_format)(
        lambda value, low=_low, high=_high: (
            not isinstance(value, int) or isinstance(value, bool) or low <= value <= high
        )
    )


@functools.cache
def _validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json_schema(_openapi_schema()), format_checker=FORMATS)


def crd_schema_errors(document: dict[str, Any]) -> list[str]:
    validator = _validator()
    return [f"{'.'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(document)]


def _list_key(item: Any, keys: list[str], item_schema: dict[str, Any]) -> tuple[Any, ...]:
    properties = item_schema.get("properties", {})
    return tuple(item.get(key, properties.get(key, {}).get("default")) for key in keys)


def pruned_fields(value: Any, schema: dict[str, Any], where: str = "") -> Iterator[str]:
    """Fields the API server would prune (not declared by the structural schema) and list entries it would refuse
    as duplicates (`x-kubernetes-list-type: map` keyed by `x-kubernetes-list-map-keys`, or `set`)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            path = f"{where}.{key}" if where else key
            if not where and key == "metadata":
                continue  # the root's ObjectMeta is the API server's own (test_job_metadata_is_valid_object_meta)
            if key in properties:
                yield from pruned_fields(item, properties[key], path)
            elif isinstance(extra, dict):
                yield from pruned_fields(item, extra, path)
            elif extra is not True:
                yield f"{path}: not in the schema, pruned"
    elif isinstance(value, list):
        items = schema.get("items", {})
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "map":
            keys = [_list_key(item, schema["x-kubernetes-list-map-keys"], items) for item in value]
            if len(set(keys)) != len(keys):
                yield f"{where}: two entries with the same {schema['x-kubernetes-list-map-keys']}"
        elif list_type == "set" and len({repr(item) for item in value}) != len(value):
            yield f"{where}: a set with a duplicate"
        for index, item in enumerate(value):
            yield from pruned_fields(item, items, f"{where}[{index}]")


def test_constants_are_the_operators() -> None:
    assert (CONTAINER_NAME, PORT_NAME, PORT) == (OPERATOR_CONTAINER, OPERATOR_PORT_NAME, OPERATOR_PORT)


def test_crd_is_the_training_operators_v1_9_tfjob() -> None:
    assert OPERATOR_COMMIT in CRD_PATH.read_text().split("---")[0]  # the file's header names the commit
    crd = _crd()
    assert crd["spec"]["group"] == TFJOB_GROUP and crd["spec"]["names"]["plural"] == TFJOB_PLURAL
    assert crd["spec"]["names"]["kind"] == TFJOB_KIND and crd["spec"]["scope"] == "Namespaced"
    assert [v["name"] for v in crd["spec"]["versions"] if v["served"] and v["storage"]] == [TFJOB_VERSION]


def test_crd_cel_rules_only_compare_updates() -> None:
    """`json_schema` drops the CRD's CEL rules; that is exact for a create only while every rule is a transition
    rule (it reads `oldSelf`, so the API server evaluates it on updates alone)."""
    rules: list[str] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            rules.extend(rule["rule"] for rule in node.get("x-kubernetes-validations", []))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(_openapi_schema())
    assert rules and all("oldSelf" in rule for rule in rules), rules


def test_manifest_validates_against_the_crd_schema(case: Case) -> None:
    assert crd_schema_errors(case.job) == []
    assert crd_schema_errors(case.template) == []  # the review copy too (placeholders are strings)


def test_manifest_has_no_field_the_api_server_would_prune(case: Case) -> None:
    assert list(pruned_fields(case.job, _openapi_schema())) == []


def test_the_schema_checks_catch_mistakes(a100: Case) -> None:
    schema = _openapi_schema()
    job = copy.deepcopy(a100.job)
    _worker(job)["replicas"] = "4"
    job["spec"]["runPolicy"]["backoffLimit"] = 2**31
    errors = crd_schema_errors(job)
    assert any("replicas" in error and "integer" in error for error in errors), errors
    assert any("backoffLimit" in error and "int32" in error for error in errors), errors

    job = copy.deepcopy(a100.job)
    job["spec"]["runPolicy"]["cleanPodPolicyy"] = "All"
    _container(job)["resource"] = _container(job).pop("resources")
    # The same port again: its protocol defaults to TCP, so the list-map key (containerPort, protocol) repeats.
    _container(job)["ports"].append({"name": "other", "containerPort": OPERATOR_PORT})
    assert crd_schema_errors(job) == []  # jsonschema alone accepts all three
    found = list(pruned_fields(job, schema))
    assert "spec.runPolicy.cleanPodPolicyy: not in the schema, pruned" in found
    assert any(f.startswith("spec.tfReplicaSpecs.Worker.template.spec.containers[0].resource:") for f in found)
    assert any("ports: two entries with the same ['containerPort', 'protocol']" in f for f in found), found


# --- (b) kubernetes-validate -------------------------------------------------------------------------------------


def replica_pod(job: dict[str, Any], index: int) -> dict[str, Any]:
    """The pod the operator creates for worker `index`: named by GenGeneralName (pkg/core/utils.go:30-33), its
    labels added (pkg/controller.v1/common/pod.go:401-422), TF_CONFIG added to the `tensorflow` container
    (pkg/controller.v1/tensorflow/tfjob_controller.go:555-588, tensorflow.go:112-188) and the replica's restart
    policy set (pkg/core/pod.go:81-87)."""
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    worker = _worker(job)
    template = copy.deepcopy(worker["template"])
    hosts = [f"{name}-worker-{i}.{namespace}.svc:{OPERATOR_PORT}" for i in range(worker["replicas"])]
    tf_config = {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}, "environment": "cloud"}
    for container in template["spec"]["containers"]:
        if container["name"] == OPERATOR_CONTAINER:
            container.setdefault("env", []).append({"name": "TF_CONFIG", "value": yaml.safe_dump(tf_config)})
    labels = {
        **template["metadata"].get("labels", {}),
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/operator-name": "tfjob-controller",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": str(index),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template["metadata"],
            "name": f"{name}-worker-{index}",
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {**template["spec"], "restartPolicy": worker["restartPolicy"]},
    }


def test_replica_pods_pass_kubernetes_validate(case: Case) -> None:
    for index in range(case.config.trainer.workers):
        pod = replica_pod(case.job, index)
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)
        assert value_problems(pod) == []  # int32 ranges and quantities (cpu, memory, sizeLimit)
        assert name_problem("Service", pod["metadata"]["name"]) is None  # its headless Service has the same name
        spec = pod["spec"]
        volumes = [volume["name"] for volume in spec["volumes"]]
        assert len(set(volumes)) == len(volumes)
        assert {mount["name"] for mount in spec["containers"][0]["volumeMounts"]} <= set(volumes)


def test_job_metadata_is_valid_object_meta(case: Case) -> None:
    """The CRD leaves the job's `metadata` to the API server's ObjectMeta; check it as any object's (labels,
    owner references) by validating it on a ConfigMap."""
    carrier = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": case.job["metadata"]}
    kubernetes_validate.validate(carrier, KUBERNETES_VERSION, strict=True)


def test_rbac_passes_kubernetes_validate(case: Case) -> None:
    for document in rbac(case.config):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        assert name_problem(document["kind"], document["metadata"]["name"]) is None


def test_kubernetes_validate_is_strict(a100: Case) -> None:
    pod = replica_pod(a100.job, 0)
    pod["spec"]["containers"][0]["resource"] = pod["spec"]["containers"][0].pop("resources")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)


# --- (c) the webhook's and the controller's rules ----------------------------------------------------------------

# tensorflow_types.go:104-123 (PS, Worker, Chief, Master, Evaluator); webhooks.go:11-13 and common_types.go:39-43.
REPLICA_TYPES = ("PS", "Worker", "Chief", "Master", "Evaluator")
MANAGED_BY = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


def webhook_errors(job: dict[str, Any]) -> list[str]:
    """`validateTFJob` of pkg/webhooks/tensorflow/tfjob_webhook.go:72-126 (create), with
    pkg/common/util/webhooks.go:15-25 (runPolicy.managedBy)."""
    errors = []
    name = job.get("metadata", {}).get("name", "")
    if len(name) > 63 or not re.fullmatch(DNS1035_LABEL, name):  # :74, NameIsDNS1035Label
        errors.append(f"metadata.name {name!r}: should match a DNS-1035 label")
    spec = job.get("spec", {})
    managed_by = spec.get("runPolicy", {}).get("managedBy")
    if managed_by is not None and managed_by not in MANAGED_BY:  # webhooks.go:17-23
        errors.append(f"spec.runPolicy.managedBy {managed_by!r}: not supported")
    replica_specs = spec.get("tfReplicaSpecs")
    if replica_specs is None:  # :92-94
        errors.append("spec.tfReplicaSpecs: must be required")
    chief_or_master = 0
    for replica_type, replica in (replica_specs or {}).items():
        containers = ((replica or {}).get("template", {}).get("spec", {}) or {}).get("containers") or []
        where = f"spec.tfReplicaSpecs[{replica_type}].template.spec.containers"
        if not containers:  # :101-103
            errors.append(f"{where}: must be specified")
        if replica_type in ("Chief", "Master"):  # :104-106, IsChiefOrMaster
            chief_or_master += 1
        for index, container in enumerate(containers):
            if not container.get("image"):  # :110-112
                errors.append(f"{where}[{index}].image: must be required")
        if not any(container.get("name") == OPERATOR_CONTAINER for container in containers):  # :113-120
            errors.append(f"{where}: must have at least one container with name {OPERATOR_CONTAINER}")
    if chief_or_master > 1:  # :122-124
        errors.append("spec.tfReplicaSpecs: must not have more than 1 Chief or Master role")
    return errors


def controller_problems(job: dict[str, Any]) -> list[str]:
    """What the webhook lets through but the controller then cannot do: replica types it does not know are never
    reconciled (tfjob_controller.go:418-426), and each replica's Service `<job>-<type>-<index>`
    (pkg/core/utils.go:30-33, pkg/controller.v1/common/service.go:243) must be a valid Service name; the
    `tensorflow` container should declare `tfjob-port` (util.go:24-37 falls back to 2222)."""
    problems = []
    name = job["metadata"]["name"]
    for replica_type, replica in job["spec"]["tfReplicaSpecs"].items():
        if replica_type not in REPLICA_TYPES:
            problems.append(f"replica type {replica_type} is none the controller reconciles")
        last = f"{name}-{replica_type.lower()}-{replica.get('replicas', 1) - 1}"
        problem = name_problem("Service", last)
        if problem:
            problems.append(problem)
        ports = [port for c in replica["template"]["spec"]["containers"] if c["name"] == OPERATOR_CONTAINER
                 for port in c.get("ports", [])]  # fmt: skip
        if {"name": OPERATOR_PORT_NAME, "containerPort": OPERATOR_PORT, "protocol": "TCP"} not in ports:
            problems.append(f"no {OPERATOR_PORT_NAME} port declared on the {OPERATOR_CONTAINER} container")
    return problems


def test_webhook_and_controller_accept_the_manifest(case: Case) -> None:
    assert webhook_errors(case.job) == []
    assert controller_problems(case.job) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda job: _container(job).update(name="trainer"), "container with name tensorflow"),
        (lambda job: _container(job).update(image=""), "image: must be required"),
        (lambda job: job["metadata"].update(name="Trainer_1"), "DNS-1035"),
        (lambda job: job["metadata"].update(name="4-workers"), "DNS-1035"),
        (lambda job: job["spec"]["runPolicy"].update(managedBy="me"), "managedBy"),
        (lambda job: job["spec"].pop("tfReplicaSpecs"), "must be required"),
        (
            lambda job: job["spec"]["tfReplicaSpecs"].update(
                Chief=copy.deepcopy(_worker(job)), Master=copy.deepcopy(_worker(job))
            ),
            "more than 1 Chief or Master",
        ),
    ],
)
def test_the_webhook_port_refuses_what_the_webhook_refuses(a100: Case, mutate: Any, expected: str) -> None:
    job = copy.deepcopy(a100.job)
    mutate(job)
    assert any(expected in error for error in webhook_errors(job)), webhook_errors(job)


def test_bind_refuses_names_the_webhook_accepts_but_services_cannot_use(a100: Case) -> None:
    name = "t" * 63  # a DNS-1035 label: the webhook accepts it
    job = copy.deepcopy(a100.job)
    job["metadata"]["name"] = name
    assert webhook_errors(job) == []
    assert any("Service name" in problem for problem in controller_problems(job))
    with pytest.raises(TFJobError, match=r"names Services up to t+-worker-3, which must be at most 63, so at most 54"):
        bind_tfjob(a100.template, name=name, namespace="kubeflow", fn_args_uri=FN_ARGS_URI, owner=None)


# --- (d) the choices ---------------------------------------------------------------------------------------------


def test_requests_equal_limits_for_guaranteed_qos(case: Case) -> None:
    resources = _container(case.job)["resources"]
    assert resources["requests"] == resources["limits"]
    kubeflow = case.config.kubeflow
    assert (
        resources["limits"]["cpu"] == kubeflow.trainer_cpu and resources["limits"]["memory"] == kubeflow.trainer_memory
    )


def test_every_worker_requests_the_accelerator(case: Case) -> None:
    resources = _container(case.job)["resources"]
    wanted = case.config.kubeflow.trainer_accelerator
    if wanted.count:
        assert resources["limits"][wanted.type] == resources["requests"][wanted.type] == str(wanted.count) == "8"
    else:
        assert set(resources["limits"]) == {"cpu", "memory"}


def test_dev_shm_is_memory_backed_mounted_and_sized(case: Case) -> None:
    spec = _worker(case.job)["template"]["spec"]
    [mount] = [m for m in _container(case.job)["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert volume == {"name": mount["name"], "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}


def test_claims_are_mounted_at_their_paths() -> None:
    config = load_config(
        None,
        [
            "trainer.workers=2",
            "kubeflow.volumes=[data:/data, models:/mnt/models/]",
            "kubeflow.workers.shared_dir=/data/tfxp",
        ],
    )
    job = tfjob_template(worker_template(config))
    spec = _worker(job)["template"]["spec"]
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v
    }
    mounted = {claims[m["name"]]: m["mountPath"] for m in _container(job)["volumeMounts"] if m["name"] in claims}
    assert mounted == {"data": "/data", "models": "/mnt/models"}


def test_the_worker_runs_the_entrypoint_with_the_fn_args(case: Case) -> None:
    container = _container(case.job)
    assert container["command"] == ["python", "-m", WORKER_MODULE] == ["python", "-m", "components.trainer.worker"]
    assert container["args"] == ["--fn-args", FN_ARGS_URI]
    assert container["image"] == case.config.kubeflow.image


def test_binding_fills_every_placeholder_and_leaves_the_template(case: Case) -> None:
    text = yaml.safe_dump(case.job)
    assert JOB_NAME_PLACEHOLDER not in text and FN_ARGS_PLACEHOLDER not in text
    metadata = case.job["metadata"]
    assert metadata["name"] == job_name_for(POD_NAME) and metadata["namespace"] == case.config.kubeflow.namespace
    assert metadata["ownerReferences"] == [OwnerReference(name=POD_NAME, uid=POD_UID).to_dict()]
    assert RUN_LABELS.items() <= metadata["labels"].items()
    assert RUN_LABELS.items() <= _worker(case.job)["template"]["metadata"]["labels"].items()
    assert case.template == tfjob_template(worker_template(case.config))  # bind_tfjob copied it
    assert case.template["metadata"]["name"] == JOB_NAME_PLACEHOLDER


def test_bind_refuses_a_template_without_its_placeholders(a100: Case) -> None:
    bind: dict[str, Any] = {"name": "t-1", "namespace": "kubeflow", "fn_args_uri": FN_ARGS_URI, "owner": None}
    with pytest.raises(TFJobError, match="not an unbound TFJob template"):
        bind_tfjob(a100.job, **bind)  # already bound
    no_arg = copy.deepcopy(a100.template)
    _container(no_arg)["args"] = ["--fn-args", "gs://b/x"]
    with pytest.raises(TFJobError, match="not an unbound TFJob template"):
        bind_tfjob(no_arg, **bind)
    no_container = copy.deepcopy(a100.template)
    _container(no_container)["name"] = "trainer"
    with pytest.raises(TFJobError, match="one container named tensorflow"):
        bind_tfjob(no_container, **bind)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"name": "Trainer"}, "not a DNS-1035 label"),
        ({"name": "9-trainer"}, "not a DNS-1035 label"),
        ({"name": "trainer-"}, "not a DNS-1035 label"),
        ({"namespace": "Kube_Flow"}, "Namespace name"),
        ({"fn_args_uri": ""}, "empty or holds whitespace"),
        ({"fn_args_uri": "gs://b/x --privileged"}, "empty or holds whitespace"),
        ({"owner": OwnerReference(name=POD_NAME, uid="")}, "needs the pod's name and uid"),
        ({"labels": {"pipeline/runid": "not a value"}}, "TFJob label pipeline/runid"),
    ],
)
def test_bind_refuses_bad_run_values(a100: Case, values: dict[str, Any], expected: str) -> None:
    bind: dict[str, Any] = {"name": "t-1", "namespace": "kubeflow", "fn_args_uri": FN_ARGS_URI, "owner": None}
    with pytest.raises(TFJobError, match=expected):
        bind_tfjob(a100.template, **{**bind, **values})


def test_job_name_limit_leaves_room_for_the_last_service(a100: Case) -> None:
    limit = max_job_name_length(4)
    assert limit == 63 - len("-worker-3") == 54
    bind_tfjob(a100.template, name="t" * limit, namespace="kubeflow", fn_args_uri=FN_ARGS_URI, owner=None)
    with pytest.raises(TFJobError, match="at most 54"):
        bind_tfjob(a100.template, name="t" * (limit + 1), namespace="kubeflow", fn_args_uri=FN_ARGS_URI, owner=None)
    assert len(str(MAX_WORKERS - 1)) <= MAX_INDEX_DIGITS  # job_name_for's names fit any trainer.workers
    assert max_job_name_length(MAX_WORKERS) >= MAX_JOB_NAME_LENGTH


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=300), st.text(min_size=1, max_size=300))
def test_job_name_for_is_valid_stable_and_unique(first: str, second: str) -> None:
    name = job_name_for(first)
    assert job_name_problem(name, MAX_WORKERS) is None and len(name) <= MAX_JOB_NAME_LENGTH
    assert job_name_for(first) == name
    assert (job_name_for(second) == name) == (first == second)


def test_job_name_for_keeps_the_pod_name_readable() -> None:
    name = job_name_for(POD_NAME)
    assert name.startswith("tfxp-imagenet-resnet50-8x7kq-system-") and len(name) == MAX_JOB_NAME_LENGTH == 50
    assert job_name_for("0123-run").startswith("run-") and job_name_for("___").startswith("tfjob-")


def test_rbac_is_least_privilege() -> None:
    role, binding = tfjob_rbac("pipeline-runner", "kubeflow")
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}  # no resourceNames or nonResourceURLs surprises
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    texts = [text for rule in role["rules"] for field in rule.values() for text in field]
    assert "*" not in texts and not any("*" in text for text in texts)
    assert granted == ALLOWED_RULES
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "kubeflow"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "pipeline-runner", "namespace": "kubeflow"}]
    with pytest.raises(TFJobError, match="ServiceAccount name"):
        tfjob_rbac("Pipeline_Runner", "kubeflow")


def test_workers_run_as_restricted_as_every_other_pod_of_the_run(case: Case) -> None:
    pod = _worker(case.job)["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]["securityContext"]
    assert container == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_the_task_gives_the_workers_its_own_service_account(case: Case) -> None:
    template = tfjob_template(worker_template(case.config))
    bound = bind_tfjob(template, name="tfxp-w", namespace="team-a", fn_args_uri="gs://b/f.json", owner=None,
                       service_account="default-editor")  # fmt: skip
    assert _worker(bound)["template"]["spec"]["serviceAccountName"] == "default-editor"
    assert _worker(template)["template"]["spec"]["serviceAccountName"] == case.config.kubeflow.service_account
    with pytest.raises(TFJobError, match="ServiceAccount"):
        bind_tfjob(template, name="tfxp-w", namespace="team-a", fn_args_uri="gs://b/f.json", owner=None,
                   service_account="Not_A_Name")  # fmt: skip


def test_a_failed_worker_restarts_the_job_and_nothing_is_left(case: Case) -> None:
    assert _worker(case.job)["restartPolicy"] == "OnFailure"
    assert "restartPolicy" not in _worker(case.job)["template"]["spec"]  # the operator sets it from the replica's
    run_policy = case.job["spec"]["runPolicy"]
    assert run_policy["cleanPodPolicy"] == "Running" and run_policy["ttlSecondsAfterFinished"] > 0
    assert run_policy["activeDeadlineSeconds"] == case.config.kubeflow.workers.job_deadline_seconds
    assert "successPolicy" not in case.job["spec"]  # the default: the job ends when worker 0 (the chief) succeeds
    assert list(case.job["spec"]["tfReplicaSpecs"]) == ["Worker"]  # worker 0 is the chief


def past_backoff_limit(restart_counts: list[int], backoff_limit: int) -> bool:
    """`PastBackoffLimit` of pkg/core/job.go:95-132 for OnFailure replicas: the restarts of every running pod's
    containers, summed, against the limit (any restart when it is 0)."""
    total = sum(restart_counts)
    return total > 0 if backoff_limit == 0 else total >= backoff_limit


@pytest.mark.parametrize(("job_restarts", "workers"), [(3, 4), (1, 2), (0, 8), (5, 1)])
def test_the_backoff_limit_counts_job_restarts_not_pod_restarts(job_restarts: int, workers: int) -> None:
    limit = runpolicy_backoff_limit(job_restarts, workers)
    after = [[failures] * workers for failures in range(job_restarts + 2)]  # each failure restarts every worker
    assert [past_backoff_limit(counts, limit) for counts in after] == [False] * (job_restarts + 1) + [True]
    if job_restarts and workers > 1:  # the config's value as it is would end the job at its first failure
        assert past_backoff_limit(after[1], job_restarts)


def test_the_job_carries_the_scaled_backoff_limit(case: Case) -> None:
    kubeflow, workers = case.config.kubeflow, case.config.trainer.workers
    assert case.job["spec"]["runPolicy"]["backoffLimit"] == kubeflow.workers.backoff_limit * workers + 1


def test_gang_scheduling_asks_for_every_worker_at_once() -> None:
    config = load_config(
        None, ["trainer.workers=8", "kubeflow.workers.queue=a100", "kubeflow.workers.schedule_timeout_seconds=600"]
    )
    policy = tfjob_template(worker_template(config))["spec"]["runPolicy"]["schedulingPolicy"]
    assert policy == {"minAvailable": 8, "scheduleTimeoutSeconds": 600, "queue": "a100"}
    config = load_config(None, ["trainer.workers=8", "kubeflow.workers.gang_scheduling=false"])
    assert "schedulingPolicy" not in tfjob_template(worker_template(config))["spec"]["runPolicy"]


def test_the_owner_pod_is_neither_controller_nor_blocking() -> None:
    reference = OwnerReference(name=POD_NAME, uid=POD_UID).to_dict()
    assert reference == {"apiVersion": "v1", "kind": "Pod", "name": POD_NAME, "uid": POD_UID,
                         "controller": False, "blockOwnerDeletion": False}  # fmt: skip


def test_pods_carry_the_trainer_settings(a100: Case) -> None:
    spec = _worker(a100.job)["template"]["spec"]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["serviceAccountName"] == "pipeline-runner" and spec["automountServiceAccountToken"] is False
    config = load_config(
        None,
        ["trainer.workers=2", "kubeflow.image_pull_secrets=[regcred]", "kubeflow.pod_labels=[team=ml]",
         "kubeflow.pod_annotations=[example.com/owner=ml-platform]"],
    )  # fmt: skip
    template = _worker(tfjob_template(worker_template(config)))["template"]
    assert template["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert template["metadata"]["labels"]["team"] == "ml"
    assert template["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false",
        "example.com/owner": "ml-platform",
    }


def test_worker_env_merges_the_nccl_defaults_with_the_users() -> None:
    config = load_config(None, ["trainer.workers=2", "kubeflow.workers.env=[NCCL_SOCKET_IFNAME=eth0, NCCL_DEBUG=INFO]"])
    env = _container(tfjob_template(worker_template(config)))["env"]
    assert env == [
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
        {"name": "TFXP_WORKER", "value": "1"},  # run_fn trains as a worker only with it
    ]
    assert worker_template(load_config(None, ["trainer.workers=2"])).env == {"NCCL_DEBUG": "WARN"}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["kubeflow.workers.env=[TF_CONFIG=x]"], r"kubeflow.workers.env sets TF_CONFIG, which the Training Operator"),
        (["kubeflow.workers.env=[A=1, A=2]"], r"kubeflow.workers.env sets A twice"),
        (["kubeflow.workers.env=[NCCL_DEBUG]"], r"kubeflow.workers.env: 'NCCL_DEBUG' is not `NAME=value`"),
        (["kubeflow.workers.env=[1X=a]"], r"kubeflow.workers.env: '1X=a'"),
        (["kubeflow.trainer_node_selector=[gpu]"], r"kubeflow.trainer_node_selector: 'gpu' is not `key=value`"),
        (["kubeflow.trainer_tolerations=[gpu:Sometimes]"], r"kubeflow.trainer_tolerations: 'gpu:Sometimes'"),
        (["kubeflow.image_pull_secrets=[Reg_Cred]"], r"kubeflow.image_pull_secrets: 'Reg_Cred'"),
        (["kubeflow.pod_labels=[team=a b]"], r"kubeflow.pod_labels: 'team=a b'"),
        (["kubeflow.volumes=[data]"], r"kubeflow.volumes: 'data'"),
        (["kubeflow.volumes=[a:/x, b:/x]"], r"kubeflow.volumes mounts a and b both at /x"),
        (["kubeflow.volumes=[a:/dev]"], r"kubeflow.volumes mounts a at /dev, where every worker has its memory"),
        (["kubeflow.workers.shared_dir=/shared"], r"kubeflow.workers.shared_dir=/shared is on no kubeflow.volumes"),
        (
            ["kubeflow.workers.shm_size=32G"],
            r"kubeflow.workers.shm_size=32G is no smaller than kubeflow.trainer_memory",
        ),
        (
            ["kubeflow.trainer_accelerator.type=NVIDIA_TESLA_A100", "kubeflow.trainer_accelerator.count=8"],
            r"kubeflow.trainer_accelerator.type=NVIDIA_TESLA_A100 is no Kubernetes resource name",
        ),
        (["kubeflow.namespace=Kube_Flow"], r"kubeflow.namespace=Kube_Flow: not a Kubernetes namespace name"),
        (["kubeflow.service_account=Runner"], r"kubeflow.service_account: ServiceAccount name 'Runner'"),
        (["kubeflow.workers.queue=A100 queue"], r"kubeflow.workers.queue='A100 queue' is not a Kubernetes object"),
        (
            ["kubeflow.workers.queue=a100", "kubeflow.workers.gang_scheduling=false"],
            r"kubeflow.workers.queue=a100 applies only to gang scheduling",
        ),
    ],
)
def test_config_errors_name_the_key(overrides: list[str], expected: str) -> None:
    config = load_config(None, ["trainer.workers=2", *overrides])
    with pytest.raises(WorkersConfigError, match=expected):
        worker_template(config)


def test_review_files_beside_the_spec(tmp_path: Path, a100: Case) -> None:
    spec = tmp_path / "pipeline.yaml"
    assert manifest_paths(spec) == (tmp_path / "pipeline.tfjob.yaml", tmp_path / "pipeline.rbac.yaml")
    tfjob_path, rbac_path = write_manifests(a100.config, spec)
    tfjob_text, rbac_text = tfjob_path.read_text(), rbac_path.read_text()
    header = tfjob_text.split("apiVersion:")[0]
    assert header.strip() and all(line.startswith("#") for line in header.splitlines())
    assert "do not apply this file yourself" in header and "pipeline.rbac.yaml" in header
    assert list(yaml.safe_load_all(tfjob_text)) == [a100.template]
    assert "#   kubectl apply -n kubeflow -f pipeline.rbac.yaml\n" in rbac_text
    assert list(yaml.safe_load_all(rbac_text)) == rbac(a100.config)


def test_worker_template_is_frozen() -> None:
    worker = WorkerTemplate(image="tfxp:0.1.0", workers=2, cpu="2", memory="8G")
    with pytest.raises(AttributeError):
        worker.workers = 3  # type: ignore[misc]
    assert tfjob_template(replace(worker, workers=3))["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 3
    with pytest.raises(TFJobError, match="at least one worker"):
        tfjob_template(replace(worker, workers=0))


def test_the_manifest_module_loads_no_framework_or_client() -> None:
    code = (
        "import components.multinode.tfjob, components.multinode.tfjob_binding, "
        "components.multinode.tfjob_names, components.multinode.tfjob_rbac"
    )
    assert heavy_modules_loaded(code, ["tensorflow", "tfx", "kubernetes", "pipeline", "keras"]) == []
