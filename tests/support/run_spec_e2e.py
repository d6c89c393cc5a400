"""The run-spec e2e tests' shared parts: a local receiver of the run notice, and the digits pipeline compiled and
run with `tfxp run-spec` (tests/pipeline/kubeflow/test_kubeflow_run_spec.py, test_kubeflow_nightly_e2e.py)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from pipeline.cli import app


class Receiver:
    """A local HTTP endpoint that records what is posted and answers `status` after `delay` seconds."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.status = 200
        self.delay = 0.0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append({"content_type": self.headers["Content-Type"], "json": json.loads(body)})
                time.sleep(receiver.delay)
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        # A short poll: close() waits for the loop to see the shutdown (socketserver's default 0.5 s per test).
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the digits pipeline compiled, then run from its spec on the emulated backends ---

TRAIN = 'train_args={"num_steps": 60}'


def compile_digits(tmp_path: Path, data: Path, notify_url: str, *extra: str) -> Path:
    """The digits pipeline compiled to `tmp_path/pipeline.yaml`, its notice posted to `notify_url`."""
    spec = tmp_path / "pipeline.yaml"
    sets = [
        f"data.path={data}",
        f"pipeline.output={tmp_path / 'out'}",
        "edge.enabled=false",
        # These tests are about the backend, not the model: 60 steps reach an eval accuracy of 0.94-0.96 alone, and
        # CI once saw one under the default 0.9 gate with another test process beside it (not blessed, not pushed).
        "evaluator.min_accuracy=0.5",
        f"kubeflow.notify_url={notify_url}",
        *extra,
    ]
    result = CliRunner().invoke(app, ["compile", "--out", str(spec), *(arg for s in sets for arg in ("--set", s))])
    assert result.exit_code == 0, result.output
    return spec


def run_spec_record(spec: Path, state: Path, *args: str) -> tuple[dict[str, Any], str, float]:
    """`tfxp run-spec` at TRAIN's steps: the newest run record, the output and the seconds it took."""
    started = time.monotonic()
    result = CliRunner().invoke(app, ["run-spec", str(spec), "--state", str(state), "--param", TRAIN, *args])
    seconds = time.monotonic() - started
    assert result.exit_code == 0, result.output
    [record] = sorted((state / "runs").glob("*.json"), key=lambda path: path.stat().st_mtime)[-1:]
    return json.loads(record.read_text()), result.output, seconds


def task_states(record: dict[str, Any]) -> dict[str, str]:
    return {task["name"]: task["state"] for task in record["tasks"]}
