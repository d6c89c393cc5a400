"""Serving errors: one exception type per gRPC status code, with TF Serving's HTTP mapping.

The server raises these to answer a request with a status; the client raises them (from the underlying gRPC or
HTTP error) so callers handle `NotFoundError` rather than parsing `grpc.RpcError` details or HTTP bodies.
HTTP codes follow TF Serving's `ToHTTPStatusCode` (model_servers/http_server.cc).

Example:
    try:
        client.predict([image])
    except NotFoundError:
        ...  # wrong model name, or the version is not loaded (yet)
"""

from __future__ import annotations

import enum
import re

import grpc


class Code(enum.Enum):
    """gRPC status codes, each with the HTTP status TF Serving's REST API answers for it."""

    OK = (grpc.StatusCode.OK, 200)
    CANCELLED = (grpc.StatusCode.CANCELLED, 499)
    UNKNOWN = (grpc.StatusCode.UNKNOWN, 500)
    INVALID_ARGUMENT = (grpc.StatusCode.INVALID_ARGUMENT, 400)
    DEADLINE_EXCEEDED = (grpc.StatusCode.DEADLINE_EXCEEDED, 504)
    NOT_FOUND = (grpc.StatusCode.NOT_FOUND, 404)
    ALREADY_EXISTS = (grpc.StatusCode.ALREADY_EXISTS, 409)
    PERMISSION_DENIED = (grpc.StatusCode.PERMISSION_DENIED, 403)
    RESOURCE_EXHAUSTED = (grpc.StatusCode.RESOURCE_EXHAUSTED, 429)
    FAILED_PRECONDITION = (grpc.StatusCode.FAILED_PRECONDITION, 400)
    ABORTED = (grpc.StatusCode.ABORTED, 409)
    OUT_OF_RANGE = (grpc.StatusCode.OUT_OF_RANGE, 400)
    UNIMPLEMENTED = (grpc.StatusCode.UNIMPLEMENTED, 501)
    INTERNAL = (grpc.StatusCode.INTERNAL, 500)
    UNAVAILABLE = (grpc.StatusCode.UNAVAILABLE, 503)
    DATA_LOSS = (grpc.StatusCode.DATA_LOSS, 500)
    UNAUTHENTICATED = (grpc.StatusCode.UNAUTHENTICATED, 401)

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return self.value[0]

    @property
    def http_status(self) -> int:
        return self.value[1]

    @property
    def number(self) -> int:
        """The numeric code (also TensorFlow's `error_code` and `tensorflow.error.Code`)."""
        return int(self.value[0].value[0])


class ServingError(Exception):
    """A request failed with a status code and TF Serving's message for it.

    A subclass names its code and, where REST answers other than TF Serving's mapping, its HTTP status:
    `class NotFoundError(ServingError, code=Code.NOT_FOUND)`. `error_for` raises the first subclass given a code.
    """

    code = Code.UNKNOWN
    _http_status: int | None = None

    def __init_subclass__(cls, *, code: Code | None = None, http_status: int | None = None) -> None:
        super().__init_subclass__()
        if code is not None:
            cls.code = code
            _ERROR_TYPES.setdefault(code, cls)
        if http_status is not None:
            cls._http_status = http_status

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def http_status(self) -> int:
        """The HTTP status a REST server answers with."""
        return self._http_status if self._http_status is not None else self.code.http_status


_ERROR_TYPES: dict[Code, type[ServingError]] = {}


class InvalidArgumentError(ServingError, code=Code.INVALID_ARGUMENT):
    """The request is malformed: bad JSON, unknown input name, wrong dtype or shape, undecodable image."""


class NotFoundError(ServingError, code=Code.NOT_FOUND):
    """Unknown model, or a version that is not loaded (not pushed, excluded by the policy, or unloaded)."""


class FailedPreconditionError(ServingError, code=Code.FAILED_PRECONDITION):
    """The request cannot run in the server's current state (e.g. a signature the model does not have)."""


