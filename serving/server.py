"""A TF Serving–compatible model server, the stand-in for TensorFlow Serving in development and CI.

Production serves models with TensorFlow Serving (`tensorflow/serving` images; see the deploy assets). No PyPI
or Debian package ships `tensorflow_model_server`, so laptops without Docker, CI and this repository's tests
use this server instead. It speaks TF Serving's gRPC API (PredictionService Predict/Classify/GetModelMetadata,
ModelService GetModelStatus/HandleReloadConfigRequest, built on the official `tensorflow-serving-api` protos)
and its REST API (`/v1/models/...`), with the same request/response shapes, status codes and error texts, and
the same model lifecycle: version policies, polling with hot swap, version labels, server-side batching,
warmup replay and Prometheus metrics at `/monitoring/prometheus/metrics`.

Its settings are `serving.server_options.ServerOptions`; the models it serves, `serving.model_config.ModelConfig`.

Example:
    with ModelServer([ModelConfig("digits", Path("out/serving/digits"))], ServerOptions(grpc_port=0)) as server:
        print(server.grpc_target, server.rest_url)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from serving import event_loop
from serving.address import host_port, rest_base_url
from serving.api import ServingApi, replay_warmup, version_states
from serving.connections import ConnectionGuard
from serving.metrics import ServingMetrics
from serving.model_config import ModelConfig, read_model_config_file
from serving.rest import create_rest_app
from serving.rpc import ModelService, PredictionService
from serving.servable import Servable
from serving.server_core import ServerCore
from serving.server_options import ServerOptions

logger = logging.getLogger(__name__)


class ModelServer:
    """Serves models over gRPC and REST until stopped.

    Args:
        models: The models to serve (name, base path, version policy, labels); or
        model_config_file: a TF Serving models.config to read them from (and re-read when
            `options.config_poll_interval_seconds` > 0).
        options: Ports, limits, polling and batching.
        served_from: With `model_config_file`: serve each of its models from this base path instead of the one
            the file names (a rollout track's file names the servers' mount, `/models/<model>`; `tfxp serve
            --track` serves it from the host's push directory).

    Raises:
        ValueError: neither or both of `models` and `model_config_file`, or an invalid config file.
        FailedPreconditionError: a label of the config points at a version that is not available and the options
            allow no such label (TF Serving fails to start then; `serving.server_core`).
    """

    def __init__(
        self,
        models: Sequence[ModelConfig] | None = None,
        options: ServerOptions | None = None,
        model_config_file: Path | None = None,
        served_from: Path | None = None,
    ) -> None:
        if (models is None) == (model_config_file is None):
            raise ValueError("pass either models or model_config_file")
        self.options = options or ServerOptions()
        self._config_file = model_config_file
        self._served_from = served_from
        self._config = list(models) if models is not None else self._read_config_file()
        self.metrics = ServingMetrics()
        self.core = ServerCore(
            self._config,
            self._load,
            allow_labels_for_unavailable_models=self.options.allow_version_labels_for_unavailable_models,
            force_allow_any_labels_for_unavailable_models=(
                self.options.force_allow_any_version_labels_for_unavailable_models
            ),
        )
        self.metrics.add_gauge(
            "tfxp_serving_model_versions",
            "Model versions by state.",
            ["model_name", "state"],
            lambda: version_states(self.core),
        )
        self.api = ServingApi(self.core, self.metrics, self.options.request_limits())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._poll_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._grpc_server: grpc.aio.Server | None = None
        self._rest_runner: object = None
        self._rest_listener: asyncio.base_events.Server | None = None
        self.connections: ConnectionGuard | None = None
        self.grpc_port: int | None = None
        self.rest_port: int | None = None

    # --- addresses --------------------------------------------------------------------------------------------

    @property
    def grpc_target(self) -> str:
        """`host:port` of the gRPC API."""
        return host_port(self.options.host, self.grpc_port or 0)

    @property
    def rest_url(self) -> str:
        """Base URL of the REST API, e.g. `http://127.0.0.1:8501`."""
        return rest_base_url(self.options.host, self.rest_port or 0)

    # --- lifecycle ----------------------------------------------------------------------------------------------

    def _load(self, name: str, version: int, path: Path) -> Servable:
        servable = Servable.load(name, version, path)
        servable.start(
            self.options.batching,
            self.options.request_threads,
            on_batch=self.metrics.batch_size.labels(model_name=name).observe,
        )
        try:
            replay_warmup(servable)
        except Exception:
            servable.close()
            raise
        return servable

    def start(self) -> ModelServer:
        """Loads the initial versions, starts listening and polling; returns once requests are accepted.

        Raises:
            OSError: a port cannot be bound.
        """
        self.core.poll()
        self._loop_thread = threading.Thread(target=self._run_loop, name="serving-loop", daemon=True)
        self._loop_thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._loop_thread.join()
            self.core.unload_all()
            raise self._startup_error
        self._poll_thread = threading.Thread(target=self._poll_forever, name="serving-poll", daemon=True)
        self._poll_thread.start()
        logger.info("serving gRPC on %s, REST on %s", self.grpc_target, self.rest_url if self.rest_port else "-")
        return self

    def stop(self, grace_seconds: float = 5.0) -> None:
        """Stops accepting requests, lets in-flight ones finish (up to `grace_seconds`), unloads every version."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._loop is not None and self._loop_thread is not None:
            future = asyncio.run_coroutine_threadsafe(self._shutdown(grace_seconds), self._loop)
            future.result(timeout=grace_seconds + 10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join()
        if self._poll_thread is not None:
            self._poll_thread.join()
        self.core.unload_all()

    def wait(self) -> None:
        """Blocks until `stop()` is called from another thread (or a signal handler)."""
        self._stopping.wait()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run_loop(self) -> None:
        self._loop = event_loop.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._startup())
        except BaseException as error:
            self._startup_error = error
            self._ready.set()
            self._loop.close()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _startup(self) -> None:
        grpc_server = await self._start_grpc()
        if self.options.rest_port is not None:
            await self._start_rest(grpc_server, self.options.rest_port)

    async def _start_grpc(self) -> grpc.aio.Server:
        options = self.options
        grpc_server = self._grpc_server = grpc.aio.server(
            maximum_concurrent_rpcs=options.grpc_threads, options=_grpc_channel_options(options)
        )
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(self.api), grpc_server)
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(self.api, self), grpc_server)
        try:
            self.grpc_port = grpc_server.add_insecure_port(host_port(options.host, options.grpc_port))
        except RuntimeError as error:
            raise OSError(f"cannot bind gRPC port {host_port(options.host, options.grpc_port)}: {error}") from None
        await grpc_server.start()
        return grpc_server

    async def _start_rest(self, grpc_server: grpc.aio.Server, rest_port: int) -> None:
        from aiohttp import web

        options = self.options
        runner = web.AppRunner(
            create_rest_app(
                self.api,
                options.max_request_bytes,
                options.monitoring_path,
                self.metrics,
                body_timeout=options.request_timeout_seconds,
                on_request=lambda transport: guard.request_started(transport),
            ),
            access_log=None,
            handle_signals=False,
            # Bodies reach the app as sent: serving.rest decodes gzip itself, within the size limit.
            auto_decompress=False,
            keepalive_timeout=options.idle_timeout_seconds,
            # After an early answer (408, 413), what the client still sends is read for this long, not
            # aiohttp's 10 s, so a stalled body does not hold the connection.
            lingering_time=0.5,
        )
        await runner.setup()
        assert runner.server is not None
        guard = self.connections = ConnectionGuard(
            runner.server, options.max_connections, options.request_timeout_seconds
        )
        try:
            self._rest_listener = await asyncio.get_running_loop().create_server(
                guard.protocol, options.host, rest_port, reuse_port=False
            )
        except OSError as error:
            await runner.cleanup()
            await grpc_server.stop(None)
            raise OSError(f"cannot bind REST port {host_port(options.host, rest_port)}: {error}") from None
        self._rest_runner = runner
        self.rest_port = self._rest_listener.sockets[0].getsockname()[1]

    async def _shutdown(self, grace_seconds: float) -> None:
        if self._rest_listener is not None:
            self._rest_listener.close()
        if self._rest_runner is not None:
            await self._rest_runner.cleanup()  # type: ignore[attr-defined]
        if self._grpc_server is not None:
            await self._grpc_server.stop(grace_seconds)

    def _poll_forever(self) -> None:
        config_wait = self.options.config_poll_interval_seconds
        since_config = 0.0
        while not self._stopping.wait(self.options.poll_interval_seconds):
            since_config += self.options.poll_interval_seconds
            if self._config_file is not None and config_wait > 0 and since_config >= config_wait:
                since_config = 0.0
                self._reload_config_file()
            try:
                self.core.poll()
            except Exception:  # keep polling: one bad round must not stop version updates for good
                logger.exception("polling the model base paths failed")

    def _read_config_file(self) -> list[ModelConfig]:
        assert self._config_file is not None
        models = read_model_config_file(self._config_file)
        if self._served_from is None:
            return models
        return [dataclasses.replace(model, base_path=self._served_from) for model in models]

    def _reload_config_file(self) -> None:
        assert self._config_file is not None
        try:
            config = self._read_config_file()
            if config != self._config:  # a refused config stays unequal, so it is tried again at every poll
                self.reload(config)
        except Exception as error:
            # TF Serving logs the same and keeps the config in force (model_servers/server.cc:175-179).
            logger.error("PollFilesystemAndReloadConfig failed to ReloadConfig (%s): %s", self._config_file, error)

    def reload(self, config: Sequence[ModelConfig]) -> None:
        """Adopts a new model list; its labels are checked first, against the versions available now.

        Raises:
            ServingError: FAILED_PRECONDITION for a label the rules refuse (`serving.server_core`); nothing of
                the new config is applied and the old one stays in force.
        """
        self.core.reload(config)
        self._config = list(config)
        logger.info("model config reloaded: %s", ", ".join(model.name for model in config))


def _grpc_channel_options(options: ServerOptions) -> list[tuple[str, int]]:
    """The gRPC server's channel arguments for `options`."""
    return [
        ("grpc.max_receive_message_length", options.max_request_bytes),
        ("grpc.max_send_message_length", -1),
        ("grpc.so_reuseport", 0),
        # Stalled peers: a connection that never finishes its HTTP/2 handshake, or sits idle, is closed; at most
        # max_connections at once (more are refused by gRPC core), each with at most grpc_threads streams.
        ("grpc.server_handshake_timeout_ms", int(options.request_timeout_seconds * 1000)),
        ("grpc.max_connection_idle_ms", int(options.idle_timeout_seconds * 1000)),
        ("grpc.max_allowed_incoming_connections", options.max_connections),
        ("grpc.max_concurrent_streams", options.grpc_threads),
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
    ]
