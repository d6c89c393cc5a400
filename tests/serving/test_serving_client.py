"""The serving client: timeouts, retries on UNAVAILABLE only, typed errors chained from the transport error.

Fake servers (a gRPC PredictionService and a stdlib HTTP server) script each answer, so the tests can count
attempts and make a server appear late.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
import portpicker
import pytest
import requests
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving.base_client import Prediction, RetryPolicy, ServingClient
from serving.client import connect
from serving.errors import DeadlineExceededError, InvalidArgumentError, NotFoundError, UnavailableError
from serving.grpc_client import GrpcClient
from serving.rest_client import RestClient
from serving.tensors import ndarray_to_proto

FAST_RETRY = RetryPolicy(max_attempts=4, initial_backoff_seconds=0.05, max_backoff_seconds=0.1)
PROBABILITIES = [[0.1, 0.7, 0.2]]

# A behaviour maps the attempt number (1-based) to what the server does: "ok", "slow" or an error.
Behaviour = Callable[[int], object]


class FakePredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.calls = 0

    def Predict(  # noqa: N802 (the gRPC method name)
        self, request: predict_pb2.PredictRequest, context: grpc.ServicerContext
    ) -> predict_pb2.PredictResponse:
        self.calls += 1
        action = self.behaviour(self.calls)
        if action == "slow":
            time.sleep(1.5)
        elif isinstance(action, grpc.StatusCode):
            context.abort(action, f"scripted {action.name}")
        response = predict_pb2.PredictResponse()
        response.model_spec.name = request.model_spec.name
        response.model_spec.version.value = 7
        response.outputs["probabilities"].CopyFrom(ndarray_to_proto(np.array(PROBABILITIES, np.float32)))
        response.outputs["classes"].CopyFrom(ndarray_to_proto(np.array([1], np.int64)))
        return response


def start_grpc(service: FakePredictionService, port: int) -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(service, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server


@pytest.fixture
def grpc_fake() -> Iterator[Callable[[Behaviour], tuple[FakePredictionService, str]]]:
    servers: list[grpc.Server] = []

    def make(behaviour: Behaviour) -> tuple[FakePredictionService, str]:
        service = FakePredictionService(behaviour)
        port = portpicker.pick_unused_port()
        servers.append(start_grpc(service, port))
        return service, f"127.0.0.1:{port}"

    yield make
    for server in servers:
        server.stop(None)


class FakeRest:
    """A REST server whose answer to each attempt is scripted: "ok", "slow" or (status, error message)."""

    def __init__(self, behaviour: Behaviour, port: int) -> None:
        self.behaviour = behaviour
        self.calls = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.calls += 1
                action = fake.behaviour(fake.calls)
                if action == "slow":
                    time.sleep(1.5)
                status, body = (
                    (200, {"predictions": [{"probabilities": PROBABILITIES[0], "classes": 1}]})
                    if action in ("ok", "slow")
                    else (action[0], {"error": action[1]})  # type: ignore[index]
                )
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def rest_fake() -> Iterator[Callable[..., FakeRest]]:
    servers: list[FakeRest] = []

    def make(behaviour: Behaviour, port: int | None = None) -> FakeRest:
        server = FakeRest(behaviour, port or portpicker.pick_unused_port())
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def test_grpc_timeout_raises_deadline_exceeded_from_the_rpc_error_without_retrying(grpc_fake) -> None:
    service, target = grpc_fake(lambda attempt: "slow")
    with GrpcClient(target, "m", timeout=0.3, retry=FAST_RETRY) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError) as caught:
            client.predict_images([b"image"])
    assert time.monotonic() - started < 1.4
    assert isinstance(caught.value.__cause__, grpc.RpcError)
    assert "Deadline Exceeded" in caught.value.message
    assert service.calls == 1


def test_grpc_retries_unavailable_until_it_succeeds(grpc_fake) -> None:
    service, target = grpc_fake(lambda attempt: grpc.StatusCode.UNAVAILABLE if attempt < 3 else "ok")
    with GrpcClient(target, "m", retry=FAST_RETRY) as client:
        prediction = client.predict_images([b"image"])
    assert service.calls == 3
    np.testing.assert_allclose(prediction.probabilities, PROBABILITIES)
    assert (prediction.classes.tolist(), prediction.model_version) == ([1], 7)


def test_grpc_gives_up_after_max_attempts(grpc_fake) -> None:
    service, target = grpc_fake(lambda attempt: grpc.StatusCode.UNAVAILABLE)
    with GrpcClient(target, "m", retry=FAST_RETRY) as client, pytest.raises(UnavailableError, match="scripted"):
        client.predict_images([b"image"])
    assert service.calls == FAST_RETRY.max_attempts


@pytest.mark.parametrize(
    ("code", "error_type"),
    [(grpc.StatusCode.INVALID_ARGUMENT, InvalidArgumentError), (grpc.StatusCode.NOT_FOUND, NotFoundError)],
)
def test_grpc_does_not_retry_other_errors(grpc_fake, code: grpc.StatusCode, error_type: type) -> None:
    service, target = grpc_fake(lambda attempt: code)
    with GrpcClient(target, "m", retry=FAST_RETRY) as client, pytest.raises(error_type) as caught:
        client.predict_images([b"image"])
    assert service.calls == 1
    assert isinstance(caught.value.__cause__, grpc.RpcError)
    assert caught.value.message.startswith(f"scripted {code.name}")


def _assert_reached_after_a_late_start(start_server: Callable[[], object], client: ServingClient) -> None:
    """The server starts 0.6 s after the client's first attempt; retrying every 0.2 s reaches it."""
    starter = threading.Timer(0.6, start_server)
    starter.start()
    try:
        with client:
            assert client.predict_images([b"image"]).classes.tolist() == [1]
    finally:
        starter.join()


