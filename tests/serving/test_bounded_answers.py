"""What a serving client reads is bounded, and what a server says is shown with its control characters escaped
(issue 35, classes 3 and 8): `tfxp predict` against a server that answers far more than a message may hold stops
reading at the cap with one message, and a server's error text holding terminal escapes is printed escaped;
`tfxp loadtest` refuses a concurrency one generator cannot run. The servers are local doubles
(tests/support/http_double.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from http_double import recording, streaming
from serving_fixtures import random_png
from typer.testing import CliRunner

from pipeline.cli import app


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "seven.png"
    path.write_bytes(random_png(8, 1, seed=7))
    return path


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    path = tmp_path / "labels.txt"
    path.write_text("a\nb\nc\nd\n")
    return path


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, " ".join(result.output.split())


def test_a_predict_answer_past_the_cap_is_refused_and_not_read_on(
    monkeypatch: pytest.MonkeyPatch, image: Path, labels: Path
) -> None:
    monkeypatch.setattr("serving.rest_client.MAX_MESSAGE_BYTES", 1 << 20, raising=False)  # 1 MiB: fast
    with streaming(256 * 1024 * 1024, start=b'{"predictions": [') as (url, streamed):
        code, output = _invoke("predict", str(image), "--rest", url, "--labels", str(labels))
    assert code == 2, output
    assert "failed with RESOURCE_EXHAUSTED: the answer of" in output
    assert "is larger than 1 MiB, the most tfxp reads of one answer (cut off there); ask for fewer images" in output
    assert "Traceback" not in output
    assert streamed.sent < 32 * 1024 * 1024  # the cap plus what the sockets held, not the 256 MiB offered


def test_a_server_error_with_terminal_escapes_is_printed_escaped(image: Path, labels: Path) -> None:
    body = json.dumps({"error": "Servable not found \x1b[2J\x1b]0;owned\x07\rall is well"}).encode()
    with recording(lambda request: (404, {"Content-Type": "application/json"}, body)) as (url, _):
        code, output = _invoke("predict", str(image), "--rest", url, "--labels", str(labels))
    assert code == 2, output
    assert "Servable not found \\x1b[2J\\x1b]0;owned\\x07\\rall is well" in output
    assert "\x1b" not in output and "\r" not in output and "\x07" not in output


@pytest.mark.parametrize("concurrency", [1025, 1_000_000])
def test_an_absurd_concurrency_is_refused_with_the_limit(image: Path, concurrency: int) -> None:
    code, output = _invoke(
        "loadtest", "--rest", "http://127.0.0.1:9", "--image", str(image), "--concurrency", str(concurrency),
        "--seconds", "0.2", "--warmup", "0",
    )  # fmt: skip
    assert code == 2, output
    assert f"error: concurrency {concurrency} is more than one load generator runs (1024)" in output
    assert "pass --concurrency 1024 or less" in output


def test_a_load_test_that_finished_no_request_fails_with_the_reason(image: Path) -> None:
    """The first answer comes after the whole run (a model traced on its first call): nothing was measured, and the
    run says so with exit 2 instead of printing "0 requests, 0 errors" and exiting 0."""

    def slow(request: object) -> tuple[int, dict[str, str], bytes]:
        time.sleep(1.5)
        return 200, {"Content-Type": "application/json"}, b'{"predictions": [[1.0]]}'

    with recording(slow) as (url, _):
        code, output = _invoke(
            "loadtest", "--rest", url, "--image", str(image), "--concurrency", "1", "--warmup", "0.5",
            "--seconds", "0.3", "--timeout", "5",
        )  # fmt: skip
    assert code == 2, output
    assert "error: the load test made no request in its 0.3 s at concurrency 1" in output
    assert "0 requests" not in output


def test_a_grpc_answer_past_the_cap_names_the_cap() -> None:
    from concurrent import futures

    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from serving.errors import ResourceExhaustedError
    from serving.grpc_client import GrpcClient

    class Huge(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request: object, context: object) -> predict_pb2.PredictResponse:  # noqa: N802
            answer = predict_pb2.PredictResponse()
            answer.outputs["probabilities"].string_val.append(b"x" * (2 << 20))
            return answer

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Huge(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with (
            GrpcClient(f"127.0.0.1:{port}", "digits", max_message_bytes=1 << 20) as client,
            pytest.raises(ResourceExhaustedError, match=r"the answer is larger than 1 MiB, the most tfxp reads of one"),
        ):
            client.predict_images([b"image"])
    finally:
        server.stop(None)


def test_an_answer_cut_off_is_one_message_not_a_traceback(image: Path, labels: Path) -> None:
    from http.server import ThreadingHTTPServer

    from http_double import DoubleHandler, serving

    class CutOff(DoubleHandler):
        def answer_request(self) -> None:
            self.read_body()
            self.send_head(200, "application/json", 1000)
            self.wfile.write(b'{"predictions"')  # and the connection closes

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), CutOff), poll_interval=0.05) as url:
        code, output = _invoke("predict", str(image), "--rest", url, "--labels", str(labels))
    assert code == 2, output
    assert f"failed with UNAVAILABLE: the answer of {url}/v1/models/digits:predict broke off" in output
