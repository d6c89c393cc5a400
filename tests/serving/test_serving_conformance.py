"""Conformance of the serving API: the same requests, answers and errors as TensorFlow Serving.

The model is exported with the trainer's exporter and pushed with the pipeline's atomic pusher, then served by
the local server (`serving.server.ModelServer`, what `tfxp serve` runs). The same tests run against a real
TF Serving when these environment variables are set (skipped otherwise):

    TFXP_TF_SERVING_GRPC=localhost:8500
    TFXP_TF_SERVING_REST=http://localhost:8501
    TFXP_TF_SERVING_MODEL_BASE=/path/the/server/watches/conformance   # base path of model "conformance"

e.g. `docker run -p 8500:8500 -p 8501:8501 -v /tmp/conf:/models/conformance -e MODEL_NAME=conformance
tensorflow/serving:2.19.1` with TFXP_TF_SERVING_MODEL_BASE=/tmp/conf. A few cases check behaviour that is
this server's own (request size limit, batch size limit, metrics) and run only against it.
"""

from __future__ import annotations

import base64
import http.client
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import requests
import tensorflow as tf
from serving_fixtures import image_example, random_png, tiny_classifier, write_classification_version
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from components.trainer.export import export_saved_model
from foundation.preprocessing_spec import PreprocessingSpec
from foundation.publish import publish_version
from serving.batching import BatchingOptions
from serving.errors import InvalidArgumentError
from serving.grpc_client import GrpcClient
from serving.model_config import ModelConfig
from serving.rest_client import RestClient
from serving.server import ModelServer
from serving.server_options import ServerOptions

MODEL = "conformance"
CLASSIFIER = "classifier"
SIZE, CHANNELS, LABELS = 8, 1, ["zero", "one", "two"]
MAX_BATCH = 8
MAX_REQUEST_BYTES = 256 * 1024
CONTRACT_SIGNATURES = {"serving_default", "serving_tf_example", "serving_preprocessed"}


@dataclass(frozen=True)
class Endpoint:
    grpc: str
    rest: str
    version_dir: Path
    local: bool

    @property
    def version(self) -> int:
        return int(self.version_dir.name)


def images(count: int, seed: int = 0) -> list[bytes]:
    return [random_png(SIZE, CHANNELS, seed + index) for index in range(count)]


