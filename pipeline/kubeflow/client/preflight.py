"""What `tfxp submit` and `tfxp schedule create` decide and check before they create anything on Kubeflow
Pipelines: the run's pipeline root, and whether the server can run the spec's exit handler.

The pipeline root. Open-source KFP's root DAG driver takes it from the run's runtime config
(`backend/src/v2/driver/root_dag.go:97`, `opts.RuntimeConfig.GetGcsOutputDirectory()`, which the API server fills
from the run's `runtime_config.pipeline_root`, `backend/src/apiserver/template/template.go:187`), else from the
`defaultPipelineRoot` key of the `kfp-launcher` ConfigMap in the run's namespace, else
`minio://mlpipeline/v2/artifacts` (`root_dag.go:109-113`, `backend/src/v2/config/env.go:37-39,85-92`; kubeflow/pipelines
at 7b70c7b). The compiled spec's `defaultPipelineRoot` is not read there, so tfxp sends it as the run's root.

The server's version. The API server's `/apis/v2beta1/healthz` answers `tag_name` (its release, e.g. `2.5.0`; the
image's `TAG_NAME`, "unknown" when it was built without one: `backend/src/apiserver/main.go:556-582`). KFP 2.5 and
older refuse a task-final-status input, which tfxp's exit handler has ("task final status not supported yet",
`backend/src/v2/compiler/argocompiler/dag.go:630` at 2.5.0); the driver resolves it from 2.14.0, the next backend
release (`backend/src/v2/driver/resolve.go:412`, kubeflow/pipelines#11953).

Example:
    root, notes = run_pipeline_root(doc.pipeline_spec, override=None, source="pipeline.yaml")
    notes += check_exit_handler_support(doc.pipeline_spec, ServerInfo.from_healthz(healthz), "http://kfp:8080")
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kfp.pipeline_spec import pipeline_spec_pb2

from components.kfp.launcher_paths import KFP_DEFAULT_ROOT, pipeline_root_problem
from foundation.paths import is_remote, scheme, uri
from pipeline.kubeflow.client.runs import SubmitError
from pipeline.kubeflow.compiler.spec import exit_handler_tasks

# KFP's last resort when neither the run nor the kfp-launcher ConfigMap names a root (backend/src/v2/config/env.go:38).
# The first KFP backend release whose driver resolves a task-final-status input (see the module docstring).
MIN_EXIT_HANDLER_VERSION = (2, 14)
ROOT_OPTION = "--pipeline-root"
ROOT_SPEC_KEY = "defaultPipelineRoot"

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+.].*)?")


def parse_version(tag: str) -> tuple[int, int, int] | None:
    """The release in a KFP `tag_name`, or None when it names none (`unknown`, empty, a branch).

    Example:
        parse_version("2.5.0")  # (2, 5, 0)
        parse_version("v2.14.0-rc.1")  # (2, 14, 0)
        parse_version("unknown")  # None
    """
    match = _VERSION.fullmatch(tag.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


@dataclass(frozen=True)
class ServerInfo:
    """What the KFP API server says about itself on `/apis/v2beta1/healthz`.

    Attributes:
        tag_name: Its release as it reports it; "" when the answer has none.
        commit_sha: The commit it was built from; "" when the answer has none.
        multi_user: Whether it runs in multi-user mode.
    """

    tag_name: str = ""
    commit_sha: str = ""
    multi_user: bool = False

    @classmethod
    def from_healthz(cls, answer: Mapping[str, Any]) -> ServerInfo:
        """Reads the health endpoint's JSON object (missing or non-text fields count as unknown)."""
        tag, commit = answer.get("tag_name"), answer.get("commit_sha")
        return cls(
            tag_name=tag if isinstance(tag, str) else "",
            commit_sha=commit if isinstance(commit, str) else "",
            multi_user=answer.get("multi_user") is True,
        )

    @property
    def version(self) -> tuple[int, int, int] | None:
        """The release, or None when `tag_name` names none."""
        return parse_version(self.tag_name)


