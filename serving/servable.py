"""One loaded model version: its signatures, input validation with TF Serving's messages, and execution.

A `Servable` wraps `tf.saved_model.load(...)`. It reads the SignatureDefs from `SAVED_MODEL_FILE` (what
GetModelMetadata returns, `__saved_model_init_op` included, as TF Serving does), validates a request's inputs
against the chosen signature, and runs it either directly or through a server-side batch scheduler.

Example:
    servable = Servable.load("digits", 3, Path("out/serving/digits/3"))
    outputs = servable.run("serving_default", {"image_bytes": np.array([png], dtype=object)})
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

from foundation.contract import SAVED_MODEL_FILE
from foundation.contract import SIGNATURE_DEFAULT as DEFAULT_SIGNATURE
from serving.batching import BatchingOptions, BatchScheduler
from serving.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    ServingError,
    code_from_number,
    error_for,
)
from serving.predicted_class import label_names
from serving.tensors import DType, dtype_of, dtype_of_array, shape_string

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a signature."""

    dtype: DType
    shape: tuple[int | None, ...] | None  # None = unknown rank

    def accepts_shape(self, shape: tuple[int, ...]) -> bool:
        if self.shape is None:
            return True
        return len(shape) == len(self.shape) and all(
            want is None or want == got for want, got in zip(self.shape, shape, strict=True)
        )


@dataclass(frozen=True)
class Signature:
    """A serving signature: its inputs and outputs by alias, and its SignatureDef method name."""

    name: str
    method_name: str
    inputs: Mapping[str, TensorInfo]
    outputs: Mapping[str, TensorInfo]

    @property
    def batch_inputs(self) -> frozenset[str]:
        """The inputs whose dim 0 is a batch dimension: left open (or the rank unknown) by the signature."""
        return frozenset(
            alias for alias, info in self.inputs.items() if info.shape is None or (info.shape and info.shape[0] is None)
        )


def _tensor_info(proto: meta_graph_pb2.TensorInfo) -> TensorInfo:
    shape = None if proto.tensor_shape.unknown_rank else tuple(dim.size for dim in proto.tensor_shape.dim)
    return TensorInfo(dtype_of(proto.dtype), tuple(None if dim < 0 else dim for dim in shape) if shape else shape)


def tf_error_message(error: tf.errors.OpError) -> str:
    """The op's own message, without the eager runtime's "Graph execution error ... [Op:...]" wrapping.

    TF Serving runs signatures in a session, whose messages start at the op's text ("Unknown image file
    format...\\n\\t [[{{node ...}}]]"); eager calls add a header and a function suffix we strip to match.
    """
    return _op_text(error.message)


def _op_text(message: str) -> str:
    message = re.sub(
        r"^Graph execution error:\s*\n\s*Detected at node .*?\n<stack traces unavailable>\n", "", message, flags=re.S
    )
    message = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", message)
    message = re.sub(r"\s*\[Op:__inference_[^\]]*\]\s*$", "", message)
    return message.strip()


def _error_from_tf(error: tf.errors.OpError) -> ServingError:
    return error_for(code_from_number(error.error_code), tf_error_message(error))


def _error_from_undecodable(error: UnicodeDecodeError) -> ServingError:
    # TF failed to decode its own status message into str: an op quoted request bytes that are not UTF-8
    # ("Could not parse example input, value: '\x89PNG..."). Only ops rejecting their input quote it.
    raw = error.object if isinstance(error.object, bytes) else bytes(error.object)
    return InvalidArgumentError(_op_text(raw.decode("utf-8", "backslashreplace")))


