"""Checks of the written Kubernetes and KServe manifests, as `tfxp deploy-assets --check` and the tests run them.

`check_deploy_assets(out_dir)` reads `kubernetes/*.yaml` and `kserve/*.yaml` under `out_dir` and checks:

- custom resources (routes, Argo Rollouts', Flagger's, and KServe's InferenceService too) against their CRDs'
  pinned schemas, strictly (`serving.k8s_crds`);
- every other object against the Kubernetes OpenAPI schemas, strictly (unknown fields are errors), with
  kubernetes-validate (the `check` extra; its schemas ship with it, so this runs offline). It has no schema for
  KServe's InferenceService, whose predictor is a core PodSpec plus KServe's fields and whose model is a core
  Container plus KServe's fields: those parts are checked as the Pod KServe will create (`predictor_pod`);
- every `metadata.name` against the rule for its kind (`foundation.k8s.names.NAME_RULES`), which schema
  validators do not check but the API server does;
- every integer and quantity against what the API server stores (`value_problems`): integers of an int32 or
  int64 field within range (HPA `maxReplicas`, `replicas`, ports, probe periods: JSON Schema validators ignore
  `format: int32`, the API server refuses 2^31), every Quantity (resources, emptyDir `sizeLimit`) by
  `foundation.k8s.quantity`, and KServe's int32 replica fields;
- every Namespace against tfxp's policy: never relabel a namespace Kubernetes itself manages
  (`foundation.k8s.names.RESERVED_NAMESPACES`);
- every pod against the "restricted" Pod Security Standard (`restricted_violations`);
- the directory with checkov (`serving.checkov_scan.run_checkov`), with the skips and soft failures of
  `serving/checkov.yaml`.

Example:
    report = check_deploy_assets(Path("deploy"))
    for finding in report.findings:
        print(finding.status, finding.message)
    report.ok  # False when anything failed
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from foundation.bounded import parse_json
from foundation.k8s.names import RESERVED_NAMESPACES, name_problem
from foundation.k8s.quantity import INT32_MAX, INT64_MAX, QuantityError, parse_quantity
from foundation.yaml_files import read_yaml_all
from serving.checkov_scan import CHECKOV_CONFIG, CheckToolError, checkov_exceptions, run_checkov
from serving.k8s_crds import crd_problems, is_custom
from serving.k8s_manifests import Manifest

KUBERNETES_VERSION = "1.33"  # the schemas kubernetes-validate checks against
# Fields KServe adds to the PodSpec of `spec.predictor` and to the Container of `spec.predictor.model`
# (config/crd/full/serving.kserve.io_inferenceservices.yaml, v1beta1); the rest are core Kubernetes fields.
KSERVE_PREDICTOR_FIELDS = frozenset(
    {
        *("minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "scaleMetricType", "autoScaling"),
        *("containerConcurrency", "timeout", "canaryTrafficPercent", "deploymentStrategy", "workerSpec"),
        *("logger", "batcher", "labels", "annotations", "storageUris", "storageContainerName", "model"),
    }
)
KSERVE_MODEL_FIELDS = frozenset(
    {"modelFormat", "runtime", "runtimeVersion", "protocolVersion", "storageUri", "storage"}
)
# KServe's int32 fields of `spec.predictor` (ComponentExtensionSpec: MinReplicas *int32, MaxReplicas int32,
# ScaleTarget *int32), which no core schema covers.
KSERVE_INT32_FIELDS = ("minReplicas", "maxReplicas", "scaleTarget")
_INTEGER_RANGES = {"int32": (-(2**31), INT32_MAX), "int64": (-(2**63), INT64_MAX)}
_QUANTITY_REF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING_REF = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"  # Go: IntVal int32
_RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)

Status = Literal["ok", "fail", "warn"]


@dataclass(frozen=True)
class Finding:
    """One line of the report: `ok`, `fail` (the check fails) or `warn` (reported, not fatal)."""

    status: Status
    message: str


@dataclass
class CheckReport:
    """What `check_deploy_assets` found, in the order it checked."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing failed (warnings allowed)."""
        return all(finding.status != "fail" for finding in self.findings)

    def add(self, status: Status, message: str) -> None:
        self.findings.append(Finding(status, message))


def load_manifests(out_dir: Path) -> list[tuple[str, Manifest]]:
    """(path relative to `out_dir`, object) for every YAML document under kubernetes/ and kserve/."""
    documents = []
    for path in sorted(out_dir.glob("kubernetes/*.yaml")) + sorted(out_dir.glob("kserve/*.yaml")):
        for document in read_yaml_all(path):
            if document:
                documents.append((str(path.relative_to(out_dir)), document))
    return documents


