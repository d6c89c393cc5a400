"""Images as users send them: every format TensorFlow decodes, through `tfxp data from-folder` and the served model.

One fixture folder holds each format (made here with Pillow) for two pictures that two tiny fixed-weight models,
exported with the trainer's exporter, tell apart: an RGB one (reddish vs bluish) and a grayscale one (light vs
dark). Each decodable file must be classified like its RGB JPEG twin, in-process and through the local server over
REST `b64` and gRPC; the others must be refused with 400 / INVALID_ARGUMENT and a one-line message naming the format.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
import requests
import tensorflow as tf
import tf_keras as keras
from import_probe import heavy_modules_loaded
from PIL import Image
from serving_fixtures import write_model_version
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from typer.testing import CliRunner

from components.data.dataset import MANIFEST_FILE
from components.data.from_folder import convert_folder
from components.data.images import upright_image_bytes
from foundation.contract import IMAGE_KEY, LABEL_KEY
from foundation.data.tfrecords import iter_examples
from foundation.image_checks import image_format_errors
from foundation.image_formats import ACCEPTED_TEXT, detect_image_format, served_format_error
from foundation.preprocessing import decode_image
from foundation.preprocessing_spec import PreprocessingSpec
from pipeline.cli import app
from serving.errors import readable_message
from serving.model_config import ModelConfig
from serving.server import ModelServer
from serving.server_options import ServerOptions


def split_files(directory: Path, split: str) -> list[Path]:
    """The shards `tfxp data` wrote for one split (what these tests check is how it writes them)."""
    return sorted((directory / split).glob("part-*-of-*.tfrecord.gz"))


SIZE = 16
# (left half, right half): the halves differ so that a rotation shows.
PICTURES = {"red": ((250, 160, 150), (230, 140, 130)), "blue": ((20, 30, 120), (40, 60, 160))}
EXIF_ORIENTATION = 0x0112
# Files whose colours are gone (their twin for the RGB model's probabilities is the grayscale JPEG).
GRAY = {"gray.jpg", "gray.png", "gray16.png"}


def _picture(name: str) -> Image.Image:
    left, right = PICTURES[name]
    pixels = np.zeros((24, 32, 3), np.uint8)
    pixels[:, :16], pixels[:, 16:] = left, right
    return Image.fromarray(pixels)


def _encode(image: Image.Image, image_format: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=image_format, **options)
    return buffer.getvalue()


def _variants(name: str) -> dict[str, bytes]:
    """Every file of the fixture folder for one picture."""
    rgb = _picture(name)
    other = _picture("blue" if name == "red" else "red")  # later frames of animations: must not count
    palette = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=4)
    rgba = rgb.copy()
    rgba.putalpha(128)
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = 6  # "rotate 90° clockwise to view": the pixels are stored turned counter-clockwise
    return {
        "rgb.jpg": _encode(rgb, "JPEG", quality=95),
        "gray.jpg": _encode(rgb.convert("L"), "JPEG", quality=95),
        "cmyk.jpg": _encode(rgb.convert("CMYK"), "JPEG", quality=95),
        "exif-rotated.jpg": _encode(rgb.transpose(Image.Transpose.ROTATE_90), "JPEG", quality=95, exif=exif),
        "rgba.png": _encode(rgba, "PNG"),
        "palette.png": _encode(palette, "PNG"),
        "gray16.png": _encode(Image.fromarray(np.asarray(rgb.convert("L")).astype(np.uint16) * 257), "PNG"),
        "gray.png": _encode(rgb.convert("L"), "PNG"),
        "png-named.jpg": _encode(rgb, "PNG"),
        "image.gif": _encode(palette, "GIF"),
        "animated.gif": _encode(palette, "GIF", save_all=True, append_images=[other.convert("P")]),
        "image.webp": _encode(rgb, "WEBP", quality=90),
        "image.bmp": _encode(rgb, "BMP"),
        "palette.bmp": _encode(palette, "BMP"),
        "animated.webp": _encode(rgb, "WEBP", save_all=True, append_images=[other], lossless=True),
        "image.tiff": _encode(rgb, "TIFF"),
        "image.heic": b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(64),  # Pillow writes no HEIC
        "notes.txt": b"not an image, whatever its name says",
    }


# What the served model does with each file: None = classifies it, else words its refusal must contain.
SERVED = {
    "rgb.jpg": None,
    "gray.jpg": None,
    "cmyk.jpg": None,
    "exif-rotated.jpg": None,
    "rgba.png": None,
    "palette.png": None,
    "gray16.png": None,
    "gray.png": None,
    "png-named.jpg": None,
    "image.gif": None,
    "animated.gif": None,
    "image.webp": None,
    "image.bmp": None,
    "palette.bmp": "unsupported image format BMP with 8 bits per pixel",
    "animated.webp": "unsupported image format animated WebP",
    "image.tiff": "unsupported image format TIFF",
    "image.heic": "unsupported image format HEIC",
    "notes.txt": "Unknown image file format",
}
ACCEPTED = [name for name, refusal in SERVED.items() if refusal is None]
REFUSED = {name: refusal for name, refusal in SERVED.items() if refusal is not None}
# What `tfxp data from-folder` does with each file that is not stored byte for byte.
REENCODED = {
    "cmyk.jpg": "JPEG CMYK",
    "exif-rotated.jpg": "JPEG RGB, EXIF orientation 6",
    "image.gif": "GIF P",
    "animated.gif": "GIF P",
    "image.webp": "WebP RGB",
    "animated.webp": "WebP RGB",
    "image.bmp": "BMP RGB",
    "palette.bmp": "BMP P",
}
SKIPPED = {
    "image.tiff": "TIFF image: not a format the model accepts",
    "image.heic": "HEIC image: not a format the model accepts",
    "notes.txt": "not an image in a format tfxp knows",
}
KEPT = set(SERVED) - set(REENCODED) - set(SKIPPED)


@pytest.fixture(scope="module")
def files() -> dict[str, dict[str, bytes]]:
    return {picture: _variants(picture) for picture in PICTURES}


@pytest.fixture(scope="module")
def folder(files: dict[str, dict[str, bytes]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("photos")
    for picture, variants in files.items():
        (src / picture).mkdir()
        for name, content in variants.items():
            (src / picture / name).write_bytes(content)
    return src


def _fixed_model(channels: int) -> keras.Model:
    """Mean colour → two classes: reddish vs bluish (RGB), or light vs dark (grayscale); not saturated."""
    inputs = keras.Input(shape=(SIZE, SIZE, channels), dtype="float32", name="images")
    dense = keras.layers.Dense(2, activation="softmax", dtype="float32")
    model = keras.Model(inputs, dense(keras.layers.GlobalAveragePooling2D()(inputs)))
    # Logit difference (red - blue): brightness with a lean towards red, so gray copies keep their class and
    # swapped channels would move the probabilities.
    lean = np.array([[2.0], [2.0], [0.5]] if channels == 3 else [[6.0]], np.float32)
    threshold = 2.0 if channels == 3 else 2.7
    weights, bias = np.concatenate([lean / 2, -lean / 2], axis=1), np.array([-threshold / 2, threshold / 2], np.float32)
    dense.set_weights([weights, bias])
    return model


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("models")
    return {
        name: write_model_version(base / name, 1, _fixed_model(channels), labels=["red", "blue"])
        for name, channels in (("rgb", 3), ("gray", 1))
    }


def _twin(name: str) -> str:
    return "gray.jpg" if name in GRAY else "rgb.jpg"


def _assert_like_twins(model: str, probabilities: Callable[[str, str], np.ndarray]) -> None:
    for picture, label in (("red", 0), ("blue", 1)):
        for name in ACCEPTED:
            got = probabilities(picture, name)
            assert int(np.argmax(got)) == label, f"{model} model: {picture}/{name} → {got}"
            twin = probabilities(picture, _twin(name) if model == "rgb" else "rgb.jpg")
            np.testing.assert_allclose(got, twin, atol=0.03, err_msg=f"{model} model: {picture}/{name} vs its twin")


# --- recognising formats -------------------------------------------------------------------------------------------


def test_formats_are_recognised_by_content_and_the_graph_agrees(files: dict[str, dict[str, bytes]]) -> None:
    variants = files["red"]
    assert detect_image_format(variants["png-named.jpg"]) == "PNG"
    assert detect_image_format(variants["image.tiff"]) == "TIFF"
    assert detect_image_format(variants["animated.webp"]) == "WebP"
    assert detect_image_format(b"") == detect_image_format(variants["notes.txt"]) == "unknown"
    samples = [*variants.values(), b"", b"\xff", b"BM", b"RIFF", b"II*"]
    in_graph = image_format_errors(tf.constant(samples)).numpy()
    assert [message.decode() or None for message in in_graph] == [served_format_error(data) for data in samples]
    for name, refusal in SERVED.items():
        message = served_format_error(variants[name])
        assert (message is None) if refusal is None else (refusal in message and ACCEPTED_TEXT in message), name
        assert message is None or not set(message) & set("'\"\\\n")  # Assert would escape these


def test_the_format_tables_load_neither_tensorflow_nor_pillow() -> None:
    assert heavy_modules_loaded("import foundation.image_formats", ["tensorflow", "PIL"]) == []


def test_readable_message_keeps_one_line_without_the_node_or_the_assert_wrapping() -> None:
    raw = "assertion failed: [unsupported image format TIFF; x (y)]\n\t [[{{node map/while/Assert/Assert}}]]"
    assert readable_message(raw) == "unsupported image format TIFF; x (y)"
    assert readable_message(raw + " (gRPC [::1]:8500)") == "unsupported image format TIFF; x (y) (gRPC [::1]:8500)"
    assert readable_message("Invalid JPEG data\n\t [[{{node map/while/DecodeImage}}]]") == "Invalid JPEG data"
    assert readable_message("Servable not found for request: Latest(x)") == "Servable not found for request: Latest(x)"


# --- tfxp data from-folder -----------------------------------------------------------------------------------------


def _stored(out: Path) -> dict[tuple[str, int], list[bytes]]:
    examples = iter_examples([path for split in ("train", "eval") for path in split_files(out, split)])
    stored: dict[tuple[str, int], list[bytes]] = {}
    for example in examples:
        content = example.features.feature[IMAGE_KEY].bytes_list.value[0]
        label = example.features.feature[LABEL_KEY].int64_list.value[0]
        stored.setdefault((detect_image_format(content), label), []).append(content)
    return stored


def test_from_folder_takes_every_accepted_format_and_lists_the_rest(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["data", "from-folder", str(folder), "--out", str(out), "--workers", "2"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    taken = len(KEPT) + len(REENCODED)
    assert {name: sum(counts[name] for counts in manifest["counts"].values()) for name in PICTURES} == {
        "red": taken,
        "blue": taken,
    }
    assert {tuple(entry) for entry in manifest["skipped"]} == {
        (f"{picture}/{name}", reason) for picture in PICTURES for name, reason in _skip_reasons().items()
    }
    for picture in PICTURES:
        for name, reason in SKIPPED.items():
            assert f"{picture}/{name}: {reason}" in result.output
    assert sorted(manifest["reencoded"]) == sorted(
        f"{picture}/{name} ({original})" for picture in PICTURES for name, original in REENCODED.items()
    )
    assert f"skipped {2 * len(SKIPPED)} files" in result.output
    assert f"re-encoded (stored as upright JPEG/PNG): {2 * len(REENCODED)} files" in result.output
    # Stored: JPEG or PNG only, all decodable by the trainer's preprocessing for either channel count.
    stored = _stored(out)
    assert {image_format for image_format, _ in stored} == {"JPEG", "PNG"}
    for contents in stored.values():
        for content in contents:
            for channels in (1, 3):
                assert decode_image(tf.constant(content), PreprocessingSpec(SIZE, channels)).shape[-1] == channels


def _skip_reasons() -> dict[str, str]:
    accepted = f" ({ACCEPTED_TEXT}); convert it to PNG or JPEG"
    return {name: reason + (accepted if "image:" in reason else "") for name, reason in SKIPPED.items()}


def test_from_folder_stores_exif_rotated_photos_upright(folder: Path, tmp_path: Path) -> None:
    convert_folder(folder, tmp_path / "out", shards=1, workers=1)
    red = 1  # class folders sort: blue = 0, red = 1
    expected = np.asarray(_picture("red"), np.float32)

    def shows_the_picture(content: bytes) -> bool:
        image = Image.open(io.BytesIO(content)).convert("RGB")
        return image.size == (32, 24) and float(np.abs(np.asarray(image, np.float32) - expected).mean()) < 4

    # rgb.jpg, and the rotated photo turned upright (gray.jpg is gray; the other files are stored as PNG).
    assert sum(shows_the_picture(content) for content in _stored(tmp_path / "out")[("JPEG", red)]) == 2


def test_from_folder_strict_fails_naming_the_files(folder: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["data", "from-folder", str(folder), "--out", str(tmp_path / "out"), "--strict"])
    assert result.exit_code == 2
    assert f"--strict: {2 * len(SKIPPED)} of {2 * len(SERVED)} files in" in result.output
    assert "blue/image.heic (HEIC image: not a format the model accepts" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


# --- the served model ----------------------------------------------------------------------------------------------


def test_saved_model_classifies_like_the_rgb_jpeg_twin_and_refuses_the_rest(
    files: dict[str, dict[str, bytes]], models: dict[str, Path]
) -> None:
    for model, path in models.items():
        signature = tf.saved_model.load(str(path)).signatures["serving_default"]
        names = [(picture, name) for picture in PICTURES for name in ACCEPTED]
        batch = tf.constant([files[picture][name] for picture, name in names])
        outputs = dict(zip(names, signature(image_bytes=batch)["probabilities"].numpy(), strict=True))
        _assert_like_twins(model, lambda picture, name, outputs=outputs: outputs[picture, name])
        for name, refusal in REFUSED.items():
            with pytest.raises(tf.errors.InvalidArgumentError, match=refusal):
                signature(image_bytes=tf.constant([files["red"]["rgb.jpg"], files["red"][name]]))


def test_serving_does_not_apply_exif_orientation(files: dict[str, dict[str, bytes]]) -> None:
    spec = PreprocessingSpec(SIZE, 3)
    rotated = decode_image(tf.constant(files["red"]["exif-rotated.jpg"]), spec).numpy()
    upright = decode_image(tf.constant(files["red"]["rgb.jpg"]), spec).numpy()
    np.testing.assert_allclose(rotated, np.rot90(upright), atol=0.05)  # the stored pixels, as stored


@pytest.fixture(scope="module")
def server(models: dict[str, Path]) -> Iterator[ModelServer]:
    configs = [ModelConfig(name, path.parent) for name, path in models.items()]
    running = ModelServer(configs, ServerOptions(grpc_port=0, rest_port=0)).start()
    try:
        yield running
    finally:
        running.stop()


def _b64(data: bytes) -> dict[str, str]:
    return {"b64": base64.b64encode(data).decode()}


def test_local_server_over_rest_and_grpc(files: dict[str, dict[str, bytes]], server: ModelServer) -> None:
    names = [(picture, name) for picture in PICTURES for name in ACCEPTED]
    channel = grpc.insecure_channel(server.grpc_target)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def grpc_predict(model: str, images: list[bytes]) -> predict_pb2.PredictResponse:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        request.inputs["image_bytes"].CopyFrom(tf.make_tensor_proto(images, dtype=tf.string))
        return stub.Predict(request, timeout=30)

    try:
        for model in ("rgb", "gray"):
            url = f"{server.rest_url}/v1/models/{model}:predict"
            response = requests.post(url, json={"instances": [_b64(files[p][n]) for p, n in names]}, timeout=30)
            assert response.status_code == 200, response.text
            rest = dict(
                zip(names, np.array([row["probabilities"] for row in response.json()["predictions"]]), strict=True)
            )
            _assert_like_twins(model, lambda picture, name, rest=rest: rest[picture, name])
            answer = grpc_predict(model, [files[p][n] for p, n in names])
            over_grpc = tf.make_ndarray(answer.outputs["probabilities"])
            np.testing.assert_allclose(over_grpc, np.array([rest[key] for key in names]), atol=1e-6)
            for name, refusal in REFUSED.items():
                response = requests.post(url, json={"instances": [_b64(files["blue"][name])]}, timeout=30)
                assert response.status_code == 400, (name, response.text)
                message = response.json()["error"]
                assert message.startswith(refusal) and "\n" not in message and "node" not in message, message
                with pytest.raises(grpc.RpcError) as caught:
                    grpc_predict(model, [files["blue"][name]])
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert caught.value.details() == message
    finally:
        channel.close()


def test_upright_image_bytes_applies_exif_orientation_and_keeps_the_rest(files: dict[str, dict[str, bytes]]) -> None:
    variants = files["red"]
    upright = Image.open(io.BytesIO(upright_image_bytes(variants["exif-rotated.jpg"])))
    assert upright.format == "JPEG" and upright.size == (32, 24)
    expected = np.asarray(_picture("red"), np.float32)
    assert np.abs(np.asarray(upright.convert("RGB"), np.float32) - expected).mean() < 4
    for name in ("rgb.jpg", "palette.png", "image.gif", "image.tiff", "notes.txt"):
        assert upright_image_bytes(variants[name]) == variants[name], name


def test_tfxp_predict_classifies_every_accepted_file_and_names_a_refused_format(
    folder: Path, server: ModelServer, models: dict[str, Path]
) -> None:
    labels = str(models["gray"] / "assets" / "labels.txt")
    accepted = [str(folder / "red" / name) for name in ACCEPTED]
    for transport, target in (("--grpc", server.grpc_target), ("--rest", server.rest_url)):
        result = CliRunner().invoke(
            app, ["predict", *accepted, transport, target, "--model-name", "gray", "--labels", labels, "--top-k", "1"]
        )
        assert result.exit_code == 0, result.output
        answers = [line for line in result.output.splitlines() if line.startswith(str(folder))]
        assert len(answers) == len(ACCEPTED) and all(": red (" in line for line in answers), result.output
        tiff = str(folder / "red" / "image.tiff")
        result = CliRunner().invoke(
            app, ["predict", tiff, transport, target, "--model-name", "gray", "--labels", labels]
        )
        assert result.exit_code == 2
        assert "INVALID_ARGUMENT: unsupported image format TIFF; the model accepts JPEG" in " ".join(
            result.output.split()
        )
