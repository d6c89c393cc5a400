"""Reading artifact files through `tf.io.gfile`: local paths and bucket URIs (`gs://`, `s3://`, `ram://`) alike.

On Kubeflow the pipeline root is a bucket, so every artifact a reader opens is a `gs://` URI that `pathlib` would
take for a local folder called `gs:` (and find empty). The report's readers (`components.report`) and the edge
summary read through these functions instead; a local path is just another URI to `tf.io.gfile`.

TensorFlow is imported by the first call, not by importing this module: the CLI imports the report's modules on
paths that must not load it. Errors are the standard library's, so callers and the page keep one vocabulary:
a missing file is `FileNotFoundError`, any other failure to read is `OSError`.

Example:
    metrics = json.loads(read_text("gs://bucket/root/Trainer/model/5/training_metrics.json"))
    splits = [path for path in children("gs://bucket/root/StatisticsGen/statistics/3", "Split-*") if is_dir(path)]
"""

from __future__ import annotations

import errno
import fnmatch
from typing import Any


def _gfile() -> Any:
    import tensorflow as tf

    return tf.io.gfile


def read_bytes(path: str) -> bytes:
    """The file's contents.

    Raises:
        FileNotFoundError: there is no such file.
        OSError: it cannot be read (the file system's message).
    """
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(path, "rb") as handle:
            return bytes(handle.read())
    except tf.errors.NotFoundError:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
    except tf.errors.OpError as error:
        raise OSError(f"cannot read {path}: {error.message}") from None


def read_text(path: str) -> str:
    """The file's contents as UTF-8 text; raises as `read_bytes` (and `UnicodeDecodeError` for other bytes)."""
    return read_bytes(path).decode("utf-8")


def is_dir(path: str) -> bool:
    """Whether `path` is a directory (on a bucket: a prefix with objects under it, or a directory marker)."""
    return bool(_gfile().isdir(path))


def is_file(path: str) -> bool:
    """Whether `path` exists and is not a directory."""
    gfile = _gfile()
    return bool(gfile.exists(path)) and not gfile.isdir(path)


def children(directory: str, pattern: str = "*") -> list[str]:
    """The paths in `directory` whose names match `pattern` (fnmatch), sorted; [] when it does not exist.

    Only the names are matched, so a directory whose path holds `[` or `*` is not read as a pattern.
    """
    import tensorflow as tf

    root = directory.rstrip("/")
    try:
        names = tf.io.gfile.listdir(root)
    except tf.errors.NotFoundError:
        return []
    # On a bucket listdir names a subdirectory with a trailing "/".
    return sorted(f"{root}/{name.rstrip('/')}" for name in names if fnmatch.fnmatchcase(name.rstrip("/"), pattern))


def tree_bytes(path: str) -> int | None:
    """The size of the files under the directory `path`; None when it is not a directory."""
    gfile = _gfile()
    if not gfile.isdir(path):
        return None
    root = path.rstrip("/")
    return sum(
        int(gfile.stat(f"{parent.rstrip('/')}/{name}").length)
        for parent, _, names in gfile.walk(root)
        for name in names
    )
