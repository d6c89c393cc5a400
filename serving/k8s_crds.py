"""The custom resources of the rollout assets, checked against their CRDs' pinned schemas, strictly.

The Gateway API routes, KServe's InferenceService, Argo Rollouts' Rollout and AnalysisTemplate and Flagger's Canary
and MetricTemplate are validated against the `openAPIV3Schema` of the CRD version tfxp renders, pinned with its
repository and commit in `tests/data/crds/` (its README names each; `TFXP_CRD_SCHEMAS` points elsewhere). Two passes:

- JSON Schema (jsonschema, which kubernetes-validate installs): types, enums, required fields, bounds, patterns;
- every field must be one the schema declares (`unknown_fields`). A structural schema does not forbid unknown
  fields itself: the API server prunes them silently, so a misspelt `canaryTrafficPercnt` would be dropped, not
  refused. Where a schema keeps unknown fields (`x-kubernetes-preserve-unknown-fields`) or maps any key
  (`additionalProperties`), anything goes, as on the cluster. A CRD leaves `metadata` open; tfxp renders only
  `OBJECT_META_FIELDS` there. Integers of an `int32`/`int64` field are checked against its range as well.

Example:
    crd_problems({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "spec": {"rulez": []}, ...})
    # ['spec.rulez is not a field of HTTPRoute gateway.networking.k8s.io/v1 (tests/data/crds/...)']
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from foundation.bounded import parse_json
from foundation.k8s.quantity import INT32_MAX, INT64_MAX

CRD_SCHEMA_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "crds"
# (apiVersion, kind) → the pinned schema's file under the schema folder.
CRD_SCHEMAS: dict[tuple[str, str], str] = {
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "gateway.networking.k8s.io_v1_httproute.json",
    ("gateway.networking.k8s.io/v1", "GRPCRoute"): "gateway.networking.k8s.io_v1_grpcroute.json",
    ("serving.kserve.io/v1beta1", "InferenceService"): "serving.kserve.io_v1beta1_inferenceservice.json",
    ("argoproj.io/v1alpha1", "Rollout"): "argoproj.io_v1alpha1_rollout.json",
    ("argoproj.io/v1alpha1", "AnalysisTemplate"): "argoproj.io_v1alpha1_analysistemplate.json",
    ("flagger.app/v1beta1", "Canary"): "flagger.app_v1beta1_canary.json",
    ("flagger.app/v1beta1", "MetricTemplate"): "flagger.app_v1beta1_metrictemplate.json",
}
OBJECT_META_FIELDS = frozenset({"name", "namespace", "labels", "annotations"})
_RANGES = {"int32": (-(2**31), INT32_MAX), "int64": (-(2**63), INT64_MAX)}


def schema_dir() -> Path:
    """Where the pinned schemas are: `$TFXP_CRD_SCHEMAS`, else the repository's `tests/data/crds`."""
    return Path(os.environ.get("TFXP_CRD_SCHEMAS") or CRD_SCHEMA_DIR)


def is_custom(document: dict[str, Any]) -> bool:
    """Whether `document` is of a custom kind with a pinned schema."""
    return (document.get("apiVersion"), document.get("kind")) in CRD_SCHEMAS


@functools.cache
def _schema(path: Path) -> dict[str, Any]:
    return parse_json(path.read_text())


def crd_problems(document: dict[str, Any]) -> list[str]:
    """Why the pinned schema of `document`'s kind refuses it, or would drop one of its fields (empty: accepted).

    Raises:
        KeyError: a kind without a pinned schema (`is_custom` is false).
    """
    import jsonschema  # kubernetes-validate's dependency (the `check` extra)

    kind = f"{document.get('kind')} {document.get('apiVersion')}"
    path = schema_dir() / CRD_SCHEMAS[(document.get("apiVersion", ""), document.get("kind", ""))]
    if not path.is_file():
        return [f"no pinned schema for {kind} at {path}; set TFXP_CRD_SCHEMAS to tfxp's tests/data/crds"]
    schema = _schema(path)
    problems = [
        f"{'.'.join(str(part) for part in error.absolute_path) or 'the top'}: {error.message}"
        for error in jsonschema.Draft7Validator(schema).iter_errors(document)
    ]
    metadata = document.get("metadata") or {}
    problems += [f"metadata.{key} is not rendered by tfxp's rule" for key in sorted(set(metadata) - OBJECT_META_FIELDS)]
    body = {key: value for key, value in document.items() if key != "metadata"}
    problems += [f"{where} ({kind}, {path.name})" for where in unknown_fields(body, schema, "")]
    return problems


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    properties = dict(schema.get("properties", {}))
    for key in ("allOf", "anyOf", "oneOf"):
        for part in schema.get(key, []):
            properties.update(part.get("properties", {}))
    return properties


def unknown_fields(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    """The fields of `value` that `schema` does not declare, and integers beyond their format's range."""
    if isinstance(value, int) and not isinstance(value, bool) and schema.get("format") in _RANGES:
        low, high = _RANGES[schema["format"]]
        return [] if low <= value <= high else [f"{where} = {value} is beyond {schema['format']}"]
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [
            item for i, entry in enumerate(value) for item in unknown_fields(entry, schema["items"], f"{where}[{i}]")
        ]
    if not isinstance(value, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    properties, extra = _properties(schema), schema.get("additionalProperties")
    problems = []
    for key, item in value.items():
        path = f"{where}.{key}" if where else key
        if key in properties:
            problems += unknown_fields(item, properties[key], path)
        elif isinstance(extra, dict):
            problems += unknown_fields(item, extra, path)
        elif extra is not True:
            problems.append(f"{path} is not a field of the schema")
    return problems
