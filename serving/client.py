"""A small client for TF Serving (or the local server) over gRPC or REST, behind one interface.

Every call has a timeout. Calls that fail with UNAVAILABLE (server not up yet, restarting, batch queue full) are
retried with exponential backoff; every other error is raised at once as a `serving.errors.ServingError`
subclass (`InvalidArgumentError`, `NotFoundError`, ...) chained `from` the gRPC or HTTP error.

Example:
    with connect(grpc_target="localhost:8500", model_name="digits") as client:
        prediction = client.predict_images([Path("7.png").read_bytes()])
        prediction.top_k(3)  # [[(7, 0.98), (1, 0.01), (9, 0.004)]]
"""

from __future__ import annotations

import abc
import base64
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import numpy as np
import requests
from google.protobuf import json_format
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

from foundation.contract import INPUT_IMAGE_BYTES, OUTPUT_CLASSES, OUTPUT_PROBABILITIES
from foundation.contract import SIGNATURE_DEFAULT as DEFAULT_SIGNATURE
from foundation.deadline import with_deadline
from serving.address import parse_grpc_target, parse_rest_url
from serving.config_error import ServingConfigError
from serving.errors import (
    Code,
    DeadlineExceededError,
    ServingError,
    UnavailableError,
    code_from_grpc,
    code_from_http,
    code_from_number,
    error_for,
)
from serving.tensors import tensor_proto_to_ndarray, write_tensor_proto

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of calls that fail with UNAVAILABLE.

    Attributes:
        max_attempts: Attempts in total (1 = no retry).
        initial_backoff_seconds: Wait before the first retry.
        max_backoff_seconds: Longest wait between attempts.
        multiplier: Backoff growth per retry.
    """

    max_attempts: int = 4
    initial_backoff_seconds: float = 0.2
    max_backoff_seconds: float = 2.0
    multiplier: float = 2.0

    def backoffs(self) -> list[float]:
        """The waits before attempts 2..max_attempts."""
        waits, wait = [], self.initial_backoff_seconds
        for _ in range(self.max_attempts - 1):
            waits.append(min(wait, self.max_backoff_seconds))
            wait *= self.multiplier
        return waits


@dataclass(frozen=True)
class Prediction:
    """The `serving_default` outputs for a batch of images.

    Attributes:
        probabilities: float32 [N, C].
        classes: int64 [N], the arg-max class of each image.
        model_version: The version that answered (gRPC reports it; REST does not, so None there).
    """

    probabilities: np.ndarray
    classes: np.ndarray
    model_version: int | None

    def top_k(self, k: int) -> list[list[tuple[int, float]]]:
        """The `k` most likely (class, probability) pairs of each image, most likely first."""
        order = np.argsort(-self.probabilities, axis=1, kind="stable")[:, :k]
        return [[(int(c), float(self.probabilities[row, c])) for c in order[row]] for row in range(len(order))]


@dataclass(frozen=True)
class VersionStatus:
    """One entry of GetModelStatus."""

    version: int
    state: str
    error_code: str
    error_message: str


class ServingClient(abc.ABC):
    """The operations both transports offer; use `GrpcClient` or `RestClient` (or `connect`).

    Args:
        model_name: The served model's name.
        timeout: Seconds each attempt may take.
        retry: Retries on UNAVAILABLE.
    """

    def __init__(self, model_name: str, timeout: float = 10.0, retry: RetryPolicy | None = None) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout}")
        self.model_name = model_name
        self.timeout = timeout
        self.retry = retry or RetryPolicy()

    def _with_retries(self, call: Callable[[], T]) -> T:
        waits = self.retry.backoffs()
        for wait in waits:
            try:
                return call()
            except UnavailableError:
                time.sleep(wait)
        return call()

    def predict_images(
        self, images: Sequence[bytes], *, version: int | None = None, label: str | None = None
    ) -> Prediction:
        """Classifies encoded images with the `serving_default` signature.

        Raises:
            ServingError: the server's error (e.g. InvalidArgumentError for an undecodable image).
        """
        array = np.empty(len(images), dtype=object)
        array[:] = list(images)
        outputs, answered_by = self._predict({INPUT_IMAGE_BYTES: array}, DEFAULT_SIGNATURE, version, label)
        return Prediction(
            probabilities=np.asarray(outputs[OUTPUT_PROBABILITIES], dtype=np.float32),
            classes=np.asarray(outputs[OUTPUT_CLASSES], dtype=np.int64),
            model_version=answered_by,
        )

    def predict(
        self,
        inputs: Mapping[str, np.ndarray],
        *,
        signature_name: str = "",
        version: int | None = None,
        label: str | None = None,
    ) -> dict[str, np.ndarray]:
        """Runs any signature: input arrays by alias in, output arrays by alias out."""
        return self._predict(inputs, signature_name, version, label)[0]

    @abc.abstractmethod
    def _predict(
        self, inputs: Mapping[str, np.ndarray], signature_name: str, version: int | None, label: str | None
    ) -> tuple[dict[str, np.ndarray], int | None]: ...

    def classify(
        self,
        examples: Sequence[example_pb2.Example],
        *,
        signature_name: str = "",
        version: int | None = None,
        label: str | None = None,
    ) -> list[list[tuple[str, float]]]:
        """TF Serving's Classify: (label, score) pairs per example."""
        return self._classify(examples, signature_name, version, label)

    @abc.abstractmethod
    def _classify(
        self, examples: Sequence[example_pb2.Example], signature_name: str, version: int | None, label: str | None
    ) -> list[list[tuple[str, float]]]: ...

    def signature_defs(
        self, *, version: int | None = None, label: str | None = None
    ) -> dict[str, meta_graph_pb2.SignatureDef]:
        """The model's SignatureDefs (GetModelMetadata)."""
        return self._signature_defs(version, label)

    @abc.abstractmethod
    def _signature_defs(self, version: int | None, label: str | None) -> dict[str, meta_graph_pb2.SignatureDef]: ...

    @abc.abstractmethod
    def status(self, *, version: int | None = None) -> list[VersionStatus]:
        """Every version the server knows of this model, newest first (GetModelStatus)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Releases the connection."""

    def __enter__(self) -> ServingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def request_model_spec(name: str, signature_name: str, version: int | None, label: str | None) -> model_pb2.ModelSpec:
    """The ModelSpec of a request: a version or a label (not both), or neither for the latest."""
    if version is not None and label:
        raise ServingConfigError(f"pass a version ({version}) or a label ({label!r}), not both")
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
        timeout: float = 10.0,
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


