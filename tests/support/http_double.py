"""The HTTP plumbing the API doubles share: a handler base that reads bodies and says nothing, and a server on a
free local port."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
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
def serving(server: ThreadingHTTPServer, poll_interval: float = 0.5) -> Iterator[str]:
    """Runs `server` (bound to a local port) in a thread; yields its base URL; shuts it down after."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
