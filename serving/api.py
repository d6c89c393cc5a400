"""The serving API, independent of transport: Predict, Classify, GetModelMetadata, GetModelStatus.

gRPC handlers pass the request protos straight in; REST handlers pass the parsed URL and body and get back
the JSON TF Serving answers. Both record TF Serving's request metrics, under the model's name for configured
models and under `UNKNOWN_MODEL` for any other name, so clients cannot add series at will, and tfxp's per-version
ones (`ServingMetrics.observe_version`): the version the request resolved to and its rows' predicted classes.
Request sizes are checked against `RequestLimits` before any input is decoded. Methods that run the model are
coroutines: they hold the servable while its (possibly batched) run is pending, so an unload in the meantime
waits for them.

Example:
    api = ServingApi(core, metrics, RequestLimits(max_bytes=16 << 20, max_batch_size=32))
    response = await api.predict(request)                        # gRPC
    body = await api.rest_predict("digits", None, None, raw)     # REST, a JSON-able dict
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from google.protobuf import any_pb2, json_format
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_pb2,
    predict_pb2,
    status_pb2,
)

from serving import classify, predicted_class
from serving.errors import Code, InvalidArgumentError, NotFoundError, ServingError
from serving.json_tensor import outputs_to_json, parse_json_body, predict_inputs_from_json, signature_name_of
from serving.limits import RequestLimits, declared_arrays, declared_tensor_protos
from serving.manager import State
from serving.metrics import ServingMetrics
from serving.servable import DEFAULT_SIGNATURE, Servable, Signature
from serving.server_core import ServerCore
from serving.tensors import packed_tensor_proto, tensor_proto_to_ndarray, write_tensor_proto
from serving.warmup import read_warmup_requests

SIGNATURE_DEF = "signature_def"
UNKNOWN_MODEL = "__unknown__"  # the metrics' model_name for requests naming a model that is not configured
T = TypeVar("T")


def _model_spec(name: str, version: int, signature_name: str | None) -> model_pb2.ModelSpec:
    # TF Serving's MakeModelSpec: an empty signature name is reported as serving_default; None = omitted.
    spec = model_pb2.ModelSpec(name=name)
    spec.version.value = version
    if signature_name is not None:
        spec.signature_name = signature_name or DEFAULT_SIGNATURE
    return spec


def _url_model_spec(name: str, version: int | None, label: str | None) -> model_pb2.ModelSpec:
    """The ModelSpec a REST URL names: /v1/models/<name>, then /versions/<v> or /labels/<l> (never both)."""
    spec = model_pb2.ModelSpec(name=name)
    if version is not None:
        spec.version.value = version
    elif label:
        spec.version_label = label
    return spec


def _version_of(spec: model_pb2.ModelSpec) -> tuple[int | None, str | None]:
    choice = spec.WhichOneof("version_choice")
    if choice == "version":
        return spec.version.value, None
    if choice == "version_label":
        return None, spec.version_label
    return None, None


@dataclass
class _Resolved:
    """What a measured request found out: the version it resolved to ("" until then), its predicted classes."""

    version: str = ""
    classes: list[str] = dataclasses.field(default_factory=list)

    def servable(self, servable: Servable) -> Servable:
        self.version = str(servable.version)
        return servable


class ServingApi:
    """Request handling shared by the gRPC and REST front ends.

    Args:
        core: The models and their versions.
        metrics: Where request counts and latencies are recorded.
        limits: Request size limits, checked before inputs are decoded (default: 16 MiB, no row limit).
    """

    def __init__(self, core: ServerCore, metrics: ServingMetrics, limits: RequestLimits | None = None) -> None:
        self.core = core
        self.metrics = metrics
        self.limits = limits or RequestLimits()

    async def _measured(
        self, model_name: str, api: str, entrypoint: str, call: Callable[[_Resolved], Awaitable[T]]
    ) -> T:
        started = time.perf_counter()
        status = "OK"
        resolved = _Resolved()
        try:
            return await call(resolved)
        except ServingError as error:
            status = error.code.name
            raise
        finally:
            label = model_name if self.core.model(model_name) is not None else UNKNOWN_MODEL
            microseconds = (time.perf_counter() - started) * 1e6
            self.metrics.request_count.inc(model_name=label, status=status)
            self.metrics.request_latency.labels(model_name=label, API=api, entrypoint=entrypoint).observe(microseconds)
            self.metrics.observe_version(label, resolved.version, status, microseconds, resolved.classes)

    async def _run(
        self, servable: Servable, signature: Any, inputs: dict[str, np.ndarray], outputs: tuple[str, ...], api: str
    ) -> dict[str, np.ndarray]:
        started = time.perf_counter()
        result = await servable.submit_async(signature, inputs, outputs)
        self.metrics.runtime_latency.labels(model_name=servable.name, API=api, runtime="TF2").observe(
            (time.perf_counter() - started) * 1e6
        )
        return result

    # --- gRPC -------------------------------------------------------------------------------------------------

    async def predict(self, request: predict_pb2.PredictRequest) -> predict_pb2.PredictResponse:
        """PredictionService.Predict."""

        async def call(resolved: _Resolved) -> predict_pb2.PredictResponse:
            if not request.HasField("model_spec"):
                raise InvalidArgumentError("Missing ModelSpec")
            version, label = _version_of(request.model_spec)
            with self.core.acquire(request.model_spec.name, version, label) as servable:
                signature, outputs = await self._predict(resolved.servable(servable), request)
                resolved.classes = predicted_class.predicted_classes(outputs, servable.class_names)
                response = predict_pb2.PredictResponse(
                    model_spec=_model_spec(servable.name, servable.version, request.model_spec.signature_name)
                )
                for alias, array in outputs.items():
                    write_tensor_proto(response.outputs[alias], array, signature.outputs[alias].dtype)
                return response

        return await self._measured(request.model_spec.name, "Predict", "GRPC", call)

    async def _predict(
        self, servable: Servable, request: predict_pb2.PredictRequest
    ) -> tuple[Signature, dict[str, np.ndarray]]:
        """The one Predict behind both transports (REST turns its JSON into the `PredictRequest` first, as TF
        Serving's HTTP handler does): limits on what the request declares, decoding, checks, the run."""
        signature = servable.signature_for_predict(request.model_spec.signature_name)
        self.limits.check(declared_tensor_protos(request.inputs), signature.batch_inputs)
        inputs = {alias: tensor_proto_to_ndarray(proto, alias) for alias, proto in request.inputs.items()}
        servable.validate_inputs(signature, inputs)
        self.limits.check_images(inputs)
        outputs = await self._run(servable, signature, inputs, tuple(request.output_filter), "Predict")
        return signature, outputs

    async def classify(
        self, request: classification_pb2.ClassificationRequest, entrypoint: str = "GRPC"
    ) -> classification_pb2.ClassificationResponse:
        """PredictionService.Classify."""

        async def call(resolved: _Resolved) -> classification_pb2.ClassificationResponse:
            if not request.HasField("model_spec"):
                raise InvalidArgumentError("Missing ModelSpec")
            version, label = _version_of(request.model_spec)
            with self.core.acquire(request.model_spec.name, version, label) as servable:
                signature, inputs = classify.classification_inputs(resolved.servable(servable), request)
                self.limits.check(declared_arrays(inputs), signature.batch_inputs)
                self.limits.check_pixels(classify.bytes_values(request.input))
                outputs = await self._run(servable, signature, inputs, (), "Classify")
                result = classify.classification_result(signature, outputs, len(inputs[classify.INPUTS]))
                resolved.classes = predicted_class.classified_classes(result, servable.class_names)
                return classification_pb2.ClassificationResponse(
                    model_spec=_model_spec(servable.name, servable.version, request.model_spec.signature_name),
                    result=result,
                )

        return await self._measured(request.model_spec.name, "Classify", entrypoint, call)

    def get_model_metadata(
        self, request: get_model_metadata_pb2.GetModelMetadataRequest
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        """PredictionService.GetModelMetadata (the `signature_def` field, the only one TF Serving supports)."""
        if not request.HasField("model_spec"):
            raise InvalidArgumentError("Missing ModelSpec")
        if not request.metadata_field:
            raise InvalidArgumentError("GetModelMetadataRequest must specify at least one metadata_field")
        for field in request.metadata_field:
            if field != SIGNATURE_DEF:
                raise InvalidArgumentError(f"Metadata field {field} is not supported")
        version, label = _version_of(request.model_spec)
        with self.core.acquire(request.model_spec.name, version, label) as servable:
            signature_map = get_model_metadata_pb2.SignatureDefMap()
            for key, definition in servable.signature_defs.items():
                signature_map.signature_def[key].CopyFrom(definition)
            packed = any_pb2.Any()
            packed.Pack(signature_map)
            response = get_model_metadata_pb2.GetModelMetadataResponse(
                model_spec=_model_spec(servable.name, servable.version, None)
            )
            response.metadata[SIGNATURE_DEF].CopyFrom(packed)
            return response

    def get_model_status(
        self, request: get_model_status_pb2.GetModelStatusRequest
    ) -> get_model_status_pb2.GetModelStatusResponse:
        """ModelService.GetModelStatus: every known version, newest first (a version label is ignored, as in
        TF Serving, which reports all versions unless a version number is given)."""
        if not request.HasField("model_spec"):
            raise InvalidArgumentError("Missing ModelSpec")
        name = request.model_spec.name
        manager = self.core.model(name)
        states = manager.states() if manager else {}
        if request.model_spec.WhichOneof("version_choice") == "version":
            version = request.model_spec.version.value
            if version not in states:
                raise NotFoundError(f"Could not find version {version} of model {name}")
            states = {version: states[version]}
        elif not states:
            raise NotFoundError(f"Could not find any versions of model {name}")
        response = get_model_status_pb2.GetModelStatusResponse()
        for version in sorted(states, reverse=True):
            state = states[version]
            entry = response.model_version_status.add(
                version=version, state=get_model_status_pb2.ModelVersionStatus.State.Value(state.state.name)
            )
            entry.status.CopyFrom(
                status_pb2.StatusProto(error_code=Code.UNKNOWN.number if state.error else 0, error_message=state.error)
            )
        return response

    # --- REST -------------------------------------------------------------------------------------------------

    async def rest_predict(self, name: str, version: int | None, label: str | None, body: bytes) -> dict[str, Any]:
        """POST /v1/models/<name>[/versions/<v>|/labels/<l>]:predict: the JSON becomes a `PredictRequest`
        (`serving.json_tensor` reads it with the signature's dtypes) that runs through `_predict`."""

        async def call(resolved: _Resolved) -> dict[str, Any]:
            with self.core.acquire(name, version, label) as servable:
                resolved.servable(servable)
                document = parse_json_body(body)
                signature_name = signature_name_of(document)
                signature = servable.signature_for_rest(signature_name)
                input_types = {alias: info.dtype for alias, info in signature.inputs.items()}
                inputs, fmt = predict_inputs_from_json(document, input_types)
                request = predict_pb2.PredictRequest(
                    model_spec=_model_spec(servable.name, servable.version, signature_name)
                )
                for alias, array in inputs.items():
                    request.inputs[alias].CopyFrom(packed_tensor_proto(array, input_types[alias]))
                _, outputs = await self._predict(servable, request)
                resolved.classes = predicted_class.predicted_classes(outputs, servable.class_names)
                return outputs_to_json(outputs, fmt)

        return await self._measured(name, "Predict", "REST", call)

    async def rest_classify(self, name: str, version: int | None, label: str | None, body: bytes) -> dict[str, Any]:
        """POST /v1/models/<name>[/versions/<v>|/labels/<l>]:classify."""
        document = parse_json_body(body)
        request = classification_pb2.ClassificationRequest(model_spec=_url_model_spec(name, version, label))
        request.model_spec.signature_name = signature_name_of(document)
        request.input.CopyFrom(classify.classification_request_from_json(document))
        response = await self.classify(request, entrypoint="REST")
        return classify.classification_result_to_json(response.result)

    def rest_metadata(self, name: str, version: int | None, label: str | None) -> dict[str, Any]:
        """GET /v1/models/<name>[/versions/<v>|/labels/<l>]/metadata, in TF Serving's JSON layout."""
        if not name:
            raise InvalidArgumentError("Missing model name in request.")
        request = get_model_metadata_pb2.GetModelMetadataRequest(
            model_spec=_url_model_spec(name, version, label), metadata_field=[SIGNATURE_DEF]
        )
        response = self.get_model_metadata(request)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata[SIGNATURE_DEF].Unpack(signature_map)
        options = {"preserving_proto_field_name": True, "always_print_fields_with_no_presence": True}
        return {
            "model_spec": json_format.MessageToDict(response.model_spec, **options),
            "metadata": {SIGNATURE_DEF: json_format.MessageToDict(signature_map, **options)},
        }

    def rest_status(self, name: str, version: int | None, label: str | None) -> dict[str, Any]:
        """GET /v1/models/<name>[/versions/<v>|/labels/<l>]."""
        if not name:
            raise InvalidArgumentError("Missing model name in request.")
        request = get_model_status_pb2.GetModelStatusRequest(model_spec=_url_model_spec(name, version, label))
        return json_format.MessageToDict(self.get_model_status(request), always_print_fields_with_no_presence=True)


def version_states(core: ServerCore) -> dict[tuple[str, ...], float]:
    """(model, state) → number of versions, for the versions gauge."""
    counts: dict[tuple[str, ...], float] = {}
    for manager in core.models():
        for state in State:
            counts[(manager.config.name, state.name)] = 0
        for version_state in manager.states().values():
            counts[(manager.config.name, version_state.state.name)] += 1
    return counts


def replay_warmup(servable: Servable) -> int:
    """Runs a started servable's `assets.extra/tf_serving_warmup_requests` once (Predict and Classify logs).

    Returns:
        The number of records replayed.

    Raises:
        ValueError: a record of another kind, or a failing request (TF Serving fails the load too).
    """
    records = read_warmup_requests(servable.path)
    for index, record in enumerate(records):
        kind = record.WhichOneof("log_type")
        try:
            if kind == "predict_log":
                request = record.predict_log.request
                signature = servable.signature_for_predict(request.model_spec.signature_name)
                inputs = {alias: tensor_proto_to_ndarray(proto, alias) for alias, proto in request.inputs.items()}
                servable.validate_inputs(signature, inputs)
                servable.submit(signature, inputs, tuple(request.output_filter)).result()
            elif kind == "classify_log":
                signature, inputs = classify.classification_inputs(servable, record.classify_log.request)
                servable.submit(signature, inputs, ()).result()
            else:
                raise ValueError(f"Unsupported log_type for warmup: {kind}")
        except ServingError as error:
            raise ValueError(f"warmup record {index} of {servable.path} failed: {error.message}") from error
    return len(records)