LATE_START_RETRY = RetryPolicy(max_attempts=20, initial_backoff_seconds=0.2, multiplier=1.0)


def test_grpc_server_started_late_is_reached_by_retrying() -> None:
    port = portpicker.pick_unused_port()
    service = FakePredictionService(lambda attempt: "ok")
    servers: list[grpc.Server] = []
    try:
        _assert_reached_after_a_late_start(
            lambda: servers.append(start_grpc(service, port)),
            GrpcClient(f"127.0.0.1:{port}", "m", timeout=2.0, retry=LATE_START_RETRY),
        )
    finally:
        for server in servers:
            server.stop(None)
    assert service.calls == 1


def test_grpc_client_is_closed_by_its_context(grpc_fake) -> None:
    _, target = grpc_fake(lambda attempt: "ok")
    with GrpcClient(target, "m") as client:
        client.predict_images([b"image"])
    with pytest.raises(ValueError, match="closed channel"):
        client.predict_images([b"image"])


def test_rest_timeout_raises_deadline_exceeded_without_retrying(rest_fake) -> None:
    server = rest_fake(lambda attempt: "slow")
    client = RestClient(server.url, "m", timeout=0.3, retry=FAST_RETRY)
    with client, pytest.raises(DeadlineExceededError, match=r"within 0\.3s") as caught:
        client.predict_images([b"image"])
    # The read timeout or the whole-call deadline (both at 0.3 s), whichever fires first; never retried.
    assert caught.value.__cause__ is None or isinstance(caught.value.__cause__, requests.Timeout)
    assert server.calls == 1


def test_rest_retries_503_and_maps_other_statuses_without_retrying(rest_fake) -> None:
    flaky = rest_fake(lambda attempt: (503, "overloaded") if attempt < 2 else "ok")
    with RestClient(flaky.url, "m", retry=FAST_RETRY) as client:
        np.testing.assert_allclose(client.predict_images([b"image"]).probabilities, PROBABILITIES)
    assert flaky.calls == 2
    bad = rest_fake(lambda attempt: (400, "JSON Parse error: nope"))
    client = RestClient(bad.url, "m", retry=FAST_RETRY)
    with client, pytest.raises(InvalidArgumentError, match="JSON Parse error: nope") as caught:
        client.predict_images([b"image"])
    assert isinstance(caught.value.__cause__, requests.HTTPError)
    assert bad.calls == 1


def test_rest_server_started_late_is_reached_by_retrying(rest_fake) -> None:
    port = portpicker.pick_unused_port()
    _assert_reached_after_a_late_start(
        lambda: rest_fake(lambda attempt: "ok", port),
        RestClient(f"http://127.0.0.1:{port}", "m", timeout=2.0, retry=LATE_START_RETRY),
    )


def test_connect_needs_exactly_one_transport() -> None:
    with pytest.raises(ValueError, match="pass exactly one of grpc_target"):
        connect("m")
    with pytest.raises(ValueError, match="pass exactly one of grpc_target"):
        connect("m", grpc_target="localhost:1", rest_url="http://localhost:2")
    with pytest.raises(ValueError, match="timeout must be positive"):
        GrpcClient("localhost:1", "m", timeout=0)


def test_retry_policy_backs_off_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=5, initial_backoff_seconds=0.1, max_backoff_seconds=0.3, multiplier=2.0)
    assert policy.backoffs() == pytest.approx([0.1, 0.2, 0.3, 0.3])


def test_top_k_orders_classes_by_probability() -> None:
    prediction = Prediction(np.array([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]], np.float32), np.array([1, 0]), None)
    top = prediction.top_k(2)
    assert [[c for c, _ in row] for row in top] == [[1, 2], [0, 2]]
    assert top[0][0][1] == pytest.approx(0.7)
