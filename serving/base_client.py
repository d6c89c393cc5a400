"""The interface both transports' clients offer: `ServingClient`, its retries, and its answers.

`serving.grpc_client.GrpcClient` and `serving.rest_client.RestClient` implement it; `serving.client.connect` picks
one. Every call has a timeout; calls that fail with UNAVAILABLE (server not up yet, restarting, batch queue full)
are retried with exponential backoff (`RetryPolicy`); every other error is raised at once as a
`serving.errors.ServingError` subclass chained `from` the transport's error.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from tensorflow.core.example import example_pb2
from tensorflow.core.protobuf import meta_graph_pb2

from foundation.contract import INPUT_IMAGE_BYTES, OUTPUT_CLASSES, OUTPUT_PROBABILITIES
from foundation.contract import SIGNATURE_DEFAULT as DEFAULT_SIGNATURE
from serving.config_error import ServingConfigError
from serving.errors import UnavailableError

T = TypeVar("T")

DEFAULT_TIMEOUT_SECONDS = 10.0
"""How long one call attempt to the model server may take unless the caller says otherwise."""


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

    def __init__(
        self, model_name: str, timeout: float = DEFAULT_TIMEOUT_SECONDS, retry: RetryPolicy | None = None
    ) -> None:
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


def check_version_or_label(version: int | None, label: str | None) -> None:
    """A request names a version or a label (not both), or neither for the latest.

    Raises:
        ServingConfigError: both given.
    """
    if version is not None and label:
        raise ServingConfigError(f"pass a version ({version}) or a label ({label!r}), not both")
