"""TF Serving's gRPC APIs (PredictionService, ModelService) behind `ServingClient`, and the requests' ModelSpec.

Example:
    with GrpcClient("localhost:8500", "digits") as client:
        client.status()  # [VersionStatus(version=2, state='AVAILABLE', error_code='OK', error_message='')]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
import numpy as np
from tensorflow.core.example import example_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from serving.address import parse_grpc_target
from serving.base_client import (
    DEFAULT_TIMEOUT_SECONDS,
    RetryPolicy,
    ServingClient,
    VersionStatus,
    check_version_or_label,
)
from serving.errors import Code, code_from_grpc, code_from_number, error_for
from serving.tensors import tensor_proto_to_ndarray, write_tensor_proto

T = TypeVar("T")


def request_model_spec(name: str, signature_name: str, version: int | None, label: str | None) -> model_pb2.ModelSpec:
    """The ModelSpec of a request: a version or a label (not both), or neither for the latest."""
    check_version_or_label(version, label)
    spec = model_pb2.ModelSpec(name=name, signature_name=signature_name)
    if version is not None:
        spec.version.value = version
    elif label:
        spec.version_label = label
    return spec


class GrpcClient(ServingClient):
    """TF Serving's PredictionService and ModelService over an insecure gRPC channel.

    Args:
        target: `host:port`, e.g. `localhost:8500` (`[::1]:8500` for IPv6).
        model_name, timeout, retry: See `ServingClient`.
        max_message_bytes: Largest message sent or received.

    Raises:
        ValueError: `target` is not `host:port` with a port in 1-65535.
    """

    def __init__(
        self,
        target: str,
        model_name: str,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        max_message_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        super().__init__(model_name, timeout, retry)
        parse_grpc_target(target)
        self.target = target
        # Short reconnect backoff: a server that comes up late is found by the next retry, not minutes later.
        self._channel = grpc.insecure_channel(
            target,
            options=[
                ("grpc.max_send_message_length", max_message_bytes),
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.min_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000),
            ],
        )
        self._prediction = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._models = model_service_pb2_grpc.ModelServiceStub(self._channel)

    def _call(self, method: Callable[..., T], request: Any) -> T:
        def attempt() -> T:
            try:
                return method(request, timeout=self.timeout)
            except grpc.RpcError as error:
                code = code_from_grpc(error.code()) if isinstance(error, grpc.Call) else Code.UNKNOWN
                details = error.details() if isinstance(error, grpc.Call) else str(error)
                raise error_for(code, f"{details} (gRPC {self.target})") from error

        return self._with_retries(attempt)

    def _predict(
        self, inputs: Mapping[str, np.ndarray], signature_name: str, version: int | None, label: str | None
    ) -> tuple[dict[str, np.ndarray], int | None]:
        request = predict_pb2.PredictRequest(
            model_spec=request_model_spec(self.model_name, signature_name, version, label)
        )
        for alias, array in inputs.items():
            write_tensor_proto(request.inputs[alias], np.asarray(array))
        response = self._call(self._prediction.Predict, request)
        outputs = {alias: tensor_proto_to_ndarray(proto, alias) for alias, proto in response.outputs.items()}
        return outputs, response.model_spec.version.value if response.model_spec.HasField("version") else None

    def _classify(
        self, examples: Sequence[example_pb2.Example], signature_name: str, version: int | None, label: str | None
    ) -> list[list[tuple[str, float]]]:
        request = classification_pb2.ClassificationRequest(
            model_spec=request_model_spec(self.model_name, signature_name, version, label)
        )
        request.input.example_list.examples.extend(examples)
        response = self._call(self._prediction.Classify, request)
        return [
            [(entry.label, entry.score) for entry in classifications.classes]
            for classifications in response.result.classifications
        ]

    def _signature_defs(self, version: int | None, label: str | None) -> dict[str, meta_graph_pb2.SignatureDef]:
        request = get_model_metadata_pb2.GetModelMetadataRequest(
            model_spec=request_model_spec(self.model_name, "", version, label), metadata_field=["signature_def"]
        )
        response = self._call(self._prediction.GetModelMetadata, request)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)
        return dict(signature_map.signature_def)

    def status(self, *, version: int | None = None) -> list[VersionStatus]:
        request = get_model_status_pb2.GetModelStatusRequest(
            model_spec=request_model_spec(self.model_name, "", version, None)
        )
        response = self._call(self._models.GetModelStatus, request)
        state_name = get_model_status_pb2.ModelVersionStatus.State.Name
        return [
            VersionStatus(
                version=entry.version,
                state=state_name(entry.state),
                error_code=code_from_number(entry.status.error_code).name,
                error_message=entry.status.error_message,
            )
            for entry in response.model_version_status
        ]

    def close(self) -> None:
        self._channel.close()