def b64(data: bytes) -> dict[str, str]:
    return {"b64": base64.b64encode(data).decode()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("export") / "model"
    model = tiny_classifier(SIZE, CHANNELS, len(LABELS), seed=1)
    export_saved_model(model, str(directory), PreprocessingSpec(SIZE, CHANNELS), LABELS, warmup_images=images(2))
    return directory


def _wait_available(grpc_target: str, model: str, version: int, seconds: float = 60.0) -> None:
    client = GrpcClient(grpc_target, model, timeout=5.0)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            try:
                if any(s.version == version and s.state == "AVAILABLE" for s in client.status()):
                    return
            except Exception:  # not loaded yet: keep polling until the deadline
                pass
            time.sleep(0.5)
    finally:
        client.close()
    raise TimeoutError(f"{model} version {version} did not become AVAILABLE at {grpc_target} in {seconds}s")


@pytest.fixture(scope="module", params=["local", "tf_serving"])
def endpoint(
    request: pytest.FixtureRequest, exported: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Endpoint]:
    if request.param == "tf_serving":
        names = ("TFXP_TF_SERVING_GRPC", "TFXP_TF_SERVING_REST", "TFXP_TF_SERVING_MODEL_BASE")
        values = [os.environ.get(name) for name in names]
        if not all(values):
            pytest.skip(f"no real TF Serving configured (set {', '.join(names)})")
        grpc_target, rest_url, base = values
        version_dir = Path(publish_version(exported, base, identity=str(exported)))  # type: ignore[arg-type]
        _wait_available(grpc_target, MODEL, int(version_dir.name))  # type: ignore[arg-type]
        yield Endpoint(grpc_target, rest_url.rstrip("/"), version_dir, local=False)  # type: ignore[arg-type, union-attr]
        return
    root = tmp_path_factory.mktemp("models")
    version_dir = Path(publish_version(exported, root / MODEL, identity=str(exported)))
    write_classification_version(root / CLASSIFIER, 1, tiny_classifier(SIZE, CHANNELS, len(LABELS), seed=1), LABELS)
    options = ServerOptions(
        grpc_port=0,
        rest_port=0,
        max_request_bytes=MAX_REQUEST_BYTES,
        batching=BatchingOptions(max_batch_size=MAX_BATCH, batch_timeout_micros=1000, num_batch_threads=2),
    )
    server = ModelServer([ModelConfig(MODEL, root / MODEL), ModelConfig(CLASSIFIER, root / CLASSIFIER)], options)
    server.start()
    try:
        yield Endpoint(server.grpc_target, server.rest_url, version_dir, local=True)
    finally:
        server.stop()


def in_process_probabilities(version_dir: Path, batch: list[bytes]) -> np.ndarray:
    loaded = tf.saved_model.load(str(version_dir))
    return loaded.signatures["serving_default"](image_bytes=tf.constant(batch))["probabilities"].numpy()


def test_same_probabilities_over_grpc_rest_rows_rest_columns_and_in_process(endpoint: Endpoint) -> None:
    batch = images(3, seed=10)
    expected = in_process_probabilities(endpoint.version_dir, batch)
    with GrpcClient(endpoint.grpc, MODEL) as grpc_client:
        over_grpc = grpc_client.predict_images(batch)
    with RestClient(endpoint.rest, MODEL) as rows_client:
        over_rows = rows_client.predict_images(batch)
    with RestClient(endpoint.rest, MODEL, columnar=True) as columns_client:
        over_columns = columns_client.predict_images(batch)
    for prediction in (over_grpc, over_rows, over_columns):
        np.testing.assert_allclose(prediction.probabilities, expected, atol=1e-5)
        np.testing.assert_array_equal(prediction.classes, expected.argmax(axis=1))
    assert over_grpc.model_version == endpoint.version
    assert expected.shape == (3, len(LABELS))


def test_every_contract_signature_gives_the_same_answer(endpoint: Endpoint) -> None:
    batch = images(2, seed=20)
    examples = np.array([image_example(image).SerializeToString() for image in batch], dtype=object)
    decoded = np.stack([tf.io.decode_png(image).numpy().astype(np.float32) / 255.0 for image in batch])
    with GrpcClient(endpoint.grpc, MODEL) as client:
        default = client.predict({"image_bytes": np.array(batch, dtype=object)})
        from_examples = client.predict({"examples": examples}, signature_name="serving_tf_example")
        preprocessed = client.predict({"images": decoded}, signature_name="serving_preprocessed")
    for outputs in (from_examples, preprocessed):
        np.testing.assert_allclose(outputs["probabilities"], default["probabilities"], atol=1e-5)


def test_metadata_lists_the_contract_signatures_over_both_transports(endpoint: Endpoint) -> None:
    with GrpcClient(endpoint.grpc, MODEL) as grpc_client, RestClient(endpoint.rest, MODEL) as rest_client:
        for signatures in (grpc_client.signature_defs(), rest_client.signature_defs()):
            assert set(signatures) >= CONTRACT_SIGNATURES
            default = signatures["serving_default"]
            assert default.inputs["image_bytes"].dtype == tf.string.as_datatype_enum
            assert set(default.outputs) == {"probabilities", "classes"}
    body = requests.get(f"{endpoint.rest}/v1/models/{MODEL}/metadata", timeout=10).json()
    assert body["model_spec"] == {"name": MODEL, "signature_name": "", "version": str(endpoint.version)}


def test_status_reports_the_available_version(endpoint: Endpoint) -> None:
    with GrpcClient(endpoint.grpc, MODEL) as grpc_client, RestClient(endpoint.rest, MODEL) as rest_client:
        for statuses in (grpc_client.status(), rest_client.status(), rest_client.status(version=endpoint.version)):
            assert [(s.version, s.state, s.error_code) for s in statuses] == [(endpoint.version, "AVAILABLE", "OK")]
    body = requests.get(f"{endpoint.rest}/v1/models/{MODEL}", timeout=10).json()
    assert body == {
        "model_version_status": [
            {
                "version": str(endpoint.version),
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }


def test_classify_returns_labels_and_scores(endpoint: Endpoint) -> None:
    if not endpoint.local:
        pytest.skip("the classifier model is served by the local fixture only")
    batch = images(2, seed=30)
    expected = in_process_probabilities(endpoint.version_dir, batch)  # same weights (seed 1) as the classifier
    examples = [image_example(image) for image in batch]
    for client in (GrpcClient(endpoint.grpc, CLASSIFIER), RestClient(endpoint.rest, CLASSIFIER)):
        with client:
            results = client.classify(examples, signature_name="classification")
        assert [[label for label, _ in row] for row in results] == [LABELS, LABELS]
        np.testing.assert_allclose([[score for _, score in row] for row in results], expected, atol=1e-5)


def test_classify_needs_a_classification_shaped_signature(endpoint: Endpoint) -> None:
    with GrpcClient(endpoint.grpc, MODEL) as client, pytest.raises(InvalidArgumentError) as caught:
        client.classify([image_example(images(1)[0])])
    assert "No classification inputs found in SignatureDef" in caught.value.message


def test_metrics_count_requests_by_status(endpoint: Endpoint) -> None:
    if not endpoint.local:
        pytest.skip("metrics need --monitoring_config_file on TF Serving")
    with GrpcClient(endpoint.grpc, MODEL) as client:
        client.predict_images(images(1))
    text = requests.get(f"{endpoint.rest}/monitoring/prometheus/metrics", timeout=10).text
    ok = [
        line
        for line in text.splitlines()
        if line.startswith(":tensorflow:serving:request_count{") and 'status="OK"' in line
    ]
    assert ok and float(ok[0].rsplit(" ", 1)[1]) >= 1
    assert f'tfxp_serving_model_versions{{model_name="{MODEL}",state="AVAILABLE"}} 1.0' in text


# --- bad requests ----------------------------------------------------------------------------------------------


def rest_post(endpoint: Endpoint, path: str, body: Any) -> requests.Response:
    data = body if isinstance(body, bytes) else None
    return requests.post(f"{endpoint.rest}{path}", data=data, json=None if data is not None else body, timeout=10)


def raw_http(endpoint: Endpoint, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    # http.client sends the path as given (requests would normalise `..` away).
    host_port = endpoint.rest.split("://", 1)[1]
    connection = http.client.HTTPConnection(host_port, timeout=10)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


PREDICT = f"/v1/models/{MODEL}:predict"
IMAGE = images(1, seed=99)[0]


@dataclass(frozen=True)
class RestCase:
    path: str
    body: Any
    status: int
    message: str
    portable: bool = True  # the message is TF Serving's text, so it is checked against TF Serving too


ANY_IMAGE = {"instances": [b64(IMAGE)]}
REST_CASES = {
    "malformed JSON": RestCase(PREDICT, b'{"instances": [', 400, "JSON Parse error"),
    "body not an object": RestCase(PREDICT, b"[1, 2]", 400, "Is not object"),
    "no instances or inputs": RestCase(
        PREDICT, {"signature_name": "serving_default"}, 400, "Missing 'inputs' or 'instances' key"
    ),
    "wrong input name, rows": RestCase(
        PREDICT, {"instances": [{"pixels": b64(IMAGE)}]}, 400, "does not have named input: pixels"
    ),
    "wrong input name, columns": RestCase(
        PREDICT, {"inputs": {"pixels": [b64(IMAGE)]}}, 400, "Missing named input: image_bytes in 'inputs' object."
    ),
    "wrong dtype": RestCase(PREDICT, {"instances": [1.5]}, 400, "is not of expected type: string"),
    "wrong shape": RestCase(
        PREDICT,
        {"signature_name": "serving_preprocessed", "instances": [[[0.5]]]},
        400,
        "has shape [1,1,1] but signature serving_preprocessed expects [?,8,8,1]",
        portable=False,
    ),
    "ragged inputs": RestCase(
        PREDICT,
        {"signature_name": "serving_preprocessed", "inputs": [[[[0.5]]], [[0.5]]]},
        400,
        "found at incorrect level",
    ),
    "undecodable image": RestCase(PREDICT, {"instances": [b64(b"not an image")]}, 400, "Unknown image file format"),
    "bad base64": RestCase(PREDICT, {"instances": [{"b64": "***"}]}, 400, "Unable to base64 decode"),
    "unknown signature": RestCase(
        PREDICT,
        {"signature_name": "nope", **ANY_IMAGE},
        400,
        'Serving signature name: "nope" not found in signature def',
    ),
    "unknown model": RestCase(
        "/v1/models/nope:predict", ANY_IMAGE, 404, "Servable not found for request: Latest(nope)"
    ),
    "unknown version": RestCase(
        f"/v1/models/{MODEL}/versions/999:predict",
        ANY_IMAGE,
        404,
        f"Servable not found for request: Specific({MODEL}, 999)",
    ),
    "unknown label": RestCase(
        f"/v1/models/{MODEL}/labels/nope:predict", ANY_IMAGE, 400, "Unrecognized servable version label: nope"
    ),
    "encoded ../ in model name": RestCase(
        f"/v1/models/..%2F{MODEL}:predict", ANY_IMAGE, 404, f"Servable not found for request: Latest(../{MODEL})"
    ),
}


def assert_still_serving(endpoint: Endpoint) -> None:
    with GrpcClient(endpoint.grpc, MODEL) as client:
        assert client.predict_images([IMAGE]).probabilities.shape == (1, len(LABELS))
    response = rest_post(endpoint, PREDICT, {"instances": [b64(IMAGE)]})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("case", REST_CASES.values(), ids=REST_CASES.keys())
def test_rest_bad_request(endpoint: Endpoint, case: RestCase) -> None:
    response = rest_post(endpoint, case.path, case.body)
    assert response.status_code == case.status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    if endpoint.local or case.portable:
        assert case.message in response.json()["error"]
    assert_still_serving(endpoint)


def test_rest_dot_dot_path_is_malformed_and_touches_no_files(endpoint: Endpoint) -> None:
    status, body = raw_http(endpoint, "POST", f"/v1/models/../{MODEL}:predict", b'{"instances": []}')
    assert status == 400
    assert b"Malformed request: POST /v1/models/../" in body
    status, _ = raw_http(endpoint, "GET", "/etc/passwd")
    assert status == 404
    assert_still_serving(endpoint)


def test_rest_status_errors(endpoint: Endpoint) -> None:
    response = requests.get(f"{endpoint.rest}/v1/models/nope", timeout=10)
    assert (response.status_code, response.json()) == (404, {"error": "Could not find any versions of model nope"})
    response = requests.get(f"{endpoint.rest}/v1/models/{MODEL}/versions/999", timeout=10)
    assert (response.status_code, response.json()) == (404, {"error": f"Could not find version 999 of model {MODEL}"})


def test_rest_body_over_the_limit_is_refused(endpoint: Endpoint) -> None:
    if not endpoint.local:
        pytest.skip("TF Serving's REST server has no request size limit")
    response = rest_post(endpoint, PREDICT, b"{" + b" " * MAX_REQUEST_BYTES + b"}")
    assert response.status_code == 413
    assert f"over this server's limit of {MAX_REQUEST_BYTES} bytes" in response.json()["error"]
    assert_still_serving(endpoint)


def predict_request(
    model: str = MODEL, inputs: dict[str, Any] | None = None, **spec: Any
) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    for field, value in spec.items():
        if field == "version":
            request.model_spec.version.value = value
        else:
            setattr(request.model_spec, field, value)
    for alias, value in (inputs if inputs is not None else {"image_bytes": [IMAGE]}).items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return request


@dataclass(frozen=True)
class GrpcCase:
    request: predict_pb2.PredictRequest
    code: grpc.StatusCode
    message: str
    portable: bool = True  # also run against TF Serving (False: a limit of the local server's configuration)


INVALID = grpc.StatusCode.INVALID_ARGUMENT
GRPC_CASES = {
    "wrong input name": GrpcCase(
        predict_request(inputs={"pixels": [IMAGE]}),
        INVALID,
        "input tensor alias not found in signature: pixels. Inputs expected to be in the set {image_bytes}.",
    ),
    "extra input": GrpcCase(
        predict_request(inputs={"image_bytes": [IMAGE], "extra": [1.0]}),
        INVALID,
        "Sent extra: {extra}. Missing but required: {}.",
    ),
    "wrong dtype": GrpcCase(
        predict_request(inputs={"image_bytes": [1.5]}), INVALID, "to be string but float is provided"
    ),
    "undecodable image": GrpcCase(
        predict_request(inputs={"image_bytes": [b"not an image"]}), INVALID, "Unknown image file format"
    ),
    "unknown signature": GrpcCase(
        predict_request(signature_name="nope"),
        grpc.StatusCode.FAILED_PRECONDITION,
        'Serving signature key "nope" not found.',
    ),
    "unknown model": GrpcCase(
        predict_request("nope"), grpc.StatusCode.NOT_FOUND, "Servable not found for request: Latest(nope)"
    ),
    "unknown version": GrpcCase(
        predict_request(version=999),
        grpc.StatusCode.NOT_FOUND,
        f"Servable not found for request: Specific({MODEL}, 999)",
    ),
    "unknown label": GrpcCase(
        predict_request(version_label="nope"), INVALID, "Unrecognized servable version label: nope"
    ),
    "../ in model name": GrpcCase(
        predict_request(f"../{MODEL}"),
        grpc.StatusCode.NOT_FOUND,
        f"Servable not found for request: Latest(../{MODEL})",
    ),
    "batch over max_batch_size": GrpcCase(
        predict_request(inputs={"image_bytes": [IMAGE] * (MAX_BATCH + 1)}),
        INVALID,
        f"Task size {MAX_BATCH + 1} is larger than maximum input batch size {MAX_BATCH}",
        portable=False,
    ),
    "message over the limit": GrpcCase(
        predict_request(inputs={"image_bytes": [b"x" * MAX_REQUEST_BYTES]}),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "larger than max",
        portable=False,
    ),
}


@pytest.mark.parametrize("case", GRPC_CASES.values(), ids=GRPC_CASES.keys())
def test_grpc_bad_request(endpoint: Endpoint, case: GrpcCase) -> None:
    if not case.portable and not endpoint.local:
        pytest.skip("a limit of the local server's configuration")
    with grpc.insecure_channel(endpoint.grpc) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Predict(case.request, timeout=10)
    assert caught.value.code() == case.code
    assert case.message in caught.value.details()
    assert_still_serving(endpoint)


def test_grpc_metadata_and_status_errors(endpoint: Endpoint) -> None:
    with grpc.insecure_channel(endpoint.grpc) as channel:
        prediction = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        models = model_service_pb2_grpc.ModelServiceStub(channel)
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["nope"])
        request.model_spec.name = MODEL
        with pytest.raises(grpc.RpcError) as caught:
            prediction.GetModelMetadata(request, timeout=10)
        assert (caught.value.code(), caught.value.details()) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "Metadata field nope is not supported",
        )
        status_request = get_model_status_pb2.GetModelStatusRequest()
        status_request.model_spec.name = "nope"
        with pytest.raises(grpc.RpcError) as caught:
            models.GetModelStatus(status_request, timeout=10)
        assert (caught.value.code(), caught.value.details()) == (
            grpc.StatusCode.NOT_FOUND,
            "Could not find any versions of model nope",
        )
