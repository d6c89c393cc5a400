"""A client for TF Serving (or the local server) over gRPC or REST, behind one interface: `connect` picks one.

The interface, its retries and answers are `serving.base_client`; the transports `serving.grpc_client` and
`serving.rest_client`. Every call has a timeout. Calls that fail with UNAVAILABLE (server not up yet, restarting,
batch queue full) are retried with exponential backoff; every other error is raised at once as a
`serving.errors.ServingError` subclass (`InvalidArgumentError`, `NotFoundError`, ...) chained `from` the gRPC or
HTTP error.

Example:
    with connect(grpc_target="localhost:8500", model_name="digits") as client:
        prediction = client.predict_images([Path("7.png").read_bytes()])
        prediction.top_k(3)  # [[(7, 0.98), (1, 0.01), (9, 0.004)]]
"""

from __future__ import annotations

from serving.base_client import DEFAULT_TIMEOUT_SECONDS, RetryPolicy, ServingClient
from serving.grpc_client import GrpcClient
from serving.rest_client import RestClient


def connect(
    model_name: str,
    grpc_target: str | None = None,
    rest_url: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    retry: RetryPolicy | None = None,
) -> ServingClient:
    """A gRPC client for `grpc_target` (`host:port`) or a REST client for `rest_url`; pass exactly one.

    Raises:
        ValueError: both or neither given, or a malformed target or URL (see `serving.address`).
    """
    if (grpc_target is None) == (rest_url is None):
        raise ValueError("pass exactly one of grpc_target (host:port) and rest_url (http://host:port)")
    if grpc_target is not None:
        return GrpcClient(grpc_target, model_name, timeout, retry)
    return RestClient(rest_url or "", model_name, timeout, retry)
