"""The event loop under the server's front ends and the load generator: uvloop where installed, else asyncio's.

uvloop (libuv, a dependency on Linux and macOS) runs the same asyncio code with less work per loop iteration;
grpc.aio and aiohttp both run on it. Measured on this project's 2-core VM with the digits model at
concurrency 16 (`bench/serving.py`): server CPU per gRPC request 1.12 → 0.92 ms batched, 2.11 → 1.93 ms
unbatched; a trivial grpc.aio server 0.33 → 0.29 ms. Where uvloop is missing (Windows), asyncio's default loop
runs the same code.

Example:
    loop = new_event_loop()              # for a loop thread that calls loop.run_forever()
    result = run(main())                 # like asyncio.run(main())
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new uvloop loop, or asyncio's default loop when uvloop is not installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs `coroutine` to completion on a new loop, as `asyncio.run` does (uvloop's where installed)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
