"""Bounds on REST connections: how many may be open, and how long a request may take to arrive.

aiohttp waits for a connection's first request line and headers for ever, so peers that send half a request
line, or trickle a header byte now and then, each hold a file descriptor until the process runs out (20,000 of
them stopped ordinary requests). `ConnectionGuard` wraps aiohttp's protocol factory:

- at most `max_connections` are open; one more is answered `503` at once, with a JSON error naming
  `serving.max_connections`, and closed (TF Serving has no such cap; its proxies do);
- a connection's first request must be complete (request line and headers) within `request_timeout` seconds
  of the connection opening, else it gets `408` and is closed. Later requests on a kept-alive connection are
  bounded by aiohttp's keep-alive timeout (`serving.idle_timeout_seconds`), which closes a connection
  whose next request is not complete by then; bodies are bounded in `serving.rest`.

Example:
    guard = ConnectionGuard(runner.server, max_connections=1000, request_timeout=30)
    server = await loop.create_server(guard.protocol, host, port)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, cast

CONNECTIONS_SETTING = "serving.max_connections"
TIMEOUT_SETTING = "serving.request_timeout_seconds"


def _response(status: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class _Refused(asyncio.Protocol):
    """A connection over the cap: answered 503 and closed without reading it."""

    def __init__(self, limit: int) -> None:
        self._limit = limit

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        message = (
            f"this server already has {self._limit} open connections, its limit ({CONNECTIONS_SETTING}); "
            "retry, or reuse a kept-alive connection"
        )
        transport.write(_response("503 Service Unavailable", message))
        transport.close()


class _Guarded(asyncio.Protocol):
    """Forwards every event to aiohttp's protocol, and closes the connection when its first request is not
    complete within the deadline."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard, self._inner = guard, inner
        self._transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._guard.open[transport] = self
        self._deadline = asyncio.get_running_loop().call_later(self._guard.request_timeout, self._expire)
        self._inner.connection_made(transport)

    def request_started(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self._transport is not None and not self._transport.is_closing():
            message = (
                f"the request was not complete within {self._guard.request_timeout:g} seconds of connecting "
                f"({TIMEOUT_SETTING})"
            )
            self._transport.write(_response("408 Request Timeout", message))
            self._transport.close()

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.request_started()
        if self._transport is not None:
            self._guard.open.pop(self._transport, None)
        self._inner.connection_lost(exc)


class ConnectionGuard:
    """The protocol factory for the REST port: aiohttp's, within the cap and the first-request deadline.

    Args:
        factory: aiohttp's protocol factory (`AppRunner.server`).
        max_connections: Most connections open at once.
        request_timeout: Seconds from connecting until the first request's headers are in.
    """

    def __init__(self, factory: Callable[[], Any], max_connections: int, request_timeout: float) -> None:
        self._factory = factory
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self.open: dict[asyncio.BaseTransport, _Guarded] = {}

    def protocol(self) -> asyncio.Protocol:
        """A protocol for one accepted connection (the `loop.create_server` factory)."""
        if len(self.open) >= self.max_connections:
            return _Refused(self.max_connections)
        return _Guarded(self, self._factory())

    def request_started(self, transport: asyncio.BaseTransport | None) -> None:
        """Called by the app when a request's headers are in: the connection's deadline is met."""
        guarded = self.open.get(transport) if transport is not None else None
        if guarded is not None:
            guarded.request_started()
