"""A whole-call deadline for blocking HTTP calls, which socket timeouts alone do not give.

A socket timeout (urllib's `timeout=`, urllib3's `Timeout(total=...)`, which kfp_server_api builds from
`_request_timeout`, `kfp_server_api/rest.py:143-149`) bounds each connect and each read, not the call: a server
that sends one header byte every 2 s never trips a 3 s timeout and holds the call for as long as it likes.
`kfp.Client` passes no `_request_timeout` at all, so its calls have no socket timeout either. `with_deadline`
runs the call on a daemon thread and stops waiting at the deadline; the abandoned thread ends with its socket
(the callers also set socket timeouts, so a silent server frees it) or with the process.

With `stop` (a `foundation.stop_request.StopRequest`), a stop signal ends the wait at once (`StopRequested`):
a read that nobody needs any more is abandoned, so the cleanup after SIGTERM does not wait for it.

Example:
    body = with_deadline(lambda: fetch(url), 3.0, no_answer_error(host, 3.0))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from foundation.stop_request import StopRequest

T = TypeVar("T")


# How often a wait with `stop` looks at it (a stop is seen within this, plus the signal's delivery).
STOP_POLL_SECONDS = 0.05


def with_deadline(
    call: Callable[[], T], seconds: float, on_timeout: BaseException, *, stop: StopRequest | None = None
) -> T:
    """`call()`'s result, or `on_timeout` raised when it has not returned within `seconds`.

    Raises:
        StopRequested: `stop` received a signal before `call` returned (the call is abandoned, not waited for).
        BaseException: `on_timeout`, or whatever `call` raised.
    """
    if stop is not None:
        stop.raise_if_requested()
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=target, name="tfxp-http-call", daemon=True)
    thread.start()
    if stop is None:
        thread.join(max(seconds, 0.0))
    else:
        end = time.monotonic() + max(seconds, 0.0)
        while thread.is_alive() and time.monotonic() < end:
            thread.join(min(STOP_POLL_SECONDS, max(end - time.monotonic(), 0.0)))
            stop.raise_if_requested()
    if thread.is_alive():
        raise on_timeout
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
