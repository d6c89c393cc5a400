"""A model server in a child process, started with TF Serving's flags, and stopped for sure.

`ServerProcess` runs TF Serving's own binary, `tensorflow_model_server`, where `shutil.which` finds it, and
otherwise tfxp's TF Serving-compatible server (`serving.server`) as `python -m serving.server_process`, which
takes the same four flags (tensorflow_serving/model_servers/main.cc: `--port` for gRPC, `--rest_api_port`,
`--model_name`, `--model_base_path`). Either way the answers come from a separate process that loaded the model
from its base path and replayed its warmup records, as in production.

Ports: tfxp's server binds port 0 and writes the ports it got to `--ports_file`, so nothing can take them between
choosing and binding. TF Serving cannot bind port 0 for REST (`--rest_api_port=0` turns REST off, main.cc), so
for it two free ports are picked just before the start, and a start that lost a port to another process
("Address already in use" in its log) is tried again with new ones.

The child's stdout and stderr go to one log file; every error carries its tail (`ServerProcessError.log`).

Example:
    with ServerProcess("digits", Path("/tmp/check/digits"), Path("/tmp/check/server.log")) as server:
        server.start(timeout_seconds=120)
        print(server.name, server.rest_url)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from foundation.bounded import parse_json, read_document, tail_lines
from foundation.errors import TfxpError
from serving.address import rest_base_url

TF_SERVING_BINARY = "tensorflow_model_server"
LOCAL_SERVER = "tfxp local server"
HOST = "127.0.0.1"
_PORT_RETRIES = 3
_STOP_GRACE_SECONDS = 10.0
_LOST_PORT_LINES = ("Address already in use", "Failed to start HTTP Server")
_PROJECT_ROOT = Path(__file__).resolve().parents[1]


class ServerProcessError(TfxpError, RuntimeError):
    """The server process exited or did not start listening in time.

    Attributes:
        log: The tail of the process's log, which says why in the server's own words.
    """

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


def tf_serving_binary() -> str | None:
    """The path of `tensorflow_model_server` on PATH; None when it is not installed."""
    return shutil.which(TF_SERVING_BINARY)


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports of the loopback interface that were free a moment ago (bound together, so
    they differ, then released)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((HOST, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class ServerProcess:
    """One model served by a child process: TF Serving's binary (`binary`) or tfxp's server (`binary` None).

    Args:
        model_name: The model's name (`--model_name`).
        model_base_path: Its base path, whose numeric subdirectories are versions (`--model_base_path`).
        log_path: Where the child's stdout and stderr go.
        binary: The `tensorflow_model_server` to run; None = tfxp's own server in this Python.
    """

    def __init__(self, model_name: str, model_base_path: Path, log_path: Path, binary: str | None = None) -> None:
        self.model_name = model_name
        self.model_base_path = model_base_path
        self.log_path = log_path
        self.binary = binary
        self.name = TF_SERVING_BINARY if binary else LOCAL_SERVER
        self.rest_url = ""
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_seconds: float) -> str:
        """Starts the process; returns the REST base URL once it is known (tfxp's server: once it listens,
        which is after its first load; TF Serving: at once, its REST port answers after the load).

        Raises:
            ServerProcessError: the process exited, or tfxp's server reported no ports within `timeout_seconds`.
        """
        if self.binary is None:
            return self._start_local(timeout_seconds)
        for attempt in range(1, _PORT_RETRIES + 1):
            grpc_port, rest_port = free_ports(2)
            self._spawn([self.binary, f"--port={grpc_port}", f"--rest_api_port={rest_port}", *self._model_flags()])
            self.rest_url = rest_base_url(HOST, rest_port)
            time.sleep(0.5)  # a lost port shows at once; anything later is the load, which the caller waits for
            if self.exited() is None or not any(line in self.log_tail() for line in _LOST_PORT_LINES):
                return self.rest_url
            if attempt < _PORT_RETRIES:
                self.stop()
        raise self.failure(f"{self.name} could not bind its ports in {_PORT_RETRIES} tries")

    def _start_local(self, timeout_seconds: float) -> str:
        ports_file = self.log_path.with_suffix(".ports.json")
        command = [sys.executable, "-m", "serving.server_process", "--port=0", "--rest_api_port=0"]
        self._spawn([*command, *self._model_flags(), f"--ports_file={ports_file}"])
        deadline = time.monotonic() + timeout_seconds
        while not ports_file.is_file():
            if self.exited() is not None:
                raise self.failure(f"{self.name} exited with status {self.exited()} before it listened")
            if time.monotonic() > deadline:
                raise self.failure(f"{self.name} did not listen within {timeout_seconds:g} s")
            time.sleep(0.1)
        self.rest_url = rest_base_url(HOST, int(parse_json(read_document(ports_file, str(ports_file)))["rest_port"]))
        return self.rest_url

    def _model_flags(self) -> list[str]:
        return [f"--model_name={self.model_name}", f"--model_base_path={self.model_base_path}"]

    def _spawn(self, command: list[str]) -> None:
        environment = dict(os.environ)
        # The child imports `serving` from the same checkout or install as this process.
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), environment.get("PYTHONPATH")]))
        # The parent (a local run's Trainer, the check's own in-process answers) may hold a GPU already: the child
        # takes GPU memory as it needs it instead of all of it at once (TensorFlow's default), which would fail.
        environment.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment
            )

    def exited(self) -> int | None:
        """The exit status once the process has ended; None while it runs (or before it started)."""
        return self._process.poll() if self._process is not None else None

    def log_tail(self, lines: int = 15) -> str:
        """The last `lines` lines of the child's log, stripped; "" when it wrote nothing."""
        try:
            found = [line.rstrip() for line in tail_lines(self.log_path, lines + 50)]
        except OSError:
            return ""
        while found and not found[-1]:
            found.pop()
        return "\n".join(found[-lines:]).strip("\n")

    def failure(self, what: str) -> ServerProcessError:
        """The error to raise: `what`, with the log's last line in the message and its tail attached."""
        last = self.log_tail(lines=1)
        return ServerProcessError(
            f"{what}; its log's last line: {last}" if last else f"{what} (no log)", self.log_tail()
        )

    def stop(self) -> None:
        """Terminates the process (SIGTERM), then kills it if it is still there after a grace period."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=_STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """tfxp's server with TF Serving's flags, until SIGTERM; `ServerProcess` runs it."""
    parser = argparse.ArgumentParser(prog="python -m serving.server_process", description=main.__doc__)
    parser.add_argument("--port", type=int, default=8500, help="gRPC port; 0 = a free one")
    parser.add_argument("--rest_api_port", type=int, default=8501, help="REST port; 0 = a free one")
    parser.add_argument("--model_name", required=True)
    parser.add_argument("--model_base_path", required=True, type=Path)
    parser.add_argument("--ports_file", type=Path, help="where to write the bound ports as JSON, once listening")
    args = parser.parse_args(argv)

    from foundation.stop_request import StopRequest
    from serving.model_config import ModelConfig
    from serving.server import ModelServer
    from serving.server_options import ServerOptions

    options = ServerOptions(host=HOST, grpc_port=args.port, rest_port=args.rest_api_port)
    with StopRequest() as stop, ModelServer([ModelConfig(args.model_name, args.model_base_path)], options) as server:
        if args.ports_file is not None:
            staged = args.ports_file.with_name(f".{args.ports_file.name}.tmp")
            staged.write_text(json.dumps({"grpc_port": server.grpc_port, "rest_port": server.rest_port}))
            staged.rename(args.ports_file)  # the parent never reads half the file
        while not stop.wait(1.0):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
