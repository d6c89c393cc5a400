"""A TFLite model in the LiteRT interpreter (XNNPACK, configurable threads), fed camera frames.

Callers pass the real input values, for a tfxp device model RGB frames with pixels 0..255 (`edge.camera`), and
get float probabilities, whatever the mode: a quantized input or output is converted here with the model's own
scale and zero point (for a uint8 device model that is the identity, `edge.quantize.pin_pixel_input`).

Example:
    model = TfliteModel.load(Path("model.tflite"), threads=2)
    probabilities = model.predict(frames)  # uint8 [N, H, W, 3] → float32 [N, num_classes]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert.interpreter import Interpreter, SignatureRunner

from edge.errors import EdgeError
from foundation.bounded import TooLargeError, read_file
from foundation.contract import OUTPUT_PROBABILITIES, SIGNATURE_PREPROCESSED

_FLATBUFFER_ID = b"TFL3"  # bytes 4..8 of every TFLite flatbuffer (its file identifier)
# A flatbuffer is at most 2 GiB - 1 (FLATBUFFERS_MAX_BUFFER_SIZE, flatbuffers/base.h): no TFLite model is larger.
MAX_TFLITE_BYTES = 2**31 - 1


@dataclass(frozen=True)
class TensorInfo:
    """Shape, type and quantization of one model input or output.

    Attributes:
        name: Signature name of the tensor (e.g. `images`, `probabilities`).
        shape: Shape with -1 for dynamic dimensions.
        dtype: numpy dtype name (`float32`, `int8`, `uint8`, ...).
        scale: Quantization scale (real = scale × (q − zero_point)); 0.0 for float tensors.
        zero_point: Quantization zero point; 0 for float tensors.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float
    zero_point: int

    @property
    def quantized(self) -> bool:
        return self.scale != 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "quantization": {"scale": self.scale, "zero_point": self.zero_point} if self.quantized else None,
        }


def _tensor_info(name: str, details: dict[str, Any]) -> TensorInfo:
    scale, zero_point = details["quantization"]
    return TensorInfo(
        name=name,
        shape=tuple(int(dim) for dim in details["shape_signature"]),
        dtype=np.dtype(details["dtype"]).name,
        scale=float(scale),
        zero_point=int(zero_point),
    )


def read_tflite(source: Path | bytes) -> bytes:
    """The bytes of a TFLite model file, checked to be a TFLite flatbuffer; a file is refused after its first 8 bytes
    when it is not one, and past MAX_TFLITE_BYTES whatever it is.

    Raises:
        EdgeError: the file is missing, is not a TFLite model, or is larger than a flatbuffer can be.
    """
    where = "the given bytes" if isinstance(source, bytes) else str(source)
    if isinstance(source, bytes):
        _check_identifier(source, where)
        return source
    try:
        return read_file(
            source,
            MAX_TFLITE_BYTES,
            f"TFLite model {source}",
            "a flatbuffer is smaller (FlatBuffers' 2 GiB limit): pass a .tflite file",
            head=(8, lambda first: _check_identifier(first, where)),
        )
    except TooLargeError as error:
        raise EdgeError(str(error)) from None
    except OSError as error:
        raise EdgeError(
            f"cannot read TFLite model {source}: {error.strerror or error}; pass an existing .tflite"
        ) from None


def _check_identifier(content: bytes, where: str) -> None:
    if content[4:8] != _FLATBUFFER_ID:
        raise EdgeError(
            f"{where} is not a TFLite model (no `TFL3` flatbuffer identifier in its first 8 bytes); "
            "pass a .tflite file written by `tfxp edge convert` or the EdgeExporter"
        )


