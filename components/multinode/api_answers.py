"""Reading a Kubernetes API answer as tfxp trusts it: at most a size cap, a JSON object of the shape the API server
sends, or it is no answer.

A 2xx that is not what the API server sends (a proxy's HTML page, a cut-off body, a list where an object belongs,
gigabytes, a TFJob without its uid, conditions that are not a list, a count that is text) is
`UnreadableAnswerError`, a urllib3 transport error: the TFJob client counts it as no answer and asks again at the
next poll, as after a 5xx, and never takes it for a decision about the job. The shapes (`TFJOB`, `POD_LIST`,
`EVENT_LIST`) name every field the readers (tfjob_status.py, tfjob_diagnosis.py, tfjob_submit.py) use, with the
type the API declares for it (kubeflow/trainer v1 `common_types.go`, `tfjob_types.go`; core/v1 `types.go`): a field
may be missing or null (the API omits empty ones), but when it is there it has that type, so the readers, which
take a missing field for empty, never meet one they cannot read.
"""

from __future__ import annotations

from typing import Any

import urllib3

from foundation import bounded
from foundation.bounded import parse_json, size_text

# The most tfxp reads of one answer: an object is at most etcd's 1.5 MiB request limit, a list of a 64-worker job's
# pods or events a few MiB; a log tail is 40 lines. More is not an answer to these calls.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_LOG_BYTES = 256 * 1024


class UnreadableAnswerError(urllib3.exceptions.HTTPError):
    """A 2xx answer that is not what the API server sends (not a JSON object, or larger than the cap): counted as
    no answer (a transport error, retried at the next poll), never as a decision about the job."""


def answer_too_large(method: str, url: str) -> UnreadableAnswerError:
    """The error for an answer past MAX_ANSWER_BYTES (`foundation.bounded.cap_pool`): no answer, retried."""
    return UnreadableAnswerError(
        f"an answer to {method} {url} larger than {size_text(MAX_ANSWER_BYTES)} (cut off there)"
    )


def read_capped(response: Any, limit: int) -> bytes:
    """The body of `response` (urllib3, not preloaded), at most `limit` bytes; UnreadableAnswerError past it."""
    too_large = UnreadableAnswerError(f"an answer larger than {size_text(limit)} (cut off there)")
    try:
        data = bounded.read_capped(response.read, limit, lambda: too_large)
    except UnreadableAnswerError:
        response.close()  # the rest is never read: the connection cannot go back to the pool
        raise
    response.release_conn()
    return data


class Required:
    """A field that must be there (and not null)."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape


class Each:
    """An object whose every value has `shape` (labels, `tfReplicaSpecs`, `replicaStatuses`)."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape


# A shape: a type (`str`, `int`, `bool`, `dict` for any object), `[shape]` for a list of them, `{key: shape}` for an
# object with those fields (others are not looked at), `Each(shape)`, `Required(shape)`.
_CONDITION = {"type": str, "status": str, "reason": str, "message": str}
_OWNER_REFERENCE = {"uid": str, "kind": str, "name": str, "controller": bool}
_METADATA = {
    "name": str,
    "uid": str,
    "labels": Each(str),
    "ownerReferences": [_OWNER_REFERENCE],
    "creationTimestamp": str,
    "deletionTimestamp": str,
}
_OBJECT = {**_METADATA, "name": Required(str), "uid": Required(str)}
_CONTAINER = {"name": str, "args": [str]}
_TERMINATED = {"exitCode": int, "reason": str, "message": str, "finishedAt": str}
_STATE = {"terminated": _TERMINATED, "waiting": {"reason": str, "message": str}}
TFJOB = {
    "metadata": Required(_OBJECT),
    "spec": {
        "tfReplicaSpecs": Each({"replicas": int, "template": {"spec": {"containers": [_CONTAINER]}}}),
        "runPolicy": dict,
    },
    "status": {
        "conditions": [_CONDITION],
        "replicaStatuses": Each({"active": int, "succeeded": int, "failed": int}),
    },
}
_POD = {
    "metadata": Required(_OBJECT),
    "status": {
        "phase": str,
        "reason": str,
        "message": str,
        "conditions": [_CONDITION],
        "containerStatuses": [{"name": str, "restartCount": int, "state": _STATE, "lastState": _STATE}],
    },
}
POD_LIST = {"items": Required([_POD])}
_EVENT = {
    "metadata": _METADATA,
    "type": str,
    "reason": str,
    "message": str,
    "involvedObject": {"kind": str, "name": str, "uid": str},
    "series": {"lastObservedTime": str},
    "lastTimestamp": str,
    "eventTime": str,
    "firstTimestamp": str,
}
EVENT_LIST = {"items": Required([_EVENT])}
_JSON_TYPES = {str: "text", int: "a number", bool: "true or false", dict: "an object", list: "a list"}


def _shape_problem(value: Any, shape: Any, path: str) -> str | None:
    """Where `value` does not have `shape` and what it holds there, or None."""
    if isinstance(shape, Required):
        return f"{path} is missing" if value is None else _shape_problem(value, shape.shape, path)
    if value is None:
        return None
    if isinstance(shape, type):
        fits = isinstance(value, shape) and not (shape is int and isinstance(value, bool))
        return None if fits else f"{path} is {_kind(value)}, not {_JSON_TYPES[shape]}"
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{path} is {_kind(value)}, not a list"
        return next(filter(None, (_shape_problem(v, shape[0], f"{path}[{i}]") for i, v in enumerate(value))), None)
    if not isinstance(value, dict):
        return f"{path} is {_kind(value)}, not an object"
    if isinstance(shape, Each):
        items = ((f"{path}.{key}", item, shape.shape) for key, item in value.items())
    else:
        items = ((f"{path}.{key}", value.get(key), inner) for key, inner in shape.items())
    return next(filter(None, (_shape_problem(item, inner, where) for where, item, inner in items)), None)


def _kind(value: Any) -> str:
    return "true or false" if isinstance(value, bool) else _JSON_TYPES.get(type(value), type(value).__name__)


def json_object(data: bytes, what: str, shape: Any = None) -> dict[str, Any]:
    """`data` as a JSON object of `shape` (any object when None).

    Raises:
        UnreadableAnswerError: not JSON, not an object, or not of `shape` (naming the first field that is not).
    """
    try:
        value = parse_json(data)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise UnreadableAnswerError(f"{what} answered something that is not JSON ({data[:60]!r})") from None
    if not isinstance(value, dict):
        raise UnreadableAnswerError(f"{what} answered JSON that is not an object ({type(value).__name__})")
    problem = _shape_problem(value, shape, "the answer") if shape is not None else None
    if problem:
        raise UnreadableAnswerError(f"{what} answered JSON that is not what the API server sends: {problem}")
    return value


def named(obj: dict[str, Any], name: str, what: str) -> dict[str, Any]:
    """`obj` when it is the object called `name` (an answer about another object is no answer about this one).

    Raises:
        UnreadableAnswerError: it names another object.
    """
    said = obj["metadata"]["name"]
    if said != name:
        raise UnreadableAnswerError(f"{what} about {name} answered with another object ({said!r})")
    return obj