def predictor_pod(service: Manifest) -> Manifest:
    """The Pod KServe creates for an InferenceService's predictor, as far as the manifest decides it."""
    predictor = service["spec"]["predictor"]
    model = {key: value for key, value in predictor.get("model", {}).items() if key not in KSERVE_MODEL_FIELDS}
    spec = {key: value for key, value in predictor.items() if key not in KSERVE_PREDICTOR_FIELDS}
    spec["containers"] = [{"name": "kserve-container", **model}, *spec.get("containers", [])]
    metadata = {"name": f"{service['metadata']['name']}-predictor"}
    if "namespace" in service["metadata"]:
        metadata["namespace"] = service["metadata"]["namespace"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _pod_spec(document: Manifest) -> Manifest | None:
    kind = document.get("kind")
    if kind == "Pod":
        return document["spec"]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Rollout"):
        return document["spec"]["template"]["spec"]
    return None


def restricted_violations(pod_spec: Manifest) -> list[str]:
    """What the "restricted" Pod Security Standard refuses in `pod_spec` (empty: admitted).

    Covers what the profile checks on pods like these: host namespaces, volume types, host ports, privileged
    containers, privilege escalation, capabilities, non-root and seccomp (pod level, or every container).
    """
    problems = [f"{key} is true" for key in ("hostNetwork", "hostPID", "hostIPC") if pod_spec.get(key)]
    for volume in pod_spec.get("volumes", []):
        kinds = sorted(set(volume) - {"name"} - _RESTRICTED_VOLUMES)
        if kinds:
            problems.append(f"volume {volume.get('name')} is of type {', '.join(kinds)}")
    pod = pod_spec.get("securityContext") or {}
    for container in [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]:
        context = container.get("securityContext") or {}
        capabilities = context.get("capabilities") or {}
        seccomp = (context.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
        checks = {
            "privileged": bool(context.get("privileged")),
            "allowPrivilegeEscalation is not false": context.get("allowPrivilegeEscalation") is not False,
            "capabilities do not drop ALL": "ALL" not in capabilities.get("drop", []),
            "capabilities add more than NET_BIND_SERVICE": bool(
                set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}
            ),
            "runAsNonRoot is not true": context.get("runAsNonRoot", pod.get("runAsNonRoot")) is not True,
            "runs as UID 0": context.get("runAsUser", pod.get("runAsUser")) == 0,
            "seccompProfile is not RuntimeDefault or Localhost": seccomp not in ("RuntimeDefault", "Localhost"),
            "uses a hostPort": any(port.get("hostPort") for port in container.get("ports", [])),
        }
        problems += [f"container {container.get('name')}: {what}" for what, bad in checks.items() if bad]
    return problems


def _schema_problem(document: Manifest, kubernetes_version: str) -> str | None:
    try:
        import kubernetes_validate
    except ImportError:
        raise CheckToolError(
            "kubernetes-validate is not installed; install the check extra: pip install -e '.[check]' (make setup does)"
        ) from None
    try:
        kubernetes_validate.validate(document, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as error:
        where = ".".join(str(part) for part in error.absolute_path)
        return f"{error.message} (at {where or 'the top'})"
    except kubernetes_validate.SchemaNotFoundError as error:
        return error.message
    return None


def _schemas(kubernetes_version: str) -> Any:
    """kubernetes-validate's strict schema folder for `kubernetes_version` (the newest patch release it ships)."""
    root = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    folders = sorted(
        (entry for entry in root.iterdir() if entry.name.startswith(f"v{kubernetes_version}.")),
        key=lambda entry: entry.name,
    )
    strict = [entry for entry in folders if entry.name.endswith("-local-strict")]
    if not strict:
        raise CheckToolError(f"kubernetes-validate has no schemas for Kubernetes {kubernetes_version}; upgrade it")
    return strict[-1]


@functools.cache
def _load_schema(kubernetes_version: str, name: str) -> Any:
    return parse_json((_schemas(kubernetes_version) / name).read_text())


def _walk(value: Any, schema: Any, where: str, definitions: dict[str, Any], problems: list[str]) -> None:
    reference = schema.get("$ref", "") if isinstance(schema, dict) else ""
    if reference:
        name = reference.rsplit("/", 1)[-1]
        if name == _QUANTITY_REF and isinstance(value, (str, int)) and not isinstance(value, bool):
            # A number is read as its JSON text (Quantity.UnmarshalJSON), then capped at 2^63-1 like any other.
            try:
                if abs(parse_quantity(str(value)).value) > INT64_MAX:
                    problems.append(f"{where} = {value} is beyond 2^63-1; the API server would cap it")
            except QuantityError as error:
                problems.append(f"{where}: {error}")
            return
        schema = {"format": "int32"} if name == _INT_OR_STRING_REF else definitions.get(name, {})
    if not isinstance(schema, dict):
        return
    if isinstance(value, int) and not isinstance(value, bool) and schema.get("format") in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[schema["format"]]
        if not low <= value <= high:
            problems.append(
                f"{where} = {value} is beyond {schema['format']} ({low} to {high}); the API server refuses it"
            )
    elif isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                _walk(item, properties[key], f"{where}.{key}", definitions, problems)
            elif isinstance(extra, dict):
                _walk(item, extra, f"{where}.{key}", definitions, problems)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(item, schema["items"], f"{where}[{index}]", definitions, problems)


def value_problems(document: Manifest, kubernetes_version: str = KUBERNETES_VERSION) -> list[str]:
    """Integers beyond their field's int32 or int64 and quantities the API server refuses, in `document` (a core
    object, or an InferenceService, checked as `predictor_pod` plus KServe's int32 fields), found by walking the
    object alongside its OpenAPI schema; what is not in a schema is not checked here (`_schema_problem` is)."""
    problems: list[str] = []
    kind = document.get("kind", "")
    if kind == "InferenceService":
        predictor = (document.get("spec") or {}).get("predictor") or {}
        for key in KSERVE_INT32_FIELDS:
            _walk(predictor.get(key), {"format": "int32"}, f"spec.predictor.{key}", {}, problems)
        document = predictor_pod(document)
        kind = "Pod"
    api_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", str(document.get("apiVersion", "")))
    try:
        schema = _load_schema(kubernetes_version, f"{kind.lower()}-{api_version}.json")
    except FileNotFoundError:
        return problems  # no schema: `_schema_problem` reports it
    definitions = _load_schema(kubernetes_version, "_definitions.json")["$defs"]
    _walk(document, schema, kind, definitions, problems)
    return problems


def policy_problems(document: Manifest) -> list[str]:
    """What tfxp's own policy refuses: a Namespace object for a namespace Kubernetes manages (applying it would
    relabel it, e.g. enforce the restricted Pod Security Standard on kube-system)."""
    name = (document.get("metadata") or {}).get("name")
    if document.get("kind") == "Namespace" and name in RESERVED_NAMESPACES:
        return [
            f"namespace {name} is managed by Kubernetes and tfxp never relabels it; set serving.namespace to a "
            "namespace of your own, e.g. tfxp-serving"
        ]
    return []


def _check_object(report: CheckReport, path: str, document: Manifest, kubernetes_version: str) -> None:
    kind, name = document.get("kind", "?"), document.get("metadata", {}).get("name", "?")
    where = f"{path}: {kind} {name}"
    pod = predictor_pod(document) if kind == "InferenceService" else None
    # Custom resources against their pinned CRD schema; an InferenceService also as its predictor's Pod.
    problems: list[str | None] = list(crd_problems(document)) if is_custom(document) else []
    if pod is not None or not is_custom(document):
        problems.append(_schema_problem(pod or document, kubernetes_version))
    problems += value_problems(document, kubernetes_version) + policy_problems(document)
    try:
        problems.append(name_problem(kind, name))
    except KeyError:
        problems.append(f"no name rule for kind {kind} in foundation.k8s.names.NAME_RULES")
    spec = _pod_spec(pod or document)
    problems += [f"restricted Pod Security Standard: {problem}" for problem in restricted_violations(spec or {})]
    failed = [problem for problem in problems if problem]
    for problem in failed:
        report.add("fail", f"{where}: {problem}")
    if not failed:
        checked = "schema, integers and quantities, name" + (", restricted pod security" if spec is not None else "")
        report.add("ok", f"{where} ({checked})")


def check_deploy_assets(
    out_dir: Path, checkov: str | None = None, kubernetes_version: str = KUBERNETES_VERSION
) -> CheckReport:
    """Checks the manifests `tfxp deploy-assets` wrote to `out_dir` (see the module docstring).

    Args:
        out_dir: The `--out` directory of `tfxp deploy-assets`.
        checkov: checkov's executable; None = `serving.checkov_scan.find_checkov()`.
        kubernetes_version: The Kubernetes version whose schemas the objects must satisfy.

    Raises:
        CheckToolError: kubernetes-validate or checkov is not installed.
    """
    report = CheckReport()
    documents = load_manifests(out_dir)
    if not documents:
        report.add("fail", f"no manifests under {out_dir}/kubernetes or {out_dir}/kserve")
    for path, document in documents:
        _check_object(report, path, document, kubernetes_version)
    scan = run_checkov(out_dir, "kubernetes", checkov)
    exceptions = checkov_exceptions()
    hard_failures = 0
    for finding in scan.failed:
        kind, reason = exceptions.get(finding.check_id, ("", ""))
        if kind == "soft-fail-on":
            report.add(
                "warn", f"checkov {finding.check_id} {finding.resource}: {finding.name} (soft failure: {reason})"
            )
        else:
            hard_failures += 1
            report.add("fail", f"checkov {finding.check_id} {finding.resource}: {finding.name}")
    skipped = sorted(check_id for check_id, (kind, _) in exceptions.items() if kind == "skip-check")
    report.add(
        "fail" if hard_failures else "ok",
        f"checkov {scan.version}: {scan.passed} passed, {len(scan.failed)} failed "
        f"({len(scan.failed) - hard_failures} of them soft failures); skipped by {CHECKOV_CONFIG.name}: "
        f"{', '.join(skipped) or 'none'}",
    )
    return report
