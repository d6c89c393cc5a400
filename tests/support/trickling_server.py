"""A local HTTP server that answers one path a byte at a time (in the header or the body): a per-read timeout
never trips on it, so it tests whole-call deadlines."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def trickling_server(slow_path: str, part: str, body_for: Callable[[str], bytes] = lambda path: b"{}") -> Iterator[str]:
    """A server that answers `slow_path` one byte every 0.4 s (`part`: in the `header` or the `body`), and every
    other path at once with `body_for(path)`; yields its base URL."""
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)

    def answer(connection: socket.socket) -> None:
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = connection.recv(4096)
                if not chunk:
                    return
                request += chunk
            path = request.split(b" ", 2)[1].decode()
            body = body_for(path)
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            if path.split("?")[0] != slow_path:
                connection.sendall(head.encode() + b"\r\n" + body)
                return
            if part == "header":
                quick, slow = b"", head.encode() + b"X-Pad: " + b"a" * 200 + b"\r\n\r\n" + body
            else:
                quick, slow = (
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 300\r\n\r\n",
                    b" " * 300,
                )
            connection.sendall(quick)
            for byte in slow:
                if stop.wait(0.4):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