class Servable:
    """A loaded SavedModel version, ready to run signatures.

    Build with `Servable.load`; call `start(batching)` before `submit`, and `close()` once unloaded.
    """

    def __init__(
        self,
        name: str,
        version: int,
        path: Path,
        signature_defs: Mapping[str, meta_graph_pb2.SignatureDef],
        functions: Mapping[str, Callable[..., Mapping[str, tf.Tensor]]],
    ) -> None:
        self.name = name
        self.version = version
        self.path = path
        self.signature_defs = dict(signature_defs)
        self.class_names: tuple[str, ...] = ()  # the version's label map (`serving.predicted_class`)
        self._functions = dict(functions)
        self.signatures: dict[str, Signature] = {}
        for key, definition in signature_defs.items():
            if key not in functions:  # e.g. __saved_model_init_op: metadata only, not callable
                continue
            try:
                self.signatures[key] = Signature(
                    name=key,
                    method_name=definition.method_name,
                    inputs={alias: _tensor_info(info) for alias, info in definition.inputs.items()},
                    outputs={alias: _tensor_info(info) for alias, info in definition.outputs.items()},
                )
            except ServingError as error:
                logger.warning("%s version %d: signature %s is not served: %s", name, version, key, error.message)
        self._schedulers: dict[tuple[str, tuple[str, ...]], BatchScheduler] = {}
        self._batching: BatchingOptions | None = None
        self._on_batch: Callable[[int], None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._loaded: object = None  # the tf.saved_model.load result: keeps functions and variables alive
        self._lock = threading.Lock()

    @classmethod
    def load(cls, name: str, version: int, path: Path) -> Servable:
        """Loads `path` (a SavedModel directory).

        Raises:
            ValueError: no `SAVED_MODEL_FILE`, or TensorFlow cannot load the model.
        """
        pb_path = Path(path) / SAVED_MODEL_FILE
        if not pb_path.is_file():
            raise ValueError(f"{path} holds no {SAVED_MODEL_FILE} (is it a complete SavedModel export?)")
        try:
            saved_model = saved_model_pb2.SavedModel.FromString(pb_path.read_bytes())
            loaded = tf.saved_model.load(str(path))
        except (tf.errors.OpError, ValueError, OSError) as error:
            raise ValueError(f"cannot load SavedModel {path}: {error}") from error
        serve_graphs = [graph for graph in saved_model.meta_graphs if "serve" in graph.meta_info_def.tags]
        if not serve_graphs:
            raise ValueError(f"SavedModel {path} has no MetaGraph tagged 'serve' (TF Serving loads that tag)")
        functions = dict(loaded.signatures)
        servable = cls(name, version, Path(path), serve_graphs[0].signature_def, functions)
        servable._loaded = loaded  # keeps variables and functions alive as long as the servable
        servable.class_names = label_names(Path(path))
        return servable

    # --- lifecycle ------------------------------------------------------------------------------------------

    def start(
        self,
        batching: BatchingOptions | None,
        request_threads: int = 16,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        """Prepares execution: batch schedulers when `batching` is set, else a request thread pool.

        Args:
            batching: Server-side batching knobs; None = each request runs on its own.
            request_threads: Threads running unbatched requests.
            on_batch: Called with the row count of each processed batch (metrics).
        """
        self._batching = batching
        self._on_batch = on_batch
        if batching is None:
            self._executor = ThreadPoolExecutor(request_threads, thread_name_prefix=f"{self.name}-v{self.version}")

    def close(self) -> None:
        """Finishes queued work and stops the scheduler threads."""
        with self._lock:
            schedulers, self._schedulers = list(self._schedulers.values()), {}
        for scheduler in schedulers:
            scheduler.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    # --- requests --------------------------------------------------------------------------------------------

    def signature_for_predict(self, name: str) -> Signature:
        """The signature a Predict request names ('' = serving_default).

        Raises:
            FailedPreconditionError: the model has no such signature (TF Serving's Predict text).
        """
        key = name or DEFAULT_SIGNATURE
        if key not in self.signatures:
            raise FailedPreconditionError(f'Serving signature key "{key}" not found.')
        return self.signatures[key]

    def signature_for_rest(self, name: str) -> Signature:
        """The signature a REST body names ('' = serving_default).

        Raises:
            InvalidArgumentError: no such signature (TF Serving's REST text, which differs from gRPC's).
        """
        key = name or DEFAULT_SIGNATURE
        if key not in self.signatures:
            raise InvalidArgumentError(f'Serving signature name: "{key}" not found in signature def')
        return self.signatures[key]

    def validate_inputs(self, signature: Signature, inputs: Mapping[str, np.ndarray]) -> None:
        """Checks names, dtypes, shapes and batch sizes of a request's inputs.

        Raises:
            InvalidArgumentError: with TF Serving's texts for names and batching, and a
                "Expects arg[i] to be <dtype>" text for dtypes.
        """
        expected, sent = set(signature.inputs), set(inputs)
        if len(expected) != len(sent):
            raise InvalidArgumentError(
                f"input size does not match signature: {len(sent)}!={len(expected)} len({{{','.join(sorted(sent))}}}) "
                f"!= len({{{','.join(sorted(expected))}}}). Sent extra: {{{','.join(sorted(sent - expected))}}}. "
                f"Missing but required: {{{','.join(sorted(expected - sent))}}}."
            )
        for alias in sorted(sent):
            if alias not in signature.inputs:
                raise InvalidArgumentError(
                    f"input tensor alias not found in signature: {alias}. Inputs expected to be in the set "
                    f"{{{','.join(sorted(expected))}}}."
                )
        for index, alias in enumerate(sorted(sent)):
            info, array = signature.inputs[alias], inputs[alias]
            is_string = array.dtype == object or array.dtype.kind in "SU"
            if (info.dtype.numpy is np.object_) != is_string or (not is_string and array.dtype != info.dtype.numpy):
                got = "string" if is_string else dtype_of_name(array)
                raise InvalidArgumentError(f"Expects arg[{index}] to be {info.dtype.name} but {got} is provided")
            if not info.accepts_shape(array.shape):
                raise InvalidArgumentError(
                    f"input {alias} has shape {shape_string(array.shape)} but signature {signature.name} expects "
                    f"{shape_string(info.shape)}"
                )
        if self._batching is not None:
            sizes = set()
            for array in inputs.values():
                if array.ndim == 0:
                    raise InvalidArgumentError("Batching Run() input tensors must have at least one dimension")
                sizes.add(array.shape[0])
            if len(sizes) > 1:
                raise InvalidArgumentError("Batching Run() input tensors must have equal 0th-dimension size")

    def submit(
        self, signature: Signature, inputs: Mapping[str, np.ndarray], output_filter: Sequence[str] = ()
    ) -> Future[dict[str, np.ndarray]]:
        """Runs validated `inputs` through `signature` (batched when batching is on); a Future of the outputs.

        Raises:
            InvalidArgumentError: an unknown or repeated output alias in `output_filter`.
        """
        outputs = self._output_aliases(signature, output_filter)
        if self._batching is None:
            return self._started_executor().submit(self.run, signature.name, inputs, outputs)
        return self._scheduler(signature, outputs).submit(inputs, _rows(inputs))

    def submit_async(
        self, signature: Signature, inputs: Mapping[str, np.ndarray], output_filter: Sequence[str] = ()
    ) -> asyncio.Future[dict[str, np.ndarray]]:
        """As `submit`, from a coroutine on the server's loop: await the returned future.

        Raises:
            InvalidArgumentError: as `submit`.
        """
        outputs = self._output_aliases(signature, output_filter)
        if self._batching is None:
            return asyncio.wrap_future(self._started_executor().submit(self.run, signature.name, inputs, outputs))
        return self._scheduler(signature, outputs).submit_async(inputs, _rows(inputs))

    def _started_executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            raise InternalError(f"servable {self.name} version {self.version} was not started")
        return self._executor

    def _scheduler(self, signature: Signature, outputs: tuple[str, ...]) -> BatchScheduler:
        assert self._batching is not None
        key = (signature.name, outputs)
        with self._lock:
            scheduler = self._schedulers.get(key)
            if scheduler is None:
                scheduler = BatchScheduler(
                    lambda batch: self.run(signature.name, batch, outputs),
                    self._batching,
                    name=f"{self.name}-v{self.version}-{signature.name}",
                    on_batch=self._on_batch,
                )
                self._schedulers[key] = scheduler
        return scheduler

    def run(
        self, signature_name: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[str] = ()
    ) -> dict[str, np.ndarray]:
        """Calls the signature function now, in this thread.

        Raises:
            ServingError: the op's status (e.g. InvalidArgumentError for an undecodable image).
        """
        function = self._functions[signature_name]
        signature = self.signatures[signature_name]
        tensors = {
            alias: tf.constant(array, dtype=tf.dtypes.as_dtype(signature.inputs[alias].dtype.enum))
            for alias, array in inputs.items()
        }
        try:
            results = function(**tensors)
        except tf.errors.OpError as error:
            raise _error_from_tf(error) from error
        except UnicodeDecodeError as error:
            raise _error_from_undecodable(error) from error
        wanted = outputs or tuple(results)
        return {alias: results[alias].numpy() for alias in wanted}

    @staticmethod
    def _output_aliases(signature: Signature, output_filter: Sequence[str]) -> tuple[str, ...]:
        seen: list[str] = []
        for alias in output_filter:
            if alias not in signature.outputs:
                raise InvalidArgumentError(
                    f"output tensor alias not found in signature: {alias} Outputs expected to be in the set "
                    f"{{{','.join(sorted(signature.outputs))}}}."
                )
            if alias in seen:
                raise InvalidArgumentError(f"duplicate output tensor alias: {alias}")
            seen.append(alias)
        return tuple(seen)


def _rows(inputs: Mapping[str, np.ndarray]) -> int:
    return next(iter(inputs.values())).shape[0]  # validate_inputs checked they agree


def dtype_of_name(array: np.ndarray) -> str:
    """TF's C++ name for a numpy array's dtype ("float", "int64", ...), or numpy's when TF has none."""
    try:
        return dtype_of_array(array).name
    except ServingError:
        return str(array.dtype)
