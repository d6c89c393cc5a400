"""REST front end: TF Serving's `/v1/models/...` API on aiohttp.

URLs are matched with TF Serving's own expressions (model_servers/http_rest_api_util.cc) on the raw path, so
`/v1/models/../x:predict` is a "Malformed request" (400) as there, and a percent-encoded name such as
`..%2Fx` is decoded and then simply not found: model names only ever look up configured models, never paths.
Errors are `{"error": "<message>"}` with TF Serving's HTTP status for the error code. Paths outside `/v1/`
get an empty 404, as from TF Serving's HTTP server.

Bodies over the size limit get 413 with a JSON error. TF Serving's REST server has no such limit; 413 is what
the proxies in front of it answer, and the limit keeps a development server from buffering unbounded bodies.

A body sent with `Content-Encoding: gzip` is decompressed, as TF Serving's HTTP server does by default, and
the size limit applies to the decompressed body too (a few KiB of gzip can inflate to gigabytes). A body that
is not valid gzip is a 400; any other encoding (`br`, `deflate`, ...) a 415, naming what is accepted (TF
Serving would hand such a body to its JSON parser as it is).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import urllib.parse
import zlib
from typing import TYPE_CHECKING, Any

from aiohttp import web

from serving.errors import (
    InternalError,
    InvalidArgumentError,
    RequestTimeoutError,
    RequestTooLargeError,
    ServingError,
    UnimplementedError,
    UnsupportedMediaTypeError,
)
from serving.limits import BYTES_SETTING

if TYPE_CHECKING:
    from collections.abc import Callable

    from serving.api import ServingApi
    from serving.metrics import ServingMetrics

_PREDICTION_PATH = re.compile(
    r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)", re.I
)
_STATUS_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?", re.I
)
_V1_PATH = re.compile(r"/v1/.*", re.I | re.S)
_INT64_MAX = 2**63 - 1
_GZIP = frozenset({"gzip", "x-gzip"})
logger = logging.getLogger(__name__)


def _json(payload: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(payload, separators=(",", ":")).encode(), status=status, content_type="application/json"
    )


def _error(error: ServingError) -> web.Response:
    response = _json({"error": error.message}, status=error.http_status)
    if isinstance(error, RequestTimeoutError):
        response.force_close()  # the rest of a stalled body is not waited for
    return response


def _parse_ids(name: str | None, version: str | None, label: str | None) -> tuple[str, int | None, str | None]:
    decoded = urllib.parse.unquote(name or "")
    number = None
    if version:
        # Beyond 19 digits no int64 fits (and int() refuses over 4300 digits).
        number = int(version) if len(version) <= len(str(_INT64_MAX)) else _INT64_MAX + 1
        if number > _INT64_MAX:
            raise InvalidArgumentError(f"Failed to convert version: {version} to numeric.")
    return decoded, number, urllib.parse.unquote(label) if label else None


def create_rest_app(
    api: ServingApi,
    max_request_bytes: int,
    monitoring_path: str,
    metrics: ServingMetrics,
    body_timeout: float = 30.0,
    on_request: Callable[[asyncio.BaseTransport | None], None] | None = None,
) -> web.Application:
    """The aiohttp application serving TF Serving's REST API (and Prometheus metrics at `monitoring_path`).

    Args:
        body_timeout: Seconds a request body may take to arrive (then 408).
        on_request: Called with the connection's transport when a request's headers are in
            (`serving.connections.ConnectionGuard.request_started`).
    """

    async def handle(request: web.Request) -> web.StreamResponse:
        if on_request is not None:
            on_request(request.transport)
        path = request.raw_path.split("?", 1)[0]
        if monitoring_path and path == monitoring_path and request.method == "GET":
            return web.Response(text=metrics.render(), content_type="text/plain")
        if not _V1_PATH.fullmatch(path):
            return web.Response(status=404)
        try:
            return _json(await _dispatch(request, path))
        except ServingError as error:
            return _error(error)
        except Exception as error:  # a bug: answer JSON like every other error, and log it
            logger.exception("%s %s failed", request.method, path)
            return _error(InternalError(f"{type(error).__name__}: {error}"))

    async def _dispatch(request: web.Request, path: str) -> Any:
        method = request.method
        if method == "POST" and (match := _PREDICTION_PATH.fullmatch(path)):
            name, version, label = _parse_ids(match.group(1), match.group(2), match.group(3))
            _check_version_and_label(version, label)
            body = await _read_body(request, max_request_bytes, body_timeout)
            verb = match.group(4).lower()
            if verb == "predict":
                return await api.rest_predict(name, version, label, body)
            if verb == "classify":
                return await api.rest_classify(name, version, label, body)
            raise UnimplementedError("Regress is not implemented by this server; use TF Serving for regression models")
        if method == "GET" and (match := _STATUS_PATH.fullmatch(path)):
            name, version, label = _parse_ids(match.group(1), match.group(2), match.group(3))
            _check_version_and_label(version, label)
            if match.group(4):
                return api.rest_metadata(name, version, label)
            return api.rest_status(name, version, label)
        raise InvalidArgumentError(f"Malformed request: {method} {path}")

    app = web.Application(client_max_size=max_request_bytes)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def _check_version_and_label(version: int | None, label: str | None) -> None:
    if version is not None and label:
        raise InvalidArgumentError(
            f"Both model version ({version}) and model version label ({label}) cannot be supplied."
        )


def _too_large(limit: int, what: str = "Request body") -> RequestTooLargeError:
    return RequestTooLargeError(f"{what} is over this server's limit of {limit} bytes ({BYTES_SETTING})")


async def _read_body(request: web.Request, limit: int, timeout: float) -> bytes:
    size = request.content_length
    if size is not None and size > limit:
        raise _too_large(limit, f"Request body of {size} bytes")
    encoding = request.headers.get("Content-Encoding", "")
    try:
        async with asyncio.timeout(timeout):
            raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(limit) from None
    except TimeoutError:
        raise RequestTimeoutError(
            f"the request body did not arrive within {timeout:g} seconds (serving.request_timeout_seconds)"
        ) from None
    return decode_body(raw, encoding, limit)


def decode_body(raw: bytes, content_encoding: str, limit: int) -> bytes:
    """A request body as sent with `Content-Encoding: content_encoding` (gzip, identity or none), decoded.

    Args:
        raw: The body's bytes as received.
        content_encoding: The header's value ('' when absent).
        limit: Largest decoded body, in bytes.

    Returns:
        The decoded body.

    Raises:
        UnsupportedMediaTypeError: an encoding other than gzip or identity (HTTP 415).
        InvalidArgumentError: `gzip` on a body that is not one complete gzip stream (HTTP 400).
        RequestTooLargeError: a decompressed body over `limit` bytes (HTTP 413).
    """
    codings = [token.strip().lower() for token in content_encoding.split(",")]
    codings = [token for token in codings if token not in ("", "identity")]
    if not codings:
        return raw
    if len(codings) > 1 or codings[0] not in _GZIP:
        raise UnsupportedMediaTypeError(
            f"Content-Encoding {content_encoding!r} is not supported by this server: send the body as it is, or "
            "gzip-compressed with Content-Encoding: gzip"
        )
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip header and trailer
    try:
        body = decompressor.decompress(raw, limit + 1)
    except zlib.error as error:
        raise InvalidArgumentError(f"The request body is not valid gzip (Content-Encoding: gzip): {error}") from None
    if len(body) > limit:
        raise _too_large(limit, "Request body, decompressed,")
    if not decompressor.eof or decompressor.unused_data:
        raise InvalidArgumentError(
            "The request body is not valid gzip (Content-Encoding: gzip): "
            + ("the stream is truncated" if not decompressor.eof else "data follows the end of the gzip stream")
        )
    return body
