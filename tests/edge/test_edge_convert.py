"""edge.quantize: every quantization mode behind camera frames, the frame types, and the bad-input errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from edge_fixtures import SPEC, cached, save_with_matrix_inverse, shared_data, train_classifier

from edge.data import LabeledImages, load_split
from edge.errors import EdgeError
from edge.options import MODE_NAMES
from edge.quantize import MODES, QuantizationMode, convert, get_mode, register_mode, unsupported_ops
from edge.runtime import TfliteModel


@pytest.fixture(scope="module")
def calibration(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    return load_split(shared_data(tmp_path_factory), "train", SPEC, limit=50, shuffle=True).frames


@pytest.fixture(scope="module")
def eval_data(tmp_path_factory: pytest.TempPathFactory) -> LabeledImages:
    return load_split(shared_data(tmp_path_factory), "eval", SPEC)


@pytest.fixture(scope="module")
def model_with_matrix_inverse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cached(
        tmp_path_factory,
        "matrix_inverse",
        lambda path: save_with_matrix_inverse(train_classifier(epochs=0), path),
    )


def _tensor_dtypes(tflite: bytes) -> set[str]:
    model = TfliteModel(tflite)
    return {np.dtype(detail["dtype"]).name for detail in model.interpreter.get_tensor_details()}


def test_registry_holds_the_four_modes_and_only_int8_needs_data() -> None:
    assert sorted(MODES) == ["dynamic", "float16", "int8", "none"]
    assert [name for name, mode in sorted(MODES.items()) if mode.needs_representative_data] == ["int8"]


def test_registry_is_keyed_by_the_declared_names_of_the_edge_section() -> None:
    # MODE_NAMES is what `edge.mode` accepts when the config loads; each needs a registered mode.
    assert sorted(MODES) == sorted(MODE_NAMES)
    with pytest.raises(EdgeError, match=r"quantization mode 'int4' is not declared in edge/options.py MODE_NAMES"):
        register_mode(QuantizationMode("int4", "4-bit", True, lambda converter, request: None))


def test_unknown_mode_lists_the_registered_ones() -> None:
    with pytest.raises(EdgeError, match=r"unknown quantization mode 'int4' \(edge.mode / --mode\).*'dynamic'"):
        get_mode("int4")


@pytest.mark.parametrize("mode", ["none", "dynamic", "float16", "int8"])
def test_every_mode_takes_uint8_rgb_frames_by_default_and_gives_one_probabilities_output(
    saved_model: Path, calibration: np.ndarray, eval_data: LabeledImages, mode: str
) -> None:
    model = TfliteModel(convert(saved_model, mode, calibration))

    assert (model.input.name, model.input.dtype, model.input.shape) == ("image", "uint8", (1, 16, 16, 3))
    assert list(model.outputs) == ["probabilities"] and model.probabilities.shape == (1, 4)
    if model.input.quantized:  # int8: raw camera bytes, whatever range calibration saw
        assert (model.input.scale, model.input.zero_point) == (1.0, 0)
    # The gray model gets RGB frames and turns them to luma in its graph: same classes as the SavedModel.
    assert (np.argmax(model.predict(eval_data.frames), axis=-1) == eval_data.labels).mean() >= 0.98


def test_the_camera_input_scales_and_turns_frames_to_gray_as_serving_does(saved_model: Path) -> None:
    model = TfliteModel(convert(saved_model, "none", io_dtype="float32"))
    loaded = tf.saved_model.load(str(saved_model)).signatures["serving_preprocessed"]
    frames = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 3)).astype(np.uint8)
    luma = frames.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32) / 255.0

    expected = loaded(images=tf.constant(luma[..., np.newaxis]))["probabilities"].numpy()
    assert model.input.dtype == "float32" and not model.input.quantized
    np.testing.assert_allclose(model.predict(frames), expected, atol=1e-4)


def test_float32_keeps_float_weights(saved_model: Path) -> None:
    tflite = convert(saved_model, "none")

    assert "int8" not in _tensor_dtypes(tflite)


def test_dynamic_range_stores_int8_weights_behind_float_compute(saved_model: Path) -> None:
    tflite = convert(saved_model, "dynamic")

    assert TfliteModel(tflite).probabilities.dtype == "float32"
    assert "int8" in _tensor_dtypes(tflite)


def test_float16_stores_half_precision_weights(saved_model: Path) -> None:
    tflite = convert(saved_model, "float16")

    assert TfliteModel(tflite).probabilities.dtype == "float32"
    assert "float16" in _tensor_dtypes(tflite)


def test_int8_with_int8_io_keeps_the_calibrated_pixel_range(saved_model: Path, calibration: np.ndarray) -> None:
    model = TfliteModel(convert(saved_model, "int8", calibration, io_dtype="int8"))

    # Calibration saw pixels 0..255 (as floats): 256 levels, the lowest at 0.
    assert model.input.dtype == model.probabilities.dtype == "int8"
    assert model.input.scale == pytest.approx(1.0, rel=0.02)
    assert model.input.zero_point == -128


def test_uint8_frames_are_raw_bytes_even_when_calibration_saw_a_narrower_range(
    saved_model: Path, calibration: np.ndarray, eval_data: LabeledImages
) -> None:
    narrow = np.minimum(calibration, 200)  # the calibration frames never reach 255
    model = TfliteModel(convert(saved_model, "int8", narrow))

    assert (model.input.scale, model.input.zero_point) == (1.0, 0)
    assert model.probabilities.dtype == "uint8"
    assert (np.argmax(model.predict(eval_data.frames), axis=-1) == eval_data.labels).mean() >= 0.95


def test_int8_frames_are_refused_for_a_float_mode(saved_model: Path) -> None:
    with pytest.raises(EdgeError, match=r"io_dtype int8 .* needs the full-integer mode int8, not 'dynamic'"):
        convert(saved_model, "dynamic", io_dtype="int8")


def test_int8_with_float_io_quantizes_inside(saved_model: Path, calibration: np.ndarray) -> None:
    tflite = convert(saved_model, "int8", calibration, io_dtype="float32")

    assert TfliteModel(tflite).input.dtype == "float32"
    assert "int8" in _tensor_dtypes(tflite)


@pytest.mark.parametrize("mode", ["none", "int8"])
def test_tensor_names_are_stripped_but_the_signature_and_outputs_stay(
    saved_model: Path, calibration: np.ndarray, mode: str
) -> None:
    named = convert(saved_model, mode, calibration, keep_tensor_names=True)
    stripped = convert(saved_model, mode, calibration)
    named_model, stripped_model = TfliteModel(named), TfliteModel(stripped)

    def tensor_names(model: TfliteModel) -> list[str]:
        return [detail["name"] for detail in model.interpreter.get_tensor_details() if detail["name"]]

    assert any("/" in name for name in tensor_names(named_model))
    io_names = {detail["name"] for detail in stripped_model.interpreter.get_input_details()}
    io_names |= {detail["name"] for detail in stripped_model.interpreter.get_output_details()}
    assert set(tensor_names(stripped_model)) == io_names and len(io_names) == 2
    assert len(stripped) < len(named) - 1000
    assert stripped_model.signature_key == named_model.signature_key
    assert (stripped_model.input, stripped_model.probabilities) == (named_model.input, named_model.probabilities)
    np.testing.assert_array_equal(named_model.predict(calibration[:8]), stripped_model.predict(calibration[:8]))


@pytest.mark.parametrize("data", [None, np.zeros((0, 16, 16, 3), np.float32)])
def test_int8_without_representative_data_says_how_to_give_some(saved_model: Path, data: np.ndarray | None) -> None:
    with pytest.raises(EdgeError, match=r"mode 'int8' needs representative data.*--examples DIR.*`dynamic`"):
        convert(saved_model, "int8", data)


def test_ops_outside_builtins_are_named_with_the_setting_that_allows_them(model_with_matrix_inverse: Path) -> None:
    with pytest.raises(
        EdgeError, match=r"ops outside the TFLite builtins: MatrixInverse; .*edge.supported_ops=builtins\+select_tf"
    ):
        convert(model_with_matrix_inverse, "none")


def test_select_tf_ops_convert_but_litert_cannot_run_them(model_with_matrix_inverse: Path) -> None:
    tflite = convert(model_with_matrix_inverse, "dynamic", supported_ops="builtins+select_tf")

    with pytest.raises(EdgeError, match=r"TF Select \(Flex\) ops, which the LiteRT Python runtime cannot run"):
        TfliteModel(tflite)


def test_int8_calibration_cannot_run_select_tf_ops(model_with_matrix_inverse: Path, calibration: np.ndarray) -> None:
    with pytest.raises(EdgeError, match=r"int8 calibration cannot run the TF Select ops MatrixInverse.*`dynamic`"):
        convert(model_with_matrix_inverse, "int8", calibration, supported_ops="builtins+select_tf")


def test_unsupported_ops_parses_converter_and_runtime_messages() -> None:
    converter = "error: 'tf.Erf' op is neither a custom op nor a flex op\nTF Select ops: Erf, MatrixInverse\n"
    runtime = "Make sure you apply/link the Flex delegate. Node number 2 (FlexLgamma) failed to prepare."

    assert unsupported_ops(converter) == ["Erf", "MatrixInverse"]
    assert unsupported_ops(runtime) == ["Lgamma"]
    assert unsupported_ops("something else broke") == []


def test_bad_settings_are_named(saved_model: Path) -> None:
    with pytest.raises(EdgeError, match=r"unknown supported_ops 'all'.*'builtins\+select_tf'"):
        convert(saved_model, "none", supported_ops="all")
    with pytest.raises(EdgeError, match=r"unknown io_dtype 'int16' \(edge.io_dtype / --io-dtype\)"):
        convert(saved_model, "int8", np.zeros((1, 16, 16, 3), np.float32), io_dtype="int16")


def test_a_directory_without_a_saved_model_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(EdgeError, match=r"is not a SavedModel directory \(no saved_model.pb\).*Format-Serving"):
        convert(tmp_path, "none")


def test_a_saved_model_without_the_preprocessed_signature_is_rejected(tmp_path: Path) -> None:
    module = tf.Module()
    module.scale = tf.Variable(2.0)
    double = tf.function(lambda x: {"y": x * module.scale}, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": double.get_concrete_function()})

    with pytest.raises(EdgeError, match=r"has no `serving_preprocessed` signature \(it has \['serving_default'\]\)"):
        convert(tmp_path, "none")


def test_a_three_channel_model_gets_the_rgb_frames_scaled_and_not_grayed(tmp_path: Path) -> None:
    import tf_keras as keras

    from components.trainer.export import export_saved_model
    from foundation.preprocessing_spec import PreprocessingSpec

    spec = PreprocessingSpec(image_size=8, channels=3)
    keras.utils.set_random_seed(0)
    inputs = keras.Input(spec.shape)
    x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    outputs = keras.layers.Dense(3, activation="softmax")(keras.layers.GlobalAveragePooling2D()(x))
    export_saved_model(keras.Model(inputs, outputs), str(tmp_path / "rgb"), spec, ["r", "g", "b"])
    frames = np.random.default_rng(1).integers(0, 256, (5, 8, 8, 3)).astype(np.uint8)

    model = TfliteModel(convert(tmp_path / "rgb", "none"))
    expected = tf.saved_model.load(str(tmp_path / "rgb")).signatures["serving_preprocessed"](
        images=tf.constant(frames.astype(np.float32) / 255.0)
    )["probabilities"]

    assert (model.input.dtype, model.input.shape) == ("uint8", (1, 8, 8, 3))
    np.testing.assert_allclose(model.predict(frames), expected.numpy(), atol=1e-5)