class TfliteModel:
    """A loaded TFLite classifier: float images in, float probabilities out.

    Args:
        content: TFLite flatbuffer bytes.
        threads: Interpreter threads (XNNPACK, the default CPU delegate, uses them too). Defaults to 2.
        where: Where the model came from, for error messages.

    Raises:
        EdgeError: not a TFLite model, ops the LiteRT runtime lacks (TF Select), no usable signature/output.
    """

    def __init__(self, content: bytes, threads: int = 2, where: str = "TFLite model") -> None:
        content = read_tflite(content)
        if threads < 1:
            raise EdgeError(f"threads must be ≥ 1 (edge.threads / --threads), got {threads}")
        self.size_bytes = len(content)
        self.threads = threads
        try:
            self.interpreter = Interpreter(model_content=content, num_threads=threads)
            self.interpreter.allocate_tensors()
        except (RuntimeError, ValueError) as error:
            message = str(error)
            if "Flex delegate" in message:
                raise EdgeError(
                    f"{where} contains TF Select (Flex) ops, which the LiteRT Python runtime cannot run, so it "
                    "cannot be evaluated or benchmarked here; convert with `edge.supported_ops=builtins` after "
                    "replacing those ops"
                ) from None
            raise EdgeError(f"LiteRT cannot load {where}: {message.splitlines()[0] if message else error}") from None
        self.signature_key = self._pick_signature(where)
        self.runner: SignatureRunner = self.interpreter.get_signature_runner(self.signature_key)
        inputs = self.runner.get_input_details()
        if len(inputs) != 1:
            raise EdgeError(
                f"{where} signature `{self.signature_key}` has inputs {sorted(inputs)}; an image classifier "
                "takes one input, frames [1, H, W, 3]"
            )
        self.input = _tensor_info(*next(iter(inputs.items())))
        self.outputs = {name: _tensor_info(name, details) for name, details in self.runner.get_output_details().items()}
        self.probabilities = self._pick_probabilities(where)

    @classmethod
    def load(cls, path: Path, threads: int = 2) -> TfliteModel:
        """Reads and loads a .tflite file (see the class for errors)."""
        return cls(read_tflite(path), threads=threads, where=str(path))

    def _pick_signature(self, where: str) -> str:
        signatures = list(self.interpreter.get_signature_list())
        if len(signatures) == 1:
            return signatures[0]
        if SIGNATURE_PREPROCESSED in signatures:
            return SIGNATURE_PREPROCESSED
        raise EdgeError(
            f"{where} has signatures {signatures}; expected exactly one, as written by converting a SavedModel "
            "with `tfxp edge convert`"
        )

    def _pick_probabilities(self, where: str) -> TensorInfo:
        if OUTPUT_PROBABILITIES in self.outputs:
            return self.outputs[OUTPUT_PROBABILITIES]
        scores = [info for info in self.outputs.values() if len(info.shape) == 2]
        if len(scores) == 1:
            return scores[0]
        raise EdgeError(
            f"{where} has outputs {sorted(self.outputs)} and none is `{OUTPUT_PROBABILITIES}` [N, num_classes]; "
            "convert the model's `serving_preprocessed` signature"
        )

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """[H, W, C] of one input image."""
        height, width, channels = self.input.shape[1:]
        return height, width, channels

    @property
    def num_classes(self) -> int:
        return self.probabilities.shape[-1]

    @property
    def batch_size(self) -> int | None:
        """The input's fixed batch size (1 for a device model), or None when it takes any."""
        batch = self.input.shape[0]
        return None if batch == -1 else batch

    def quantize_input(self, images: np.ndarray) -> np.ndarray:
        """Real input values (pixels 0..255 for a device model) → the input tensor's type (rounded, clipped to
        the integer range when quantized)."""
        images = np.asarray(images, dtype=np.float32)
        if not self.input.quantized:
            if np.issubdtype(np.dtype(self.input.dtype), np.integer):
                limits = np.iinfo(self.input.dtype)
                return np.clip(np.round(images), limits.min, limits.max).astype(self.input.dtype)
            return images.astype(self.input.dtype)
        limits = np.iinfo(self.input.dtype)
        quantized = np.round(images / self.input.scale) + self.input.zero_point
        return np.clip(quantized, limits.min, limits.max).astype(self.input.dtype)

    def invoke(self, model_input: np.ndarray) -> np.ndarray:
        """Runs one batch already in the input type; returns the raw probabilities output."""
        return self.runner(**{self.input.name: model_input})[self.probabilities.name]

    def predict(self, images: np.ndarray, batch_size: int = 32) -> np.ndarray:
        """Probabilities for images [N, H, W, C] in the model's real input values.

        Args:
            images: For a tfxp device model RGB frames [N, H, W, 3], pixels 0..255 (`LabeledImages.frames`).
            batch_size: Images per interpreter call (the input is resized to it); a model with a fixed batch
                (a device model's 1) is called with that. Defaults to 32.

        Returns:
            float32 [N, num_classes] (dequantized when the output is quantized).

        Raises:
            EdgeError: images of another shape than the model's input.
        """
        if images.ndim != 4 or tuple(images.shape[1:]) != self.image_shape:
            raise EdgeError(
                f"images of shape {list(images.shape)} do not fit the TFLite input {list(self.input.shape)}; "
                "pass frames at the model's image size"
            )
        batch_size = self.batch_size or batch_size
        outputs = []
        for start in range(0, len(images), batch_size):
            raw = self.invoke(self.quantize_input(images[start : start + batch_size]))
            outputs.append(self._dequantize(raw))
        return np.concatenate(outputs) if outputs else np.zeros((0, self.num_classes), np.float32)

    def _dequantize(self, raw: np.ndarray) -> np.ndarray:
        if not self.probabilities.quantized:
            return raw.astype(np.float32)
        return (raw.astype(np.float32) - self.probabilities.zero_point) * self.probabilities.scale
