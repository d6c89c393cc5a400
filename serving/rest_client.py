"""TF Serving's REST API (`/v1/models/...`) behind `ServingClient`, and arrays and Examples as its JSON.

Example:
    with RestClient("http://localhost:8501", "digits") as client:
        client.predict_images([Path("7.png").read_bytes()]).classes  # array([7])
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import requests
from google.protobuf import json_format
from tensorflow.core.example import example_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

from foundation.bounded import parse_json, read_capped, size_text
from foundation.contract import SIGNATURE_DEFAULT as DEFAULT_SIGNATURE
from foundation.deadline import with_deadline
from foundation.redirects import RedirectRefusedError, guard_session
from serving.address import parse_rest_url
from serving.base_client import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_MESSAGE_BYTES,
    RetryPolicy,
    ServingClient,
    VersionStatus,
    check_version_or_label,
)
from serving.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    ResourceExhaustedError,
    UnavailableError,
    code_from_http,
    error_for,
)


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
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        columnar: bool = False,
    ) -> None:
        super().__init__(model_name, timeout, retry)
        self.base_url = parse_rest_url(base_url)
        self.columnar = columnar
        self._session = guard_session(requests.Session())  # redirects within the origin only
        self._output_names: dict[str, list[str]] = {}

    def _url(self, version: int | None, label: str | None, suffix: str = "") -> str:
        check_version_or_label(version, label)
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
                status, reason, body = with_deadline(lambda: self._send(method, url, payload), self.timeout, late)
            except RedirectRefusedError as error:  # the server's setup, not a request's status: not retried
                raise FailedPreconditionError(str(error)) from None
            except requests.Timeout as error:
                raise DeadlineExceededError(f"no answer from {url} within {self.timeout}s") from error
            except requests.ConnectionError as error:
                raise UnavailableError(f"cannot connect to {url}: {error}") from error
            except requests.RequestException as error:  # a body cut off or undecodable (ChunkedEncodingError, ...)
                raise UnavailableError(f"the answer of {url} broke off: {error}") from error
            if status == 200:
                try:
                    return parse_json(body)
                except ValueError:
                    raise InternalError(f"{url} answered HTTP 200 with a body that is not JSON") from None
            try:
                message = parse_json(body)["error"]
            except (ValueError, KeyError, TypeError):
                message = body[:500].decode("utf-8", "replace") or reason
            raise error_for(code_from_http(status), str(message)) from requests.HTTPError(f"HTTP {status} from {url}")

        return self._with_retries(attempt)

    def _send(self, method: str, url: str, payload: Any) -> tuple[int, str, bytes]:
        """(status, reason, body) of one request; the body read up to MAX_MESSAGE_BYTES (decoded), no further."""
        with self._session.request(method, url, json=payload, timeout=self.timeout, stream=True) as response:
            too_large = ResourceExhaustedError(
                f"the answer of {url} is larger than {size_text(MAX_MESSAGE_BYTES)}, the most tfxp reads of one "
                "answer (cut off there); ask for fewer images per request"
            )
            # iter_content, not raw.read: it decodes gzip and turns a body cut off into requests' own errors.
            chunks = response.iter_content(1 << 20)
            body = read_capped(lambda size: next(chunks, b""), MAX_MESSAGE_BYTES, lambda: too_large)
            return response.status_code, str(response.reason), body

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