def run_pipeline_root(
    spec: pipeline_spec_pb2.PipelineSpec | None, override: str | None, source: str
) -> tuple[str | None, list[str]]:
    """The pipeline root to send as the run's `runtime_config.pipeline_root`: `override`, else the spec's
    `defaultPipelineRoot`.

    Args:
        spec: The pipeline spec the run runs; None when it is not known (the API returned no spec for a version).
        override: `--pipeline-root`; None or empty = the spec's.
        source: Where the spec comes from, for messages (`pipeline.yaml`, `pipeline P, version V`).

    Returns:
        The root (None: send none, so KFP falls back as the module docstring says) and warnings.

    Raises:
        SubmitError: the root is a local path, which the run's pods cannot reach.
    """
    override = (override or "").strip()
    compiled = spec.default_pipeline_root.strip() if spec is not None else ""
    root = override or compiled
    if not root:
        known = f"{source} has no {ROOT_SPEC_KEY}" if spec is not None else f"the spec of {source} is not known"
        return None, [
            f"{known} and no {ROOT_OPTION} was given, so the run names no pipeline root: KFP then uses the "
            f"{ROOT_SPEC_KEY} of the kfp-launcher ConfigMap in the run's namespace, else {KFP_DEFAULT_ROOT} "
            f"(the cluster's MinIO, which tfxp's entrypoint reads through the launcher's local copies but Beam on "
            f"Dataflow cannot); pass {ROOT_OPTION} gs://bucket/root, recompile with kubeflow.pipeline_root set, "
            f"or set the ConfigMap's {ROOT_SPEC_KEY} to a bucket"
        ]
    shown = root if root.isprintable() else repr(root)  # a line break or ESC is refused below, not printed
    given = f"{ROOT_OPTION} {shown}" if override else f"{ROOT_SPEC_KEY} {shown} of {source}"
    fix = (
        f"pass {ROOT_OPTION} with a bucket URL (e.g. gs://bucket/tfxp/root), or recompile with "
        f"kubeflow.pipeline_root set to one (it becomes the spec's {ROOT_SPEC_KEY})"
    )
    if not is_remote(root):
        raise SubmitError(
            f"the pipeline root ({given}) is a local path, which the run's pods on Kubeflow cannot reach; {fix}"
        )
    problem = pipeline_root_problem(root)
    if problem is not None:
        raise SubmitError(f"the pipeline root ({given}) is not one KFP can use: {problem}; {fix}")
    notes = []
    compiled_scheme = scheme(compiled or KFP_DEFAULT_ROOT)
    if override and is_remote(override) and scheme(override) != compiled_scheme:
        notes.append(
            f"{ROOT_OPTION} {override} is a {uri(scheme(override))} root, but {source} was compiled for "
            f"{uri(compiled_scheme)} (its volume for the launcher's artifact copies, kubeflow.artifact_volume_size, is "
            f"mounted at /{compiled_scheme if compiled_scheme != 'gs' else 'gcs'}): the copies would land on the "
            f"node's disk; recompile with kubeflow.pipeline_root={override}"
        )
    return root.rstrip("/"), notes


def check_exit_handler_support(spec: pipeline_spec_pb2.PipelineSpec, server: ServerInfo, host: str) -> list[str]:
    """Whether the server can run the spec's exit handler (nothing to check when it has none).

    Args:
        spec: The pipeline spec the run runs.
        server: What the server's health endpoint said.
        host: The server, for messages.

    Returns:
        Warnings: the server's version is unknown, so the exit handler may fail there.

    Raises:
        SubmitError: the server's version is known and older than 2.14.
    """
    handlers = exit_handler_tasks(spec)
    if not handlers:
        return []
    tasks = ", ".join(handlers)
    minimum = _version_text(MIN_EXIT_HANDLER_VERSION)
    version = server.version
    if version is None:
        reported = repr(server.tag_name) if server.tag_name else "none"
        return [
            f"Kubeflow Pipelines at {host} did not say its version (healthz tag_name: {reported}), so tfxp cannot "
            f"tell whether it runs the exit handler ({tasks}, from kubeflow.notify_url); it needs KFP "
            f'{minimum} or newer (older backends refuse the run with "task final status not supported yet"); '
            "going on"
        ]
    if version[:2] < MIN_EXIT_HANDLER_VERSION:
        raise SubmitError(
            f"Kubeflow Pipelines at {host} is version {_version_text(version)} (healthz tag_name), which cannot run "
            f"the pipeline's exit handler ({tasks}, compiled from kubeflow.notify_url): KFP 2.5 and older refuse "
            f'its final-status input ("task final status not supported yet") and tfxp needs KFP {minimum} or '
            "newer for exit handlers; upgrade KFP, or recompile without kubeflow.notify_url"
        )
    return []
