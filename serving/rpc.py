"""gRPC front end: TF Serving's PredictionService and ModelService on `grpc.aio`.

Each handler calls the transport-independent `ServingApi` and turns a `ServingError` into the call's status
code and details, which is how TF Serving reports errors over gRPC. Regress and MultiInference are not
implemented (UNIMPLEMENTED, the generated servicer's default).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import grpc
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.apis import status_pb2 as serving_status_pb2

from serving.errors import Code, ServingError
from serving.model_config import ModelConfig, VersionPolicy

if TYPE_CHECKING:
    from serving.api import ServingApi


class _Reloadable(Protocol):
    def reload(self, config: list[ModelConfig]) -> None: ...


_Request = TypeVar("_Request")
_Response = TypeVar("_Response")
_Service = TypeVar("_Service")


def _aborts_on_serving_error(
    handler: Callable[[_Service, _Request], Awaitable[_Response]],
) -> Callable[[_Service, _Request, grpc.aio.ServicerContext], Awaitable[_Response]]:
    """Wraps a handler that takes only the request: a `ServingError` it raises aborts the call with its code."""

    @functools.wraps(handler)
    async def handle(service: _Service, request: _Request, context: grpc.aio.ServicerContext) -> _Response:
        try:
            return await handler(service, request)
        except ServingError as error:
            await context.abort(error.code.grpc_code, error.message)
            raise  # context.abort raises; this line only tells type checkers so

    return handle


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """tensorflow.serving.PredictionService."""

    def __init__(self, api: ServingApi) -> None:
        self._api = api

    @_aborts_on_serving_error
    async def Predict(  # noqa: N802 (gRPC method name)
        self, request: predict_pb2.PredictRequest
    ) -> predict_pb2.PredictResponse:
        return await self._api.predict(request)

    @_aborts_on_serving_error
    async def Classify(  # noqa: N802
        self, request: classification_pb2.ClassificationRequest
    ) -> classification_pb2.ClassificationResponse:
        return await self._api.classify(request)

    @_aborts_on_serving_error
    async def GetModelMetadata(  # noqa: N802
        self, request: get_model_metadata_pb2.GetModelMetadataRequest
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        return self._api.get_model_metadata(request)


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    """tensorflow.serving.ModelService: status, and config reloads (as TF Serving's HandleReloadConfigRequest)."""

    def __init__(self, api: ServingApi, server: _Reloadable) -> None:
        self._api = api
        self._server = server

    @_aborts_on_serving_error
    async def GetModelStatus(  # noqa: N802
        self, request: get_model_status_pb2.GetModelStatusRequest
    ) -> get_model_status_pb2.GetModelStatusResponse:
        return self._api.get_model_status(request)

    async def HandleReloadConfigRequest(  # noqa: N802
        self, request: model_management_pb2.ReloadConfigRequest, context: grpc.aio.ServicerContext
    ) -> model_management_pb2.ReloadConfigResponse:
        response = model_management_pb2.ReloadConfigResponse()
        config = request.config
        if config.WhichOneof("config") != "model_config_list":
            response.status.CopyFrom(
                serving_status_pb2.StatusProto(
                    error_code=Code.INVALID_ARGUMENT.number,
                    error_message="only model_config_list configs can be loaded by this server",
                )
            )
            return response
        try:
            models = [
                ModelConfig(
                    name=entry.name,
                    base_path=Path(entry.base_path),
                    policy=VersionPolicy.from_proto(entry.model_version_policy),
                    labels=dict(entry.version_labels),
                )
                for entry in config.model_config_list.config
            ]
            self._server.reload(models)
        except ValueError as error:
            response.status.CopyFrom(
                serving_status_pb2.StatusProto(error_code=Code.INVALID_ARGUMENT.number, error_message=str(error))
            )
        except ServingError as error:
            response.status.CopyFrom(
                serving_status_pb2.StatusProto(error_code=error.code.number, error_message=error.message)
            )
        return response
