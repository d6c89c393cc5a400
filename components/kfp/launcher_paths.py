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
import re

from foundation.errors import TfxpError
from foundation.paths import is_remote, scheme, split_bucket, uri

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


# What open-source KFP takes as a pipeline root (kubeflow/pipelines `backend/src/v2/objectstore/config.go` at
# 7b70c7b: `bucketPattern` :118 is `(^[a-z][a-z0-9]+:///?)([^/?]+)(/[^?]*)?(\?.+)?$`, and `ParseBucketPathToConfig`
# :130-139 refuses any scheme but gs://, s3://, minio:// and mem://, gocloud's in-process store, which no other pod
# sees and the launcher has no local folder for, so tfxp refuses it too). The bucket's name must be one the store
# creates: Cloud Storage's rules (3-63 characters, or up to 222 in dot-separated parts of at most 63; lowercase
# letters, digits, `-`, `_`, `.`; a letter or digit at both ends; no `goog` prefix) and S3's, which MinIO follows
# (3-63 lowercase letters, digits, `.` and `-`; a letter or digit at both ends; no `..`; not an IP address). A
# control character or whitespace anywhere is refused: the pattern takes them, the stores do not take them in keys
# (Cloud Storage: no CR or LF in object names; S3: characters to avoid), and messages would print them.
_GCS_BUCKET = re.compile(r"[a-z0-9](?:[a-z0-9._-]{1,220})[a-z0-9]")
_S3_BUCKET = re.compile(r"[a-z0-9](?:[a-z0-9.-]{1,61})[a-z0-9]")
_IP_ADDRESS = re.compile(r"\d+\.\d+\.\d+\.\d+")


def _bucket_problem(kind: str, bucket: str) -> str | None:
    if kind == "gs":
        if _GCS_BUCKET.fullmatch(bucket) and bucket.startswith("goog"):
            return f"the bucket name {bucket!r} starts with goog, which Cloud Storage reserves"
        if _GCS_BUCKET.fullmatch(bucket) and max(len(part) for part in bucket.split(".")) <= 63:
            return None
        return (
            f"the bucket name {bucket!r} is not one Cloud Storage allows (3-63 lowercase letters, digits, -, _ or ., "
            "a letter or digit at both ends)"
        )
    if _S3_BUCKET.fullmatch(bucket) and ".." not in bucket and not _IP_ADDRESS.fullmatch(bucket):
        return None
    return (
        f"the bucket name {bucket!r} is not one S3 or MinIO allows (3-63 lowercase letters, digits, - or ., a "
        "letter or digit at both ends, not an IP address)"
    )


def pipeline_root_problem(root: str) -> str | None:
    """What keeps open-source KFP (or the store behind it) from using `root` as a pipeline root; None when
    nothing does. See the comment above for where each rule comes from.

    Example:
        pipeline_root_problem("minio://mlpipeline/v2/artifacts")  # None
        pipeline_root_problem("file:///tmp/root")  # "... file:// ..."
    """
    odd = next((character for character in root if not character.isprintable() or character.isspace()), None)
    if odd is not None:  # KFP's bucketPattern takes it (`[^/?]`, `[^?]*`), and every artifact URI would carry it
        return (
            f"it holds {odd!r}: KFP would put it into every artifact's URI and the launcher's local paths, where "
            "Cloud Storage refuses line breaks and S3 lists control characters and spaces among the characters to "
            "avoid in keys; use letters, digits, -, _, . and /"
        )
    kind = scheme(root)
    if kind not in LAUNCHER_MOUNTS:
        given = f"a {uri(kind)} URI" if kind else "a local path"
        return (
            f"it is {given}; KFP keeps artifacts only under {', '.join(map(uri, LAUNCHER_MOUNTS))} roots "
            "(backend/src/v2/objectstore/config.go:137)"
        )
    address = root.split("?", 1)[0]
    if address.startswith(uri(kind, "/")):
        return f"it has a third / after {uri(kind)}, so KFP finds no bucket name there ({uri(kind, 'bucket/path')})"
    bucket, key = split_bucket(address)
    problem = _bucket_problem(kind, bucket)
    if problem is not None:
        return problem
    parts = key.rstrip("/").split("/") if key.rstrip("/") else []
    if any(part in ("", ".", "..") for part in parts):
        return (
            f"its path {key!r} has an empty, . or .. part, which object stores keep as written while the launcher's "
            "local copies resolve it"
        )
    return None
