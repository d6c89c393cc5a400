"""The local server's settings, each after TF Serving's flag, and how the `serving` config section sets them.

Example:
    options = server_options(ServingOptions(), host="0.0.0.0", grpc_port=0, rest_port=None, batching=False)
    options.request_limits().max_bytes  # 16 MiB, serving.max_request_mb
"""

from __future__ import annotations

from dataclasses import dataclass

from serving.address import check_port
from serving.batching import BatchingOptions
from serving.config_error import ServingConfigError
from serving.limits import DEFAULT_MAX_PIXELS_PER_BYTE, DEFAULT_MAX_REQUEST_PIXELS, RequestLimits
from serving.options import MAX_GRPC_TIMEOUT_SECONDS, ServingOptions


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
        max_pixels_per_byte: Beyond 16 MP a request, most pixels a byte of image data may decode to; 0 = off.
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
        allow_version_labels_for_unavailable_models: A label not yet in use may point at a version not loaded
            yet (--allow_version_labels_for_unavailable_models; `serving.server_core`); without it or the next
            flag, a labelled first config fails at start-up, as in TF Serving.
        force_allow_any_version_labels_for_unavailable_models: Any label may point at a version not loaded yet
            (--force_allow_any_version_labels_for_unavailable_models).
    """

    host: str = "127.0.0.1"
    grpc_port: int = 8500
    rest_port: int | None = 8501
    max_request_bytes: int = 16 * 1024 * 1024
    max_batch_size: int | None = None
    max_request_pixels: int = DEFAULT_MAX_REQUEST_PIXELS
    max_pixels_per_byte: int = DEFAULT_MAX_PIXELS_PER_BYTE
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
    force_allow_any_version_labels_for_unavailable_models: bool = False

    def __post_init__(self) -> None:
        check_port(self.grpc_port, "ServerOptions.grpc_port", allow_zero=True)
        if self.rest_port is not None:
            check_port(self.rest_port, "ServerOptions.rest_port", allow_zero=True)
        self.request_limits()  # checks the limits
        if self.max_connections < 1:
            raise ValueError(f"ServerOptions.max_connections must be >= 1, got {self.max_connections}")
        for name in ("request_timeout_seconds", "idle_timeout_seconds"):
            if not 0 < getattr(self, name) <= MAX_GRPC_TIMEOUT_SECONDS:
                raise ServingConfigError(
                    f"ServerOptions.{name} must be > 0 and at most {MAX_GRPC_TIMEOUT_SECONDS} s (gRPC takes it as "
                    f"int32 milliseconds), got {getattr(self, name)}"
                )

    def request_limits(self) -> RequestLimits:
        """The per-request limits these options set."""
        rows = self.max_batch_size
        if rows is None and self.batching is not None:
            rows = self.batching.max_batch_size
        return RequestLimits(
            max_bytes=self.max_request_bytes,
            max_batch_size=rows,
            max_pixels=self.max_request_pixels,
            max_pixels_per_byte=self.max_pixels_per_byte,
        )


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


def server_options(
    serving: ServingOptions,
    host: str = "127.0.0.1",
    grpc_port: int | None = None,
    rest_port: int | None = None,
    batching: bool | None = None,
    labelled_config: bool = False,
) -> ServerOptions:
    """The local server's options from the `serving` section (what `tfxp serve` runs with).

    Args:
        serving: The `serving` section: ports, limits, timeouts, polling and batching.
        host: Interface to bind.
        grpc_port: Overrides `serving.grpc_port` unless None.
        rest_port: Overrides `serving.rest_port` unless None.
        batching: Overrides `serving.enable_batching` unless None; off keeps `serving.max_batch_size` as the
            per-request row limit.
        labelled_config: The models.config served instead of the section names version labels.

    Returns:
        The server's options.
    """
    use_batching = serving.enable_batching if batching is None else batching
    return ServerOptions(
        host=host,
        grpc_port=serving.grpc_port if grpc_port is None else grpc_port,
        rest_port=serving.rest_port if rest_port is None else rest_port,
        max_request_bytes=serving.max_request_mb * 1024 * 1024,
        max_request_pixels=serving.max_request_pixels,
        max_pixels_per_byte=serving.max_pixels_per_byte,
        max_connections=serving.max_connections,
        request_timeout_seconds=serving.request_timeout_seconds,
        idle_timeout_seconds=serving.idle_timeout_seconds,
        max_batch_size=serving.max_batch_size,  # per request, with --no-batching too
        poll_interval_seconds=serving.poll_interval_seconds,
        config_poll_interval_seconds=float(serving.config_poll_seconds),
        # The flag the deploy assets give TF Serving whenever labels are configured (serving/deploy.py:144-147):
        # without it a labelled config fails at start-up, before any version is loaded; a rollout's track files
        # name versions that load after the labels are read (`serving.rollout.tracks`).
        allow_version_labels_for_unavailable_models=bool(serving.labels)
        or labelled_config
        or serving.rollout == "canary",
        batching=BatchingOptions(
            max_batch_size=serving.max_batch_size,
            batch_timeout_micros=serving.batch_timeout_micros,
            num_batch_threads=serving.num_batch_threads,
            max_enqueued_batches=serving.max_enqueued_batches,
            allowed_batch_sizes=serving.allowed_batch_sizes,
        )
        if use_batching
        else None,
    )
