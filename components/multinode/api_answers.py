"""Reading a Kubernetes API answer as tfxp trusts it: at most a size cap, and a JSON object, or it is no answer.

A 2xx that is not what the API server sends (a proxy's HTML page, a cut-off body, a list where an object belongs,
gigabytes) is `UnreadableAnswerError`, a urllib3 transport error: the TFJob client counts it as no answer and
asks again at the next poll, as after a 5xx, and never takes it for a decision about the job.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3

# The most tfxp reads of one answer: an object is at most etcd's 1.5 MiB request limit, a list of a 64-worker job's
# pods or events a few MiB; a log tail is 40 lines. More is not an answer to these calls.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_LOG_BYTES = 256 * 1024


class UnreadableAnswerError(urllib3.exceptions.HTTPError):
    """A 2xx answer that is not what the API server sends (not a JSON object, or larger than the cap): counted as
    no answer (a transport error, retried at the next poll), never as a decision about the job."""


def read_capped(response: Any, limit: int) -> bytes:
    """The body of `response` (urllib3, not preloaded), at most `limit` bytes; UnreadableAnswerError past it."""
    data = bytes(response.read(limit + 1))
    if len(data) > limit:
        response.close()  # the rest is never read: the connection cannot go back to the pool
        raise UnreadableAnswerError(f"an answer larger than {limit // 1024} KiB (cut off there)")
    response.release_conn()
    return data


def json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise UnreadableAnswerError(f"{what} answered something that is not JSON ({data[:60]!r})") from None
    if not isinstance(value, dict):
        raise UnreadableAnswerError(f"{what} answered JSON that is not an object ({type(value).__name__})")
    return value