def to_json_value(array: np.ndarray) -> Any:
    """An array as TF Serving's REST API takes it: nested lists, bytes as `{"b64": ...}`."""
    if array.dtype == object or array.dtype.kind == "S":
        encode = np.vectorize(
            lambda value: {"b64": base64.b64encode(value).decode()} if isinstance(value, bytes) else value,
            otypes=[object],
        )
        return encode(array).tolist() if array.size else []
    return array.tolist()


class RestClient(ServingClient):
    """TF Serving's REST API (`/v1/models/...`) over HTTP with keep-alive.

    Args:
        base_url: e.g. `http://localhost:8501`.
        model_name, timeout, retry: See `ServingClient`.
        columnar: Send predict inputs as `{"inputs": ...}` instead of `{"instances": ...}` rows.

    Raises:
        ValueError: `base_url` is not an http(s) URL with a host (and a port in 1-65535 if it has one).
    """

    def __init__(
        self,
        base_url: str,
        model_name: str,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        columnar: bool = False,
    ) -> None:
        super().__init__(model_name, timeout, retry)
        self.base_url = parse_rest_url(base_url)
        self.columnar = columnar
        self._session = requests.Session()
        self._output_names: dict[str, list[str]] = {}

    def _url(self, version: int | None, label: str | None, suffix: str = "") -> str:
        if version is not None and label:
            raise ServingConfigError(f"pass a version ({version}) or a label ({label!r}), not both")
        url = f"{self.base_url}/v1/models/{urllib.parse.quote(self.model_name, safe='')}"
        if version is not None:
            url += f"/versions/{version}"
        elif label:
            url += f"/labels/{urllib.parse.quote(label, safe='')}"
        return url + suffix

    def _request(self, method: str, url: str, payload: Any = None) -> Any:
        def attempt() -> Any:
            late = DeadlineExceededError(f"no whole answer from {url} within {self.timeout}s")
            try:
                # `timeout=` bounds each read only: a server trickling a byte a second would hold the call forever.
                response = with_deadline(
                    lambda: self._session.request(method, url, json=payload, timeout=self.timeout), self.timeout, late
                )
            except requests.Timeout as error:
                raise DeadlineExceededError(f"no answer from {url} within {self.timeout}s") from error
            except requests.ConnectionError as error:
                raise UnavailableError(f"cannot connect to {url}: {error}") from error
            if response.status_code == 200:
                return response.json()
            try:
                message = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:500] or response.reason
            http_error = requests.HTTPError(f"HTTP {response.status_code} from {url}", response=response)
            raise error_for(code_from_http(response.status_code), message) from http_error

        return self._with_retries(attempt)

    def _predict(
        self, inputs: Mapping[str, np.ndarray], signature_name: str, version: int | None, label: str | None
    ) -> tuple[dict[str, np.ndarray], int | None]:
        payload: dict[str, Any] = {"signature_name": signature_name} if signature_name else {}
        arrays = {alias: np.asarray(array) for alias, array in inputs.items()}
        if self.columnar:
            values = {alias: to_json_value(array) for alias, array in arrays.items()}
            payload["inputs"] = next(iter(values.values())) if len(values) == 1 else values
        elif len(arrays) == 1:
            payload["instances"] = to_json_value(next(iter(arrays.values())))
        else:
            columns = {alias: to_json_value(array) for alias, array in arrays.items()}
            rows = len(next(iter(columns.values())))
            payload["instances"] = [{alias: column[row] for alias, column in columns.items()} for row in range(rows)]
        body = self._request("POST", self._url(version, label, ":predict"), payload)
        if "outputs" in body:
            outputs = body["outputs"]
        else:
            predictions = body["predictions"]
            if predictions and isinstance(predictions[0], dict):
                outputs = {alias: [row[alias] for row in predictions] for alias in predictions[0]}
            else:
                outputs = predictions
        if not isinstance(outputs, dict):  # one output: TF Serving drops its name, so ask the metadata
            names = self._outputs_of(signature_name or DEFAULT_SIGNATURE, version, label)
            outputs = {names[0]: outputs}
        return {alias: np.asarray(value) for alias, value in outputs.items()}, None

    def _outputs_of(self, signature_name: str, version: int | None, label: str | None) -> list[str]:
        if signature_name not in self._output_names:
            definition = self.signature_defs(version=version, label=label)[signature_name]
            self._output_names[signature_name] = sorted(definition.outputs)
        return self._output_names[signature_name]

    def _classify(
        self, examples: Sequence[example_pb2.Example], signature_name: str, version: int | None, label: str | None
    ) -> list[list[tuple[str, float]]]:
        payload: dict[str, Any] = {"signature_name": signature_name} if signature_name else {}
        payload["examples"] = [_example_to_json(example) for example in examples]
        body = self._request("POST", self._url(version, label, ":classify"), payload)
        return [[(str(entry[0]), float(entry[1])) for entry in result] for result in body["results"]]

    def _signature_defs(self, version: int | None, label: str | None) -> dict[str, meta_graph_pb2.SignatureDef]:
        body = self._request("GET", self._url(version, label, "/metadata"))
        signature_map = json_format.ParseDict(
            body["metadata"]["signature_def"], get_model_metadata_pb2.SignatureDefMap(), ignore_unknown_fields=True
        )
        return dict(signature_map.signature_def)

    def status(self, *, version: int | None = None) -> list[VersionStatus]:
        body = self._request("GET", self._url(version, None))
        return [
            VersionStatus(
                version=int(entry["version"]),
                state=entry["state"],
                error_code=entry.get("status", {}).get("error_code", "OK"),
                error_message=entry.get("status", {}).get("error_message", ""),
            )
            for entry in body["model_version_status"]
        ]

    def close(self) -> None:
        self._session.close()


def _example_to_json(example: example_pb2.Example) -> dict[str, Any]:
    features: dict[str, Any] = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        if kind == "bytes_list":
            features[name] = [{"b64": base64.b64encode(value).decode()} for value in feature.bytes_list.value]
        elif kind == "float_list":
            features[name] = list(feature.float_list.value)
        elif kind == "int64_list":
            features[name] = list(feature.int64_list.value)
    return features


def connect(
    model_name: str,
    grpc_target: str | None = None,
    rest_url: str | None = None,
    timeout: float = 10.0,
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


__all__ = [
    "GrpcClient",
    "Prediction",
    "RestClient",
    "RetryPolicy",
    "ServingClient",
    "ServingError",
    "VersionStatus",
    "connect",
]
