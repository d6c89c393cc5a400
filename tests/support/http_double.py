"""The HTTP plumbing the API doubles share: a handler base that reads bodies and says nothing, a server on a free
local port, and a recording server with scripted answers (redirects, JSON) for the tests of outgoing calls."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class DoubleHandler(BaseHTTPRequestHandler):
    """GET, POST and DELETE all go to `answer_request`; the server logs nothing."""

    def answer_request(self) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        self.answer_request()

    do_POST = do_DELETE = do_GET  # noqa: N815

    def read_body(self) -> bytes:
        """The request body (`Content-Length` bytes), empty when there is none."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_head(self, status: int, content_type: str, length: int) -> None:
        """The status line and the headers of an answer of `length` bytes."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(server: ThreadingHTTPServer, poll_interval: float = 0.05) -> Iterator[str]:
    """Runs `server` (bound to a local port) in a thread; yields its base URL; shuts it down after (within
    `poll_interval`: socketserver's default 0.5 s cost each test using a double half a second in teardown)."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Seen:
    """One request a `recording` server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


# What a `recording` server answers a request with: (status, headers, body).
Answer = tuple[int, dict[str, str], bytes]


@contextlib.contextmanager
def recording(route: Callable[[Seen], Answer]) -> Iterator[tuple[str, list[Seen]]]:
    """A server on a free local port answering every request (any method) with `route(request)`; yields its base
    URL and the list of the requests it received (headers lower-cased), in order."""
    seen: list[Seen] = []

    class Handler(DoubleHandler):
        def answer_request(self) -> None:
            request = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.read_body())
            seen.append(request)
            status, headers, body = route(request)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler), poll_interval=0.05) as url:
        yield url, seen


def redirect_to(location: str, status: int = 307) -> Callable[[Seen], Answer]:
    """A `recording` route that answers every request with a redirect to `location`."""
    return lambda request: (status, {"Location": location}, b"")


def moved(path: str, location: str, status: int, then: Answer) -> Callable[[Seen], Answer]:
    """A `recording` route that redirects requests for `path` to `location` with `status` and answers every other
    request with `then`."""
    return lambda request: (status, {"Location": location}, b"") if request.path == path else then


def json_answer(body: bytes = b"{}") -> Callable[[Seen], Answer]:
    """A `recording` route that answers every request with 200 and `body` as JSON."""
    return lambda request: (200, {"Content-Type": "application/json"}, body)


@dataclass
class Streamed:
    """What a `streaming` server wrote: `sent` bytes of its answers, until each client stopped reading."""

    sent: int = 0


@contextlib.contextmanager
def streaming(size: int, status: int = 200, start: bytes = b"{") -> Iterator[tuple[str, Streamed]]:
    """A server on a free local port answering every request with `status`, a JSON content type and a body of
    `size` bytes (`start`, then spaces), written in 64 KiB chunks for as long as the client reads; yields its base
    URL and the count of bytes written (what the client read, plus what the sockets' buffers held)."""
    streamed = Streamed()

    class Handler(DoubleHandler):
        def answer_request(self) -> None:
            self.read_body()
            self.send_head(status, "application/json", size)
            chunk = start + b" " * (64 * 1024 - len(start))
            with contextlib.suppress(ConnectionError):
                while streamed.sent < size:
                    self.wfile.write(chunk)
                    streamed.sent += len(chunk)
                    chunk = b" " * len(chunk)

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler), poll_interval=0.05) as url:
        yield url, streamed
