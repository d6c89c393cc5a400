"""Paths that may be local or on a bucket: the one scheme rule, and the file access every reader and writer shares.

A path is remote when it starts with a URI scheme and `://` (`gs://bucket/key`, `minio://…`, `s3://…`,
`ram://…`); anything else is a local path. Remote paths go through `tf.io.gfile`, local ones through the standard
library, so a local run never imports TensorFlow for a file and a Kubeflow run reads `gs://` the same way.
Errors are the standard library's either way: a missing file is `FileNotFoundError`, any other failure `OSError`.

Host URLs (`http://host:port` endpoints) are another concept, parsed in `serving.address` and
`pipeline.kubeflow.client.auth`. `tests/project/test_one_rule.py` keeps scheme tests (`"://"`, `"gs://"`) in this
module.

Only the standard library is imported here; TensorFlow is imported by the first call on a remote path.

Example:
    scheme("gs://bucket/data")  # "gs"
    split_bucket("minio://mlpipeline/v2/artifacts")  # ("mlpipeline", "v2/artifacts")
    labels = read_text(join(data_path, "labels.txt"))  # local or gs://
"""

from __future__ import annotations

import errno
import fnmatch
import os
import posixpath
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

_SEPARATOR = "://"
# RFC 3986 scheme syntax, then "://".
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme(path: str | Path) -> str:
    """The URI scheme of `path` as written (`gs`, `minio`, `s3`: TensorFlow's file systems and KFP's launcher
    match it case-sensitively); "" for a local path.

    Example:
        scheme("gs://bucket/x")  # "gs"
        scheme("data/digits")  # ""
    """
    found = _SCHEME.match(str(path))
    return found.group(1) if found else ""


def is_remote(path: str | Path) -> bool:
    """Whether `path` is a bucket URI (`gs://`, `s3://`, ...) read through `tf.io.gfile`, not a local path.

    Example:
        is_remote("gs://bucket/data")  # True
        is_remote("data/digits")  # False
    """
    return bool(scheme(path))


def uri(scheme_name: str, rest: str = "") -> str:
    """`<scheme>://<rest>`: a URI, or with no `rest` the prefix messages name (`uri("gs")` is `gs://`)."""
    return f"{scheme_name}{_SEPARATOR}{rest}"


def split_bucket(path: str) -> tuple[str, str]:
    """The bucket and the key of a remote path: `("bucket", "a/b")` for `gs://bucket/a/b`.

    Raises:
        ValueError: `path` is local.
    """
    if not is_remote(path):
        raise ValueError(f"{path} is a local path, not a bucket URI such as gs://bucket/key")
    bucket, _, key = path.split(_SEPARATOR, 1)[1].partition("/")
    return bucket, key


def join(base: str | Path, *parts: str) -> str:
    """`base/part/...` with `/` whatever the platform, keeping a URI's scheme (`gs://b` + `x` is `gs://b/x`)."""
    text = str(base)
    return posixpath.join(text.rstrip("/") if text.rstrip("/") else text, *parts)


def name_of(path: str | Path) -> str:
    """The last element of `path`, ignoring a trailing `/` (`gs://b/m/5/` → `5`)."""
    return str(path).rstrip("/").rsplit("/", 1)[-1]


def parent_of(path: str | Path) -> str:
    """`path` without its last element, ignoring a trailing `/` (`gs://b/m/5` → `gs://b/m`)."""
    return str(path).rstrip("/").rsplit("/", 1)[0]


# File access: local paths through the standard library, remote ones through tf.io.gfile (imported then).


def gfile() -> Any:
    """`tf.io.gfile`, imported on first use."""
    import tensorflow as tf

    return tf.io.gfile


def exists(path: str | Path) -> bool:
    """Whether `path` exists (on a bucket: an object, or a prefix with objects under it)."""
    return bool(gfile().exists(str(path))) if is_remote(path) else os.path.exists(path)


def is_dir(path: str | Path) -> bool:
    """Whether `path` is a directory (on a bucket: a prefix with objects under it, or a directory marker)."""
    return bool(gfile().isdir(str(path))) if is_remote(path) else os.path.isdir(path)


def is_file(path: str | Path) -> bool:
    """Whether `path` exists and is not a directory."""
    return exists(path) and not is_dir(path)


def list_dir(path: str | Path) -> list[str]:
    """The names directly inside the directory `path` (a bucket's trailing `/` on folders removed), unsorted.

    Raises:
        FileNotFoundError: `path` does not exist.
        OSError: it cannot be listed.
    """
    text = str(path)
    if not is_remote(text):
        return os.listdir(text)
    import tensorflow as tf

    try:
        return [name.rstrip("/") for name in tf.io.gfile.listdir(text)]
    except tf.errors.NotFoundError:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", text) from None
    except tf.errors.OpError as error:
        raise OSError(f"cannot list {text}: {error.message}") from None


