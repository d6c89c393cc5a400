"""A TF Serving–compatible model server, the stand-in for TensorFlow Serving in development and CI.

Production serves models with TensorFlow Serving (`tensorflow/serving` images; see the deploy assets). No PyPI
or Debian package ships `tensorflow_model_server`, so laptops without Docker, CI and this repository's tests
use this server instead. It speaks TF Serving's gRPC API (PredictionService Predict/Classify/GetModelMetadata,
ModelService GetModelStatus/HandleReloadConfigRequest, built on the official `tensorflow-serving-api` protos)
and its REST API (`/v1/models/...`), with the same request/response shapes, status codes and error texts, and
the same model lifecycle: version policies, polling with hot swap, version labels, server-side batching,
warmup replay and Prometheus metrics at `/monitoring/prometheus/metrics`.

Example:
    with ModelServer([ModelConfig("digits", Path("out/serving/digits"))], ServerOptions(grpc_port=0)) as server:
        print(server.grpc_target, server.rest_url)
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from serving import event_loop
from serving.address import check_port, host_port, rest_base_url
from serving.api import ServingApi, replay_warmup, version_states
from serving.batching import BatchingOptions
from serving.config_error import ServingConfigError
from serving.connections import ConnectionGuard
from serving.limits import DEFAULT_MAX_REQUEST_PIXELS, RequestLimits
from serving.metrics import ServingMetrics
from serving.model_config import ModelConfig, read_model_config_file
from serving.rest import create_rest_app
from serving.rpc import ModelService, PredictionService
from serving.servable import Servable
from serving.server_core import ServerCore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerOptions:
    """How the server listens and runs models (TF Serving's flag for each in parentheses).

    Attributes:
        host: Interface to bind; loopback by default (TF Serving binds all interfaces).
        grpc_port: gRPC port (--port), 1-65535; 0 = pick a free one.
        rest_port: REST port (--rest_api_port), 1-65535; 0 = pick a free one, None = no REST.
        max_request_bytes: Largest request on either port, both its body (gzip-decompressed on REST) and the
            tensors it declares once decoded (`serving.limits`); larger ones are refused.
        max_batch_size: Most rows one request may carry, with or without batching; None = the batching
            options' `max_batch_size` when batching is on, else no limit.
        max_request_pixels: Most pixels the images of one request may declare in total (`serving.limits`).
        poll_interval_seconds: How often the base paths are checked for versions (--file_system_poll_wait_seconds).
        config_poll_interval_seconds: How often models.config is re-read; 0 = never
            (--model_config_file_poll_wait_seconds).
        batching: Server-side batching knobs (--enable_batching + --batching_parameters_file); None = off.
        request_threads: Threads running unbatched requests.
        grpc_threads: Upper bound on concurrent gRPC requests (--grpc_max_threads).
        monitoring_path: Prometheus metrics path on the REST port (monitoring.config); empty = off.
        max_connections: Most REST connections open at once; more are answered 503 and closed
            (`serving.connections`). Keep it under the process's file descriptor limit.
        request_timeout_seconds: A REST connection's first request line and headers, and each request body,
            must arrive within this; else 408 and the connection is closed. Also gRPC's handshake timeout.
        idle_timeout_seconds: A kept-alive REST connection, or an idle gRPC one, is closed after this long
            without a complete request.
        allow_version_labels_for_unavailable_models: Accept labels on versions not loaded yet.
    """

    host: str = "127.0.0.1"
    grpc_port: int = 8500
    rest_port: int | None = 8501
    max_request_bytes: int = 16 * 1024 * 1024
    max_batch_size: int | None = None
    max_request_pixels: int = DEFAULT_MAX_REQUEST_PIXELS
    poll_interval_seconds: float = 1.0
    config_poll_interval_seconds: float = 0.0
    batching: BatchingOptions | None = None
    request_threads: int = 16
    grpc_threads: int = 256
    monitoring_path: str = "/monitoring/prometheus/metrics"
    max_connections: int = 1000
    request_timeout_seconds: float = 30.0
    idle_timeout_seconds: float = 75.0
    allow_version_labels_for_unavailable_models: bool = False

    def __post_init__(self) -> None:
        check_port(self.grpc_port, "ServerOptions.grpc_port", allow_zero=True)
        if self.rest_port is not None:
            check_port(self.rest_port, "ServerOptions.rest_port", allow_zero=True)
        self.request_limits()  # checks the limits
        if self.max_connections < 1:
            raise ValueError(f"ServerOptions.max_connections must be >= 1, got {self.max_connections}")
        for name in ("request_timeout_seconds", "idle_timeout_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ServerOptions.{name} must be > 0, got {getattr(self, name)}")

    def request_limits(self) -> RequestLimits:
        """The per-request limits these options set."""
        rows = self.max_batch_size
        if rows is None and self.batching is not None:
            rows = self.batching.max_batch_size
        return RequestLimits(max_bytes=self.max_request_bytes, max_batch_size=rows, max_pixels=self.max_request_pixels)


def set_tensorflow_threads(intra_op: int, inter_op: int) -> None:
    """Sizes TensorFlow's thread pools, as TF Serving's --tensorflow_{intra,inter}_op_parallelism (0 = TF's choice).

    Small models on few cores often run faster per CPU second with one intra-op thread: TF's pools spin while
    they wait for work, which costs more than a tiny op saves by running on two cores.

    Raises:
        ValueError: TensorFlow already started its runtime in this process (set the threads before loading).
    """
    import tensorflow as tf

    try:
        if intra_op:
            tf.config.threading.set_intra_op_parallelism_threads(intra_op)
        if inter_op:
            tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    except RuntimeError as error:
        raise ServingConfigError(f"cannot size TensorFlow's thread pools after its runtime started: {error}") from None


class ModelServer:
    """Serves models over gRPC and REST until stopped.

    Args:
        models: The models to serve (name, base path, version policy, labels); or
        model_config_file: a TF Serving models.config to read them from (and re-read when
            `options.config_poll_interval_seconds` > 0).
        options: Ports, limits, polling and batching.

    Raises:
        ValueError: neither or both of `models` and `model_config_file`, or an invalid config file.
    """

    def __init__(
        self,
        models: Sequence[ModelConfig] | None = None,
        options: ServerOptions | None = None,
        model_config_file: Path | None = None,
    ) -> None:
        if (models is None) == (model_config_file is None):
            raise ValueError("pass either models or model_config_file")
        self.options = options or ServerOptions()
        self._config_file = model_config_file
        self._config = list(models) if models is not None else read_model_config_file(model_config_file)  # type: ignore[arg-type]
        self.metrics = ServingMetrics()
        self.core = ServerCore(
            self._config,
            self._load,
            allow_labels_for_unavailable_models=self.options.allow_version_labels_for_unavailable_models,
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
        from aiohttp import web

        options = self.options
        self._grpc_server = grpc.aio.server(
            maximum_concurrent_rpcs=options.grpc_threads,
            options=[
                ("grpc.max_receive_message_length", options.max_request_bytes),
                ("grpc.max_send_message_length", -1),
                ("grpc.so_reuseport", 0),
                # Stalled peers: a connection that never finishes its HTTP/2 handshake, or sits idle, is
                # closed; at most max_connections at once (more are refused by gRPC core), each with at most
                # grpc_threads streams.
                ("grpc.server_handshake_timeout_ms", int(options.request_timeout_seconds * 1000)),
                ("grpc.max_connection_idle_ms", int(options.idle_timeout_seconds * 1000)),
                ("grpc.max_allowed_incoming_connections", options.max_connections),
                ("grpc.max_concurrent_streams", options.grpc_threads),
                ("grpc.keepalive_time_ms", 60_000),
                ("grpc.keepalive_timeout_ms", 20_000),
            ],
        )
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            PredictionService(self.api), self._grpc_server
        )
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(self.api, self), self._grpc_server)
        try:
            self.grpc_port = self._grpc_server.add_insecure_port(host_port(options.host, options.grpc_port))
        except RuntimeError as error:
            raise OSError(f"cannot bind gRPC port {host_port(options.host, options.grpc_port)}: {error}") from None
        await self._grpc_server.start()
        if options.rest_port is not None:
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
                    guard.protocol, options.host, options.rest_port, reuse_port=False
                )
            except OSError as error:
                await runner.cleanup()
                await self._grpc_server.stop(None)
                raise OSError(f"cannot bind REST port {host_port(options.host, options.rest_port)}: {error}") from None
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

    def _reload_config_file(self) -> None:
        assert self._config_file is not None
        try:
            config = read_model_config_file(self._config_file)
            if config != self._config:
                self.reload(config)
        except Exception as error:
            logger.error("model config %s not reloaded: %s", self._config_file, error)

    def reload(self, config: Sequence[ModelConfig]) -> None:
        """Adopts a new model list (labels are checked against available versions first).

        Raises:
            ServingError: FAILED_PRECONDITION for a label on an unavailable version; the old config stays.
        """
        self.core.reload(config)
        self._config = list(config)
        logger.info("model config reloaded: %s", ", ".join(model.name for model in config))