class UnavailableError(ServingError, code=Code.UNAVAILABLE):
    """The server cannot take the request now (not reachable, shutting down, batch queue full); retryable."""


class DeadlineExceededError(ServingError, code=Code.DEADLINE_EXCEEDED):
    """The call did not finish within its timeout."""


class ResourceExhaustedError(ServingError, code=Code.RESOURCE_EXHAUSTED):
    """The request is over a size limit."""


class RequestTooLargeError(ResourceExhaustedError, http_status=413):
    """A request body over the server's size limit; REST answers 413 (Payload Too Large), not 429."""


class RequestTimeoutError(DeadlineExceededError, http_status=408):
    """A REST body that did not arrive within the server's read timeout; REST answers 408 (Request Timeout)."""


class UnsupportedMediaTypeError(InvalidArgumentError, http_status=415):
    """A REST body in an encoding the server does not decode (e.g. `Content-Encoding: br`); REST answers 415."""


class UnimplementedError(ServingError, code=Code.UNIMPLEMENTED):
    """The server does not implement the method."""


class InternalError(ServingError, code=Code.INTERNAL):
    """The model or server failed while handling a valid request."""


class CancelledError(ServingError, code=Code.CANCELLED):
    """The call was cancelled."""


_BY_GRPC = {code.grpc_code: code for code in Code}
_BY_NUMBER = {code.number: code for code in Code}


# How TensorFlow words an op error that a session run (TF Serving) reports: the op's text, then the node it came
# from on its own line ("...\n\t [[{{node map/while/decode_image/DecodeImage}}]]"). An in-graph
# tf.debugging.Assert's op text is "assertion failed: [<message>]" (the model's image format check).
_NODE_LINE = re.compile(r"\s*\[\[\{\{node [^}]*\}\}[^\]]*\]\]")
_ASSERTION = re.compile(r"assertion failed: \[(.*?)\](?=$| \()", re.S)


def readable_message(message: str) -> str:
    """A model error's message on one line: without TF's node annotations and without the Assert wrapping.

    Example:
        readable_message("assertion failed: [unsupported image format TIFF; ...]\\n\\t [[{{node map/Assert}}]]")
        # "unsupported image format TIFF; ..."
    """
    return _ASSERTION.sub(r"\1", _NODE_LINE.sub("", message)).strip()


def error_for(code: Code, message: str) -> ServingError:
    """The exception for `code` (`ServingError` itself for codes without a dedicated type).

    The message is made `readable_message`, so clients of TF Serving and of `tfxp serve` both see one line.
    """
    message = readable_message(message)
    error_type = _ERROR_TYPES.get(code)
    if error_type is not None:
        return error_type(message)
    error = ServingError(message)
    error.code = code
    return error


def code_from_grpc(status: grpc.StatusCode) -> Code:
    """The `Code` of a `grpc.StatusCode`."""
    return _BY_GRPC[status]


def code_from_number(number: int) -> Code:
    """The `Code` of a numeric status (TensorFlow's `OpError.error_code`); UNKNOWN for unknown numbers."""
    return _BY_NUMBER.get(number, Code.UNKNOWN)


def code_from_http(status: int) -> Code:
    """The most specific `Code` for an HTTP status seen by a REST client."""
    if status in _HTTP_TO_CODE:
        return _HTTP_TO_CODE[status]
    return Code.INTERNAL if status >= 500 else Code.INVALID_ARGUMENT


# Inverse of TF Serving's mapping where it is one-to-one, plus the proxies' 413 (body too large) and 502.
_HTTP_TO_CODE = {
    400: Code.INVALID_ARGUMENT,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.NOT_FOUND,
    408: Code.DEADLINE_EXCEEDED,
    409: Code.ABORTED,
    413: Code.RESOURCE_EXHAUSTED,
    429: Code.RESOURCE_EXHAUSTED,
    499: Code.CANCELLED,
    501: Code.UNIMPLEMENTED,
    502: Code.UNAVAILABLE,
    503: Code.UNAVAILABLE,
    504: Code.DEADLINE_EXCEEDED,
}
