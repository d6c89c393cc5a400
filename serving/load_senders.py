"""What the asyncio load test (`serving.loadtest.run_async_load_test`) sends: each distinct request built once, then
sent over gRPC or REST, a failure raised as the TF Serving error its code, status or exception stands for.

Example:
    send = grpc_sender(channel, "localhost:8500", "digits", [[png]], timeout=10.0, signature_name="serving_default")
    version = await send(0)  # "3": the model version that answered
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Awaitable, Callable

import aiohttp
import grpc
import numpy as np
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from foundation.bounded import parse_json, size_text
from foundation.contract import INPUT_IMAGE_BYTES
from foundation.redirects import shown
from serving.base_client import MAX_MESSAGE_BYTES
from serving.errors import Code, code_from_grpc, code_from_http, error_for
from serving.grpc_client import request_model_spec
from serving.rest_client import to_json_value
from serving.tensors import write_tensor_proto

# Sends the request at an index and says which model version answered (None when the answer does not say).
Sender = Callable[[int], Awaitable[str | None]]

# The most of an error answer kept for its message.
_ERROR_BYTES = 64 * 1024


def grpc_sender(
    channel: grpc.aio.Channel,
    target: str,
    model_name: str,
    batches: list[list[bytes]],
    timeout: float,
    signature_name: str,
) -> Sender:
    """Sends the `index`-th request (modulo the batches) to `target`'s PredictionService; the version that
    answered, or a `ServingError` by the call's gRPC code."""
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    requests = []
    for batch in batches:
        request = predict_pb2.PredictRequest(model_spec=request_model_spec(model_name, signature_name, None, None))
        write_tensor_proto(request.inputs[INPUT_IMAGE_BYTES], np.array(batch, dtype=object))
        requests.append(request)

    async def send(index: int) -> str | None:
        try:
            response = await stub.Predict(requests[index % len(requests)], timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise error_for(code_from_grpc(error.code()), f"{error.details()} (gRPC {target})") from error
        spec = response.model_spec
        return str(spec.version.value) if spec.HasField("version") else None

    return send


def rest_sender(
    session: aiohttp.ClientSession, base_url: str, model_name: str, batches: list[list[bytes]], signature_name: str
) -> Sender:
    """Posts the `index`-th body (modulo the batches) to the model's `:predict` URL; None (REST does not say which
    version answered), or a `ServingError` by the HTTP status, timeout or connection failure."""
    url = f"{base_url.rstrip('/')}/v1/models/{urllib.parse.quote(model_name, safe='')}:predict"
    bodies = [
        json.dumps(
            {"signature_name": signature_name, "instances": to_json_value(np.array(batch, dtype=object))}
        ).encode()
        for batch in batches
    ]
    headers = {"Content-Type": "application/json"}

    async def send(index: int) -> str | None:
        try:
            # No redirect is followed: a load test measures the server it was given (`foundation.redirects`).
            body_sent = bodies[index % len(bodies)]
            async with session.post(url, data=body_sent, headers=headers, allow_redirects=False) as response:
                body = await _read_answer(response, url)
                if 300 <= response.status < 400:
                    location = response.headers.get("Location", "nowhere")
                    raise error_for(
                        Code.FAILED_PRECONDITION,
                        f"{url} answered HTTP {response.status}, a redirect to {shown(location)}; the load test "
                        "follows no redirect: pass the address it points to",
                    )
                if response.status != 200:
                    try:
                        message = parse_json(body)["error"]
                    except (ValueError, KeyError, TypeError):
                        message = body[:500].decode(errors="replace") or str(response.reason)
                    raise error_for(code_from_http(response.status), f"{message} (REST {url})")
        except TimeoutError as error:  # aiohttp's ServerTimeoutError subclasses it
            raise error_for(Code.DEADLINE_EXCEEDED, f"no answer from {url} in time") from error
        except aiohttp.ClientConnectionError as error:
            raise error_for(Code.UNAVAILABLE, f"cannot connect to {url}: {error}") from error
        return None  # REST responses do not say which version answered

    return send


async def _read_answer(response: aiohttp.ClientResponse, url: str) -> bytes:
    """The first 64 KiB of the answer (for an error's message); the rest read and dropped, up to the cap."""
    kept, size = b"", 0
    while chunk := await response.content.read(1 << 20):
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            response.close()
            raise error_for(
                Code.RESOURCE_EXHAUSTED,
                f"the answer of {url} is larger than {size_text(MAX_MESSAGE_BYTES)}, the most tfxp reads of one answer",
            )
        if len(kept) < _ERROR_BYTES:
            kept += chunk[: _ERROR_BYTES - len(kept)]
    return kept
