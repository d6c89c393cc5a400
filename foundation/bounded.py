"""What tfxp reads from outside, read with a size cap: server answers, logs, and files a user hands it.

A server (KFP, TF Serving, Prometheus, the API server) or a file can be any size, and the libraries tfxp reads with
take it whole: `requests`' `.json()`, urllib3's preloaded `.data`, `Path.read_bytes()`. A 1.5 GB answer to a list
call held tfxp at 4.5 GB. So every such read goes through one reader here, which stops at its cap plus one byte
and raises `TooLargeError` naming what was read, the cap and the fix; memory stays bounded by the cap, whatever was
sent. Each concept keeps its cap where it lives (`serving.client.MAX_ANSWER_BYTES`, the KFP and Kubernetes clients,
the TFLite reader); the readers are:

- `read_capped(read, limit, too_large)`: any `read(n)` (a urllib3 or requests body, a file object);
- `read_file(path, limit, what, fix)`: a local file (a regular file only: a FIFO would block) or a bucket object;
- `cap_pool(pool_manager, limit, too_large)`: every preloaded answer of a urllib3 pool (`kfp.Client`);
- `read_document(path, what)`: a config, spec, record or metadata file (text, at most MAX_DOCUMENT_BYTES);
- `tail_lines(path, lines)`: the end of a log, however long it grew.

Example:
    data = read_file(Path("release.json"), 1 << 20, "release record release.json", "restore it from the pipeline")
    cap_pool(kfp_client._run_api.api_client.rest_client.pool_manager, 64 << 20, too_large)
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from foundation.errors import TfxpError
from foundation.paths import gfile, is_remote

P = TypeVar("P")
_CHUNK = 1 << 20


def size_text(size: int) -> str:
    """`size` bytes as messages show a cap: `64 MiB`, `256 KiB`, `100 bytes`."""
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size >= unit:
            return f"{size / unit:.3g} {name}"
    return f"{size} bytes"


class TooLargeError(TfxpError, ValueError):
    """An answer, log or file larger than the most tfxp reads of it; the rest was not read.

    Attributes:
        limit: the cap, bytes.
    """

    def __init__(self, what: str, limit: int, fix: str) -> None:
        self.limit = limit
        super().__init__(f"{what} is larger than {size_text(limit)}, the most tfxp reads of it (cut off there); {fix}")


def read_capped(read: Callable[[int], bytes], limit: int, too_large: Callable[[], Exception]) -> bytes:
    """Everything `read` gives until it gives b'' (the end), when that is at most `limit` bytes.

    Reads at most `limit` + 1 bytes, in chunks of at most 1 MiB, so memory stays bounded by the cap.

    Raises:
        the error `too_large()` makes: more than `limit` bytes.
    """
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(bytes(chunk))
        size += len(chunk)
    raise too_large()


Head = tuple[int, Callable[[bytes], None]]


def read_file(path: str | Path, limit: int, what: str, fix: str, *, head: Head | None = None) -> bytes:
    """The bytes of the file `path` (local, or a bucket object through tf.io.gfile), at most `limit` of them.

    Args:
        path: the file.
        limit: the most bytes read.
        what: how messages name it, e.g. `release record /out/edge/digits/3/release.json`.
        fix: what the user should do when it is too large.
        head: (n, check): `check` gets the first n bytes before the rest is read, and raises to refuse the file
            (a file of another format is refused after reading n bytes, whatever its size).

    Raises:
        FileNotFoundError: there is no such file.
        TooLargeError: it holds more than `limit` bytes.
        OSError: not a regular file (a FIFO or a device would block or never end), or unreadable.
    """
    text = str(path)
    if is_remote(text):
        return _read_remote(text, limit, what, fix, head)
    # O_NONBLOCK: opening a FIFO without a writer returns at once; the check is on the opened file.
    descriptor = os.open(text, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), text)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", text)
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return _read_checked(handle.read, info.st_size, limit, what, fix, head)
    finally:
        os.close(descriptor)


def _read_checked(read: Callable[[int], bytes], size: int, limit: int, what: str, fix: str, head: Head | None) -> bytes:
    start = b""
    if head is not None:
        start = read(head[0])
        head[1](start)
    if size > limit:
        raise TooLargeError(what, limit, fix)
    return start + read_capped(read, limit - len(start), lambda: TooLargeError(what, limit, fix))


# The most of a document a user hands tfxp or tfxp finds on disk: a config, a compiled spec, models.config, a
# label map, a release record, metadata. The largest real one (a compiled spec of the ImageNet pipeline) is well
# under 1 MiB; an ImageNet-21k label map is 0.6 MiB.
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024


def read_document(path: str | Path, what: str) -> str:
    """The UTF-8 text of the document `path` (local or a bucket object), at most MAX_DOCUMENT_BYTES.

    Args:
        path: the file.
        what: how messages name it, e.g. `config file configs/x.yaml`.

    Raises:
        FileNotFoundError, OSError: as `read_file`.
        TooLargeError: larger than MAX_DOCUMENT_BYTES.
        UnicodeDecodeError: not UTF-8 text.
    """
    fix = "a document tfxp reads is far smaller: is it the right file?"
    return read_file(path, MAX_DOCUMENT_BYTES, what, fix).decode("utf-8")


# The most of a log's end read to show its last lines: a few screens, even of long lines.
MAX_TAIL_BYTES = 64 * 1024


def tail_lines(path: str | Path, lines: int, limit: int = MAX_TAIL_BYTES) -> list[str]:
    """The last `lines` lines of the local text file `path`, read from its last `limit` bytes only (a log that
    grew to gigabytes is not read whole); undecodable bytes replaced.

    Raises:
        OSError: it cannot be opened.
    """
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - limit))
        data = handle.read(limit)
    found = data.decode("utf-8", "replace").splitlines()
    if size > limit and found:
        found = found[1:]  # the first line is cut
    return found[-lines:] if lines else []


def _read_remote(path: str, limit: int, what: str, fix: str, head: Head | None) -> bytes:
    io = gfile()  # tf.io.gfile, imported there: this module imports no TensorFlow
    if not io.exists(path):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
    try:
        with io.GFile(path, "rb") as handle:
            return _read_checked(handle.read, io.stat(path).length, limit, what, fix, head)
    except (TfxpError, OSError):
        raise
    except Exception as error:  # tf.errors.OpError
        raise OSError(f"cannot read {path}: {getattr(error, 'message', error)}") from None


def cap_pool(pool: P, limit: int, too_large: Callable[[str, str], Exception]) -> P:
    """Makes every preloaded answer of a urllib3 `PoolManager` at most `limit` bytes (decoded); returns `pool`.

    A request that asks urllib3 to preload the body (its default, and what kfp_server_api and the kubernetes client
    ask) is sent unpreloaded; the body is read here up to the cap, and handed on as a preloaded response. So is an
    error answer (not 2xx) to a request that streams its body: the API clients read it whole into their exception.
    Put the cap on after `foundation.redirects.guard_pool`, so it reads the answer the guard returns.

    Args:
        pool: the PoolManager.
        limit: the most bytes of one answer.
        too_large: makes the error for an answer over the cap, from the method and the URL.
    """
    import urllib3

    send: Callable[..., Any] = pool.urlopen  # type: ignore[attr-defined]

    def urlopen(method: str, url: str, *args: Any, **kw: Any) -> Any:
        streamed = not kw.get("preload_content", True)
        response = send(method, url, *args, **{**kw, "preload_content": False})
        if streamed and 200 <= response.status < 300:
            return response  # the caller reads it, with its own cap (`read_capped`)
        try:
            body = read_capped(response.read, limit, lambda: too_large(method, url))
        except BaseException:
            response.close()  # the rest is never read: the connection cannot go back to the pool
            raise
        response.release_conn()
        return urllib3.HTTPResponse(
            body=body,
            headers=response.headers,
            status=response.status,
            reason=response.reason,
            version=response.version,
            preload_content=True,
            decode_content=False,  # read() above already decoded it
            request_method=method,
            request_url=url,
        )

    pool.urlopen = urlopen  # type: ignore[attr-defined]
    return pool


class JsonTooDeepError(ValueError):
    """JSON nested deeper than the parser goes (thousands of levels): malformed JSON like any other."""


def parse_json(data: str | bytes) -> Any:
    """`json.loads`, with JSON nested too deep for the parser a ValueError like any other malformed JSON.

    `json.loads` raises RecursionError on `[[[[…` thousands of levels deep; text from outside is read with this, so
    its callers catch ValueError alone and keep their one message. Every product module parses JSON here
    (`tests/project/test_one_rule.py` fails on a `json.loads` or `json.load` elsewhere).

    Raises:
        JsonTooDeepError: nested too deep to read (a ValueError).
        ValueError: not JSON (`json.JSONDecodeError`), or bytes that are not UTF-8 (`UnicodeDecodeError`).
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise JsonTooDeepError("JSON nested too deep to read") from None
