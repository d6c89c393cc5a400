"""Versioned pipelines on Kubeflow Pipelines: upload a compiled spec as a pipeline version, list pipelines and versions.

A version's default name comes from the spec's content (`sha-` and 12 hex digits of the SHA-256 of the canonical
JSON of its documents), so uploading an unchanged spec again finds that version and does nothing, and a changed
spec gets a new version. A pipeline that does not exist yet is created empty first, so that its first version
carries that name too (KFP's one-step upload names the first version after the pipeline).

Example:
    client = KfpRunClient("http://localhost:8080", auth=KfpAuth.from_env())
    result = upload(client, Path("pipeline.yaml"))       # creates tfxp-digits / sha-1a2b3c4d5e6f
    upload(client, Path("pipeline.yaml")).uploaded       # False: that version is already there
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from pipeline.kubeflow.client.answers import require_id
from pipeline.kubeflow.client.auth import ui_url
from pipeline.kubeflow.client.runs import SubmitError, api_time, http_status
from pipeline.kubeflow.client.submit import KfpRunClient, read_package
from pipeline.kubeflow.compiler.spec import PipelineDoc

VERSION_PREFIX = "sha-"


def _normalized(value: Any) -> Any:
    # The API stores the spec as a protobuf Struct, whose numbers are doubles: 3 comes back as 3.0.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _normalized(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalized(item) for item in value]
    return value


def spec_digest(doc: PipelineDoc) -> str:
    """The SHA-256 (hex) of the canonical JSON of the spec's documents: the same for the same content, whatever
    the YAML's key order, comments or number spelling."""
    canonical = json.dumps(_normalized(doc.to_dicts()), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def default_version_name(doc: PipelineDoc) -> str:
    """`sha-` and the first 12 hex digits of `spec_digest`."""
    return VERSION_PREFIX + spec_digest(doc)[:12]


def doc_from_api(spec: Mapping[str, Any] | None) -> PipelineDoc | None:
    """The `pipeline_spec` the API returns for a version (the spec, or `{"pipeline_spec", "platform_spec"}`) as a
    `PipelineDoc`; None when it is missing or not a KFP spec."""
    if not spec:
        return None
    pipeline, platform = (
        (spec["pipeline_spec"], spec.get("platform_spec") or {}) if "pipeline_spec" in spec else (spec, {})
    )
    try:
        return PipelineDoc(
            pipeline_spec=json_format.ParseDict(_normalized(pipeline), pipeline_spec_pb2.PipelineSpec()),
            platform_spec=json_format.ParseDict(_normalized(platform), pipeline_spec_pb2.PlatformSpec()),
        )
    except json_format.ParseError:
        return None


@dataclass(frozen=True)
class PipelineSummary:
    """Attributes:
    pipeline_id: The KFP pipeline id.
    name: Its display name.
    created: When it was created (UTC), if known.
    description: Its description.
    """

    pipeline_id: str
    name: str
    created: datetime.datetime | None = None
    description: str = ""


@dataclass(frozen=True)
class PipelineVersion:
    """Attributes:
    pipeline_id: The pipeline's id.
    version_id: The version's id.
    name: The version's display name.
    created: When it was uploaded (UTC), if known.
    spec: The version's spec as the API returns it (only when read one by one).
    """

    pipeline_id: str
    version_id: str
    name: str
    created: datetime.datetime | None = None
    spec: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class UploadResult:
    """Attributes:
    pipeline: The pipeline's name.
    version: The version that holds the spec.
    uploaded: False when an identical version was already there (nothing was sent).
    created_pipeline: Whether the pipeline itself was new.
    url: The version's page in the KFP UI.
    """

    pipeline: str
    version: PipelineVersion
    uploaded: bool
    created_pipeline: bool
    url: str


def _version(version: Any, client: KfpRunClient, endpoint: str) -> PipelineVersion:
    return PipelineVersion(
        pipeline_id=require_id(version.pipeline_id, "pipeline_id", endpoint, client.host),
        version_id=require_id(version.pipeline_version_id, "pipeline_version_id", endpoint, client.host),
        name=str(version.display_name or version.name or ""),
        created=api_time(version.created_at),
        spec=version.pipeline_spec,
    )


def _name_filter(name: str) -> str:
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name", "stringValue": name}]})


def version_url(client: KfpRunClient, version: PipelineVersion) -> str:
    """The version's page in the KFP UI."""
    return ui_url(client.host, f"pipelines/details/{version.pipeline_id}/version/{version.version_id}")


def _in_namespace(client: KfpRunClient) -> str:
    return f" in namespace {client.namespace!r}" if client.namespace else ""


def _namespace_option(client: KfpRunClient) -> str:
    return f" --namespace {client.namespace}" if client.namespace else ""


def pipeline_id(client: KfpRunClient, name: str) -> str | None:
    """The id of the pipeline called `name` in the client's namespace (multi-user KFP), or None.

    kfp's `Client.get_pipeline_id(name)` lists pipelines without a namespace (kfp 2.16,
    `kfp/client/client.py:506`), which multi-user KFP answers with the shared pipelines only; so the lookup is
    ListPipelines with the namespace and a name filter (`backend/api/v2beta1/pipeline.proto:262`). The API lists
    exactly the pipelines of the namespace asked for, shared ones (no namespace) only when none is given, and
    ignores the namespace in single-user mode (`backend/src/apiserver/server/pipeline_server.go:432`,
    `ReplaceNamespace`; `backend/src/apiserver/storage/pipeline_store.go:231`).

    Raises:
        SubmitError: several pipelines have that name, or as `KfpRunClient.call`.
    """
    api = client.api()
    response = client.call(
        f"looking up pipeline {name}",
        lambda: api.list_pipelines(filter=_name_filter(name), namespace=client.namespace, page_size=2),
    )
    found = response.pipelines or []
    if len(found) > 1:
        raise SubmitError(
            f"several pipelines are named {name!r}{_in_namespace(client)} at {client.host}, and tfxp finds a "
            "pipeline by its name: rename or delete all but one in the KFP UI, or use another --name (see `tfxp "
            f"pipeline list --host {client.host}{_namespace_option(client)}`)"
        )
    return (
        require_id(found[0].pipeline_id, "pipeline_id", "GET /apis/v2beta1/pipelines", client.host) if found else None
    )


def require_pipeline(client: KfpRunClient, name: str) -> str:
    """The id of the pipeline called `name` in the client's namespace.

    Raises:
        SubmitError: no such pipeline (naming the way to upload one), or as `pipeline_id`.
    """
    found = pipeline_id(client, name)
    if found is None:
        options = f"--host {client.host}{_namespace_option(client)}"
        raise SubmitError(
            f"no pipeline named {name!r}{_in_namespace(client)} at {client.host}; upload it with `tfxp pipeline "
            f"upload pipeline.yaml {options} --name {name}` or list them with `tfxp pipeline list {options}`"
        )
    return found


def list_pipelines(client: KfpRunClient, limit: int = 20) -> list[PipelineSummary]:
    """The newest pipelines, newest first.

    Raises:
        SubmitError: as `KfpRunClient.call`.
    """
    api = client.api()
    response = client.call(
        "listing pipelines",
        lambda: api.list_pipelines(page_size=limit, sort_by="created_at desc", namespace=client.namespace),
    )
    return [
        PipelineSummary(
            pipeline_id=str(pipeline.pipeline_id),
            name=str(pipeline.display_name or pipeline.name or ""),
            created=api_time(pipeline.created_at),
            description=str(pipeline.description or ""),
        )
        for pipeline in response.pipelines or []
    ]


def list_pipeline_versions(
    client: KfpRunClient, pipeline_id: str, limit: int = 20, name: str | None = None
) -> list[PipelineVersion]:
    """A pipeline's versions, newest first; only those called `name` when given.

    Raises:
        SubmitError: as `KfpRunClient.call`.
    """
    api = client.api()
    response = client.call(
        "listing pipeline versions",
        lambda: api.list_pipeline_versions(
            pipeline_id, page_size=limit, sort_by="created_at desc", filter=_name_filter(name) if name else None
        ),
    )
    endpoint = f"GET /apis/v2beta1/pipelines/{pipeline_id}/versions"
    return [_version(version, client, endpoint) for version in response.pipeline_versions or []]


def get_version(client: KfpRunClient, pipeline: str, version: str | None = None) -> PipelineVersion:
    """A version of the pipeline called `pipeline`, with its spec: the one called `version`, or the newest.

    Raises:
        SubmitError: no such pipeline, no such version (listing the newest ones), or as `KfpRunClient.call`.
    """
    found_id = require_pipeline(client, pipeline)
    versions = list_pipeline_versions(client, found_id, limit=1, name=version)
    if not versions:
        newest = ", ".join(item.name for item in list_pipeline_versions(client, found_id, limit=5)) or "none"
        wanted = f"no version {version!r}" if version else "no versions"
        raise SubmitError(
            f"pipeline {pipeline!r} has {wanted} at {client.host} (newest: {newest}); "
            f"see `tfxp pipeline versions {pipeline}` or upload one with `tfxp pipeline upload`"
        )
    api = client.api()
    chosen = versions[0]
    full = client.call(
        f"reading version {chosen.name} of pipeline {pipeline}",
        lambda: api.get_pipeline_version(found_id, chosen.version_id),
    )
    return _version(full, client, f"GET /apis/v2beta1/pipelines/{found_id}/versions/{chosen.version_id}")


def _held_version(
    client: KfpRunClient, found_id: str, pipeline: str, version: str, digest: str, *, by_content: bool
) -> PipelineVersion | None:
    # The version called `version` when it already holds this spec; a content name (sha-…) implies the content,
    # a chosen name does not, so that spec is read and compared.
    existing = list_pipeline_versions(client, found_id, limit=1, name=version)
    if not existing:
        return None
    if by_content:
        return existing[0]
    api = client.api()
    held = client.call(
        f"reading version {version} of pipeline {pipeline}",
        lambda: _version(
            api.get_pipeline_version(found_id, existing[0].version_id),
            client,
            f"GET /apis/v2beta1/pipelines/{found_id}/versions/{existing[0].version_id}",
        ),
    )
    stored = doc_from_api(held.spec)
    if stored is None or spec_digest(stored) != digest:
        raise SubmitError(
            f"pipeline {pipeline!r} already has a version {version!r} with a different spec; "
            "choose another --version, or leave it out to name the version by content"
        )
    return held


def _create_pipeline(client: KfpRunClient, name: str) -> str:
    # Empty, so that the first version is uploaded (and named) like every later one.
    import kfp_server_api

    api = client.api()
    body = kfp_server_api.V2beta1Pipeline(display_name=name, namespace=client.namespace)
    created = client.call(f"creating pipeline {name}", lambda: api.pipelines.pipeline_service_create_pipeline(body))
    return require_id(created.pipeline_id, "pipeline_id", "POST /apis/v2beta1/pipelines", client.host)


def _upload_version(
    client: KfpRunClient, package: Path, found_id: str, pipeline: str, version: str, digest: str
) -> PipelineVersion:
    api = client.api()

    def send() -> Any:
        return api.upload_pipeline_version(
            str(package), version, pipeline_id=found_id, description=f"tfxp spec sha256:{digest}"
        )

    try:
        uploaded = client.call(f"uploading version {version} of pipeline {pipeline}", send)
        return _version(uploaded, client, "POST /apis/v2beta1/pipelines/upload_version")
    except SubmitError as error:
        if error.__cause__ is not None and http_status(error.__cause__) == 409:
            raise SubmitError(
                f"pipeline {pipeline!r} already has a version {version!r} (it appeared while uploading); "
                "choose another --version, or leave it out to name the version by content"
            ) from None
        raise


def upload(client: KfpRunClient, package: Path, *, name: str | None = None, version: str | None = None) -> UploadResult:
    """Uploads a compiled pipeline as a version of the pipeline `name`, creating the pipeline when it is new.

    Args:
        client: The client.
        package: The `.yaml` pipeline from `tfxp compile`.
        name: The pipeline's name; default the spec's `pipelineInfo.name`.
        version: The version's name; default `sha-<12 hex digits of the spec's content>`.

    Returns:
        What was uploaded, or the existing version that already holds this spec (`uploaded=False`).

    Raises:
        SubmitError: a bad file, a version of that name with a different spec, or as `KfpRunClient.call`.
    """
    doc = read_package(package)
    name = (name or doc.pipeline_spec.pipeline_info.name).strip()
    if not name:
        raise SubmitError(f"{package} has no pipeline name; pass --name")
    digest = spec_digest(doc)
    version_name = version or VERSION_PREFIX + digest[:12]
    found_id = pipeline_id(client, name)
    if found_id is not None:
        held = _held_version(client, found_id, name, version_name, digest, by_content=version is None)
        if held is not None:
            return UploadResult(name, held, uploaded=False, created_pipeline=False, url=version_url(client, held))
    created = found_id is None
    found_id = _create_pipeline(client, name) if found_id is None else found_id
    uploaded = _upload_version(client, package, found_id, name, version_name, digest)
    return UploadResult(name, uploaded, uploaded=True, created_pipeline=created, url=version_url(client, uploaded))
