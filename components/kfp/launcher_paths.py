"""Where KFP's launcher puts an artifact's files inside the pod, and which URIs an executor opens itself.

Before a task, open-source KFP's launcher downloads every input artifact from the object store to a local
path derived from its URI, and after it uploads every output artifact from that path
(kubeflow/pipelines `backend/src/v2/component/launcher_v2.go`: `downloadArtifacts` :927-1004,
`uploadOutputArtifacts` :778-857, `LocalPathForURI` :1239-1253, at commit 7b70c7b):

    gs://bucket/key     → /gcs/bucket/key
    minio://bucket/key  → /minio/bucket/key
    s3://bucket/key     → /s3/bucket/key

TensorFlow and Beam in the tfxp image open `gs://` themselves (and local paths); `minio://` and `s3://` need
filesystem plugins the image does not have, so an executor must use the launcher's local copy for those.
`TFXP_LAUNCHER_ROOT` stands for `/` (default `/`): `tfxp run-spec` sets it so its emulated pods never write
under the machine's root.

Example:
    local_path_for_uri("minio://mlpipeline/v2/artifacts/p/r/Trainer/0d1c/model")
    # '/minio/mlpipeline/v2/artifacts/p/r/Trainer/0d1c/model'
"""

from __future__ import annotations

import os
import posixpath

from foundation.errors import TfxpError
from foundation.paths import is_remote, scheme, uri

KFP_DEFAULT_ROOT = "minio://mlpipeline/v2/artifacts"
"""Open-source KFP's pipeline root when neither the run nor the kfp-launcher ConfigMap names one
(`backend/src/v2/config/env.go:38`)."""
LAUNCHER_ROOT_ENV = "TFXP_LAUNCHER_ROOT"
"""Environment variable: the directory standing for `/` in the launcher's local paths (tests and run-spec)."""
# URI scheme → the launcher's local mount folder (launcher_v2.go:1239-1253).
LAUNCHER_MOUNTS = {"gs": "gcs", "minio": "minio", "s3": "s3"}
OCI_SCHEME = "oci"
# What TensorFlow's and Beam's filesystems open in the tfxp image without plugins (tensorflow-io is not in it).
DIRECT_SCHEMES = ("gs",)


class LauncherPathError(TfxpError, ValueError):
    """A URI the launcher has no local path for."""


def launcher_root() -> str:
    """The directory that stands for `/` in the launcher's local paths: `$TFXP_LAUNCHER_ROOT`, else `/`."""
    return os.environ.get(LAUNCHER_ROOT_ENV) or "/"


def local_path_for_uri(artifact_uri: str, root: str | None = None) -> str:
    """The launcher's local path for `artifact_uri` (`LocalPathForURI`), under `root` (default `launcher_root()`).

    Raises:
        LauncherPathError: `artifact_uri` has no scheme the launcher knows (the launcher skips such artifacts).
    """
    kind = scheme(artifact_uri)
    rest = artifact_uri[len(uri(kind)) :] if kind else artifact_uri
    if kind in LAUNCHER_MOUNTS:
        return posixpath.join(root or launcher_root(), LAUNCHER_MOUNTS[kind], rest)
    if kind == OCI_SCHEME:  # a modelcar's shared folder (launcher_v2.go:1249-1251)
        return posixpath.join(root or launcher_root(), "oci", rest.replace("/", "_"), "models")
    raise LauncherPathError(
        f"{artifact_uri}: KFP's launcher keeps local copies only of {', '.join(map(uri, LAUNCHER_MOUNTS))} and "
        f"{uri(OCI_SCHEME)} URIs "
        "(LocalPathForURI), and TensorFlow in the tfxp image opens none of this scheme; write the artifact under "
        "a gs://, minio:// or s3:// pipeline root"
    )


def opens_directly(artifact_uri: str) -> bool:
    """Whether an executor reads and writes `artifact_uri` itself: a local path, or a scheme TensorFlow's and
    Beam's filesystems handle in the tfxp image."""
    return not is_remote(artifact_uri) or scheme(artifact_uri) in DIRECT_SCHEMES