def children(directory: str, pattern: str = "*") -> list[str]:
    """The paths in `directory` whose names match `pattern` (fnmatch), sorted; [] when it does not exist.

    Only the names are matched, so a directory whose path holds `[` or `*` is not read as a pattern.
    """
    root = directory.rstrip("/")
    try:
        names = list_dir(root)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(f"{root}/{name}" for name in names if fnmatch.fnmatchcase(name, pattern))


def read_bytes(path: str | Path) -> bytes:
    """The file's contents.

    Raises:
        FileNotFoundError: there is no such file.
        OSError: it cannot be read (the file system's message).
    """
    text = str(path)
    if not is_remote(text):
        with open(text, "rb") as handle:
            return handle.read()
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(text, "rb") as handle:
            return bytes(handle.read())
    except tf.errors.NotFoundError:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", text) from None
    except tf.errors.OpError as error:
        raise OSError(f"cannot read {text}: {error.message}") from None


def read_text(path: str | Path) -> str:
    """The file's contents as UTF-8 text; raises as `read_bytes` (and `UnicodeDecodeError` for other bytes)."""
    return read_bytes(path).decode("utf-8")


def write_text(path: str | Path, text: str) -> None:
    """Writes `text` (UTF-8) to the file `path`, replacing it; a local path's directory must exist."""
    if is_remote(path):
        with gfile().GFile(str(path), "w") as handle:
            handle.write(text)
    else:
        Path(path).write_text(text, encoding="utf-8")


def replace_text(path: str | Path, text: str) -> None:
    """Replaces the file `path` with `text` (UTF-8) so that a reader sees the old file or the new one, never half:
    locally a temporary file beside it, flushed to disk and renamed over it (its folder is created); on a bucket
    one object written whole."""
    if is_remote(path):
        write_text(path, text)
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, target)


def makedirs(path: str | Path) -> None:
    """Makes the directory `path` and its parents; nothing when it exists."""
    if is_remote(path):
        gfile().makedirs(str(path))
    else:
        os.makedirs(path, exist_ok=True)


def files_under(directory: str) -> list[str]:
    """Every file under `directory`, as sorted paths relative to it."""
    walk = gfile().walk(directory) if is_remote(directory) else os.walk(directory)
    prefix = len(directory.rstrip("/")) + 1
    return sorted(f"{parent.rstrip('/')}/{name}"[prefix:] for parent, _, names in walk for name in names)


def copy_file(source: str, target: str) -> None:
    """Copies one file, making the target's directory; local paths or buckets."""
    if is_remote(source) or is_remote(target):
        gfile().makedirs(parent_of(target))
        gfile().copy(source, target, overwrite=True)
    else:
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        shutil.copyfile(source, target)


def copy_tree(source: str, target: str, merge: bool = False) -> None:
    """Copies the directory `source` to `target` (created; local paths or buckets). Locally an existing `target`
    is an error unless `merge` (buckets have no directories: copying there always merges)."""
    source = source.rstrip("/")
    if not (is_remote(source) or is_remote(target)):
        shutil.copytree(source, target, dirs_exist_ok=merge)
        return
    walk = gfile().walk(source) if is_remote(source) else os.walk(source)
    for parent, _, names in walk:
        relative = parent.rstrip("/")[len(source) :].lstrip("/")
        destination = join(target, relative).rstrip("/") if relative else target.rstrip("/")
        if is_remote(destination):
            gfile().makedirs(destination)
        else:
            os.makedirs(destination, exist_ok=True)
        for name in names:
            copy_file(f"{parent.rstrip('/')}/{name}", f"{destination}/{name}")


def remove_tree(path: str) -> None:
    """Removes the directory `path` and everything under it, if it is there."""
    if is_remote(path):
        if gfile().exists(path):
            gfile().rmtree(path)
    elif os.path.exists(path):
        shutil.rmtree(path, ignore_errors=True)


def tree_bytes(path: str) -> int | None:
    """The size of the files under the directory `path`; None when it is not a directory."""
    if not is_dir(path):
        return None
    root = path.rstrip("/")
    if not is_remote(root):
        return sum(os.path.getsize(os.path.join(parent, name)) for parent, _, names in os.walk(root) for name in names)
    return sum(int(gfile().stat(f"{root}/{name}").length) for name in files_under(root))
