"""SavedModel → TFLite conversion with a registry of quantization modes.

Conversion starts from the `serving_preprocessed` signature behind camera frames (`edge.camera`: RGB `[1, H, W, 3]`
of `io_dtype`, scaled and, for gray models, turned to luma in the graph): decoding and resizing stay on the device
side (apps' classifiers resize frames themselves), normalisation is inside the model and so inside the TFLite graph.

Example:
    calibration = load_split("data/digits", "train", spec, limit=200, shuffle=True).frames
    tflite = convert("model/Format-Serving", "int8", representative_data=calibration, io_dtype="uint8")
    Path("model.tflite").write_bytes(tflite)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import numpy as np
import tensorflow as tf
from ai_edge_litert.tools import flatbuffer_utils

from edge.camera import camera_function
from edge.errors import EdgeError
from edge.options import MODE_NAMES, IoDtype, SupportedOps
from foundation.contract import SIGNATURE_PREPROCESSED

# The names are the `edge` section's (edge/options.py), declared there once.
IO_DTYPES: dict[str, tf.DType] = {name: tf.as_dtype(name) for name in get_args(IoDtype)}
SUPPORTED_OPS: tuple[str, ...] = get_args(SupportedOps)
_QUANTIZE = 114  # tflite::BuiltinOperator_QUANTIZE (schema.fbs)
_SELECT_OPS_HINT = (
    "allow them with `edge.supported_ops=builtins+select_tf` (CLI: `--supported-ops builtins+select_tf`); "
    "the device then needs the TF Select (Flex) delegate"
)


@dataclass(frozen=True)
class ConversionRequest:
    """What a mode's `configure` gets besides the converter.

    Attributes:
        representative_data: Calibration frames [N, H, W, 3], pixels 0..255, or None.
        io_dtype: The frames' type (`uint8`, `float32`, `int8`); also the output type of a full-integer model.
        select_tf_ops: Whether TF ops outside the TFLite builtins are allowed (Flex).
    """

    representative_data: np.ndarray | None
    io_dtype: str
    select_tf_ops: bool


@dataclass(frozen=True)
class QuantizationMode:
    """One way to convert: how it sets up the converter.

    Attributes:
        name: Registry key (`edge.mode`).
        description: One line for help texts and metadata.
        needs_representative_data: Whether calibration images are required.
        configure: Sets optimizations, types and ops on a `tf.lite.TFLiteConverter`.
    """

    name: str
    description: str
    needs_representative_data: bool
    configure: Callable[[tf.lite.TFLiteConverter, ConversionRequest], None]


MODES: dict[str, QuantizationMode] = {}


def register_mode(mode: QuantizationMode) -> QuantizationMode:
    """Adds a mode to the registry (a later registration with the same name replaces it).

    Raises:
        EdgeError: `mode.name` is not declared in `edge.options.MODE_NAMES` (so `edge.mode` would refuse it).
    """
    if mode.name not in MODE_NAMES:
        raise EdgeError(
            f"quantization mode {mode.name!r} is not declared in edge/options.py MODE_NAMES "
            f"({', '.join(MODE_NAMES)}); declare it there so `edge.mode` accepts it"
        )
    MODES[mode.name] = mode
    return mode


def get_mode(name: str) -> QuantizationMode:
    """The registered mode `name`.

    Raises:
        EdgeError: unknown name; the message lists the registered modes.
    """
    if name not in MODES:
        raise EdgeError(f"unknown quantization mode {name!r} (edge.mode / --mode); choose one of {sorted(MODES)}")
    return MODES[name]


def _builtin_ops(request: ConversionRequest, integer_only: bool = False) -> list[tf.lite.OpsSet]:
    builtins = tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if integer_only else tf.lite.OpsSet.TFLITE_BUILTINS
    return [builtins, tf.lite.OpsSet.SELECT_TF_OPS] if request.select_tf_ops else [builtins]


def _configure_float32(converter: tf.lite.TFLiteConverter, request: ConversionRequest) -> None:
    converter.target_spec.supported_ops = _builtin_ops(request)


def _configure_dynamic(converter: tf.lite.TFLiteConverter, request: ConversionRequest) -> None:
    # Optimize.DEFAULT without a representative dataset = int8 weights, float activations.
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_ops = _builtin_ops(request)


def _configure_float16(converter: tf.lite.TFLiteConverter, request: ConversionRequest) -> None:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
    converter.target_spec.supported_ops = _builtin_ops(request)


def _configure_int8(converter: tf.lite.TFLiteConverter, request: ConversionRequest) -> None:
    data = request.representative_data
    assert data is not None  # convert() checks needs_representative_data first

    def samples() -> Iterator[list[np.ndarray]]:
        for frame in data:
            yield [frame[np.newaxis].astype(np.float32)]

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = samples
    # TFLITE_BUILTINS_INT8 makes the converter fail on any op without an int8 kernel instead of leaving it float.
    converter.target_spec.supported_ops = _builtin_ops(request, integer_only=True)
    converter.inference_input_type = IO_DTYPES[request.io_dtype]
    converter.inference_output_type = IO_DTYPES[request.io_dtype]


register_mode(QuantizationMode("none", "float32, no quantization", False, _configure_float32))
register_mode(QuantizationMode("dynamic", "dynamic range: int8 weights, float activations", False, _configure_dynamic))
register_mode(QuantizationMode("float16", "float16 weights, float32 compute on CPU", False, _configure_float16))
register_mode(QuantizationMode("int8", "full integer: int8 weights and activations, calibrated", True, _configure_int8))


def convert(
    saved_model: str | Path,
    mode: str = "none",
    representative_data: np.ndarray | None = None,
    supported_ops: str = "builtins",
    io_dtype: str = "uint8",
    keep_tensor_names: bool = False,
) -> bytes:
    """Converts the `serving_preprocessed` signature of a SavedModel, behind camera frames, to a TFLite flatbuffer.

    Args:
        saved_model: SavedModel directory (e.g. a Model artifact's `Format-Serving/`).
        mode: A registered quantization mode: `none`, `dynamic`, `float16` or `int8`. Defaults to `none`.
        representative_data: Frames [N, H, W, 3], pixels 0..255, for int8 calibration (e.g. 200 train frames
            from `edge.data.load_split(..., shuffle=True).frames`); ignored by the other modes.
        supported_ops: `builtins` (default) or `builtins+select_tf` (TF ops through the Flex delegate).
        io_dtype: The frames' type: `uint8` (default; what cameras and MediaPipe give), `float32` (pixel values
            0..255) or `int8` (full-integer models only). A full-integer model's output has it too; the other
            modes output float32 probabilities.
        keep_tensor_names: Keep the converter's tensor debug names (useful in Netron); by default they are
            stripped, which saves a few KB per model (see `strip_tensor_names`).

    Returns:
        The TFLite model bytes: one signature, input `image` [1, H, W, 3], output `probabilities`.

    Raises:
        EdgeError: unknown mode, ops setting or I/O type; int8 without representative data; no SavedModel or
            signature; ops outside the allowed sets (the message names them and the setting that allows them);
            any other converter failure.
    """
    quantization = get_mode(mode)
    _check_settings(quantization, supported_ops, io_dtype, representative_data)
    integer = quantization.needs_representative_data
    # A full-integer model is converted from float frames and quantized at its input to io_dtype; the float
    # modes take io_dtype frames as they are (a uint8 input is cast in the graph).
    frames = camera_function(Path(saved_model), "float32" if integer else io_dtype)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([frames.function], frames.loaded)
    request = ConversionRequest(representative_data, io_dtype, supported_ops == "builtins+select_tf")
    quantization.configure(converter, request)
    try:
        tflite = bytes(converter.convert())
    except Exception as error:  # ConverterError, RuntimeError from calibration: both carry the op names
        raise _conversion_error(error, saved_model, SIGNATURE_PREPROCESSED, mode, request) from None
    if integer and io_dtype == "uint8":
        tflite = pin_pixel_input(tflite)
    return tflite if keep_tensor_names else strip_tensor_names(tflite)


def _check_settings(
    quantization: QuantizationMode, supported_ops: str, io_dtype: str, representative_data: np.ndarray | None
) -> None:
    """Raises EdgeError, naming the setting, for an unknown ops set or I/O type, or one the mode cannot take."""
    mode = quantization.name
    if supported_ops not in SUPPORTED_OPS:
        raise EdgeError(
            f"unknown supported_ops {supported_ops!r} (edge.supported_ops / --supported-ops); "
            f"choose one of {list(SUPPORTED_OPS)}"
        )
    if io_dtype not in IO_DTYPES:
        raise EdgeError(f"unknown io_dtype {io_dtype!r} (edge.io_dtype / --io-dtype); choose one of {list(IO_DTYPES)}")
    integer = quantization.needs_representative_data
    if io_dtype == "int8" and not integer:
        raise EdgeError(
            f"io_dtype int8 (edge.io_dtype / --io-dtype) needs the full-integer mode int8, not {mode!r}; "
            "frames are uint8 (the default) or float32"
        )
    if integer and (representative_data is None or len(representative_data) == 0):
        raise EdgeError(
            f"mode {mode!r} needs representative data to calibrate activation ranges, and none was given; "
            "pass train examples (CLI: `--examples DIR`; pipeline: the Examples input) with "
            "edge.representative_samples ≥ 1, or pick mode `dynamic` or `float16`, which need none"
        )


def pin_pixel_input(tflite: bytes) -> bytes:
    """The same full-integer model with its uint8 input read as pixel values: scale 1, zero point 0.

    Calibration gives the input the range the calibration frames had (e.g. 0..254 → scale 0.996), but apps and
    MediaPipe hand a uint8 input the camera's bytes as they are, ignoring its quantization. The converter
    puts a QUANTIZE op (uint8 → the int8 the graph computes in) behind a uint8 input; that op requantizes from
    whatever the input's parameters say, so stating the real ones (1 pixel per step, 0 at 0) keeps the model
    right for raw bytes; pixel values beyond the calibrated range saturate there, as they would have anyway.

    Raises:
        EdgeError: the input is not consumed by QUANTIZE ops only (a converter that changed how it builds uint8
            inputs), so the input cannot take raw bytes; use edge.io_dtype float32 then.
    """
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(tflite))
    (subgraph,) = model.subgraphs
    (index,) = subgraph.inputs
    codes = [model.operatorCodes[op.opcodeIndex] for op in subgraph.operators if index in list(op.inputs)]
    if not codes or any(max(code.builtinCode, code.deprecatedBuiltinCode) != _QUANTIZE for code in codes):
        raise EdgeError(
            "the int8 model's uint8 input is not followed by a QUANTIZE op, so it cannot take raw camera bytes; "
            "set edge.io_dtype to float32 (frames as float pixel values)"
        )
    parameters = subgraph.tensors[index].quantization
    parameters.scale, parameters.zeroPoint = [1.0], [0]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def strip_tensor_names(tflite: bytes) -> bytes:
    """The same model without tensor debug names; signatures (and so the I/O names) stay.

    The converter names every tensor after the TF ops fused into it (`model/conv2d/Conv2D;model/conv2d/BiasAdd;…`).
    Only debuggers read those names: interpreters address tensors by index and apps by signature key. Dropping
    them saves about 60 bytes per tensor, the same in every mode, which on a small model is a visible share
    of an int8 file (on the digits model 2.9 KB of 95 KB). LiteRT's own `flatbuffer_utils.strip_strings` drops
    the signatures as well, which is why this keeps them, and the input and output tensors' names.
    """
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(tflite))
    for subgraph in model.subgraphs or []:
        # The input and output tensors keep theirs: metadata writers and readers look tensors up by name.
        keep = {*(subgraph.inputs or []), *(subgraph.outputs or [])}
        for index, tensor in enumerate(subgraph.tensors or []):
            if index not in keep:
                tensor.name = None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def unsupported_ops(message: str) -> list[str]:
    """TF op names the converter or calibrator reported as outside the allowed op sets."""
    names = set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", message))
    for listing in re.findall(r"(?:TF Select ops|Flex ops|Custom ops): ([\w, ]+)", message):
        names.update(name.strip().removeprefix("Flex") for name in listing.split(",") if name.strip())
    names.update(re.findall(r"\(Flex(\w+)\) failed to prepare", message))
    return sorted(names)


def _conversion_error(
    error: Exception, saved_model: str | Path, signature: str, mode: str, request: ConversionRequest
) -> EdgeError:
    message = str(error)
    where = f"SavedModel {saved_model} (signature `{signature}`, mode {mode!r})"
    ops = unsupported_ops(message)
    if ops and not request.select_tf_ops:
        return EdgeError(f"{where} uses ops outside the TFLite builtins: {', '.join(ops)}; {_SELECT_OPS_HINT}")
    if ops and mode == "int8":
        # Calibration runs the float model in the TFLite interpreter, which has no Flex delegate in Python.
        return EdgeError(
            f"{where}: int8 calibration cannot run the TF Select ops {', '.join(ops)} (the TFLite Python "
            "interpreter has no Flex delegate); use mode `dynamic` or `float16` for this model, or replace the ops"
        )
    if ops:
        return EdgeError(f"{where} uses ops that neither TFLite builtins nor TF Select provide: {', '.join(ops)}")
    summary = next((line.strip() for line in message.splitlines() if "error" in line.lower()), message[:300])
    return EdgeError(f"TFLite conversion of {where} failed: {summary}")
