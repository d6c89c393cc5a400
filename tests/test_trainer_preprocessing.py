"""The shared preprocessing: decode + resize to float32 [0, 1], and the spec's JSON round trip."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from components.trainer.preprocessing import (
    PreprocessingSpec,
    decode_image,
    decode_pixels,
    image_size_errors,
    preprocess_image_bytes,
)


def _encode(pixels: np.ndarray, image_format: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=image_format)
    return buffer.getvalue()


def test_png_at_target_size_decodes_to_exact_pixels() -> None:
    pixels = np.random.default_rng(0).integers(0, 256, size=(8, 8), dtype=np.uint8)
    image = decode_image(tf.constant(_encode(pixels, "PNG")), PreprocessingSpec(image_size=8, channels=1))
    assert image.dtype == tf.float32
    assert image.shape == (8, 8, 1)
    np.testing.assert_allclose(image.numpy()[..., 0], pixels / 255.0, atol=1e-6)


def test_jpeg_rgb_is_resized_and_converted_to_grayscale() -> None:
    pixels = np.full((40, 30, 3), 200, dtype=np.uint8)
    image = decode_image(tf.constant(_encode(pixels, "JPEG")), PreprocessingSpec(image_size=16, channels=1))
    assert image.shape == (16, 16, 1)
    assert float(tf.reduce_min(image)) >= 0.0 and float(tf.reduce_max(image)) <= 1.0
    np.testing.assert_allclose(image.numpy(), 200 / 255.0, atol=0.02)


def test_batch_matches_single_decodes_and_grayscale_becomes_rgb() -> None:
    rng = np.random.default_rng(1)
    encoded = [_encode(rng.integers(0, 256, size=(12, 12), dtype=np.uint8), "PNG") for _ in range(3)]
    spec = PreprocessingSpec(image_size=10, channels=3)
    batch = preprocess_image_bytes(tf.constant(encoded), spec)
    assert batch.shape == (3, 10, 10, 3)
    for index, image_bytes in enumerate(encoded):
        np.testing.assert_allclose(batch[index].numpy(), decode_image(tf.constant(image_bytes), spec).numpy())
    np.testing.assert_allclose(batch[..., 0].numpy(), batch[..., 2].numpy())


def test_batch_works_inside_a_tf_function_with_unknown_batch_size() -> None:
    spec = PreprocessingSpec(image_size=4, channels=1)
    function = tf.function(
        lambda batch: preprocess_image_bytes(batch, spec), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    pixels = np.zeros((4, 4), dtype=np.uint8)
    assert function(tf.constant([_encode(pixels, "PNG")] * 2)).shape == (2, 4, 4, 1)


def test_gray_pixels_decode_unchanged_for_a_one_channel_model() -> None:
    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16)
    decoded = decode_pixels(tf.constant(_encode(pixels, "PNG")), PreprocessingSpec(image_size=16, channels=1))
    np.testing.assert_array_equal(decoded.numpy()[..., 0], pixels)


def test_color_becomes_gray_like_pillow_whatever_the_format() -> None:
    pixels = np.random.default_rng(2).integers(0, 256, size=(12, 12, 3), dtype=np.uint8)
    expected = np.asarray(Image.fromarray(pixels).convert("L"), np.int32)
    spec = PreprocessingSpec(image_size=12, channels=1)
    for image_format in ("PNG", "BMP", "WEBP"):  # lossless; BMP and WebP decoders give only RGB
        options = {"lossless": True} if image_format == "WEBP" else {}
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format=image_format, **options)
        decoded = decode_pixels(tf.constant(buffer.getvalue()), spec).numpy()[..., 0].astype(np.int32)
        assert np.abs(decoded - expected).max() <= 1, image_format


def test_a_refused_format_fails_with_a_message_naming_it() -> None:
    tiff = _encode(np.zeros((4, 4), np.uint8), "TIFF")
    with pytest.raises(tf.errors.InvalidArgumentError, match="unsupported image format TIFF; the model accepts JPEG"):
        decode_image(tf.constant(tiff), PreprocessingSpec(image_size=4, channels=1))
    spec = PreprocessingSpec(image_size=4, channels=3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="unsupported image format TIFF"):
        preprocess_image_bytes(tf.constant([_encode(np.zeros((4, 4), np.uint8), "PNG"), tiff]), spec)


def test_spec_json_round_trip() -> None:
    spec = PreprocessingSpec(image_size=224, channels=3)
    assert PreprocessingSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"image_size": 32}', r"missing keys \['channels'\]"),
        ('{"image_size": 32, "channels": 1, "mean": 0.5}', r"unknown keys \['mean'\]"),
    ],
)
def test_spec_from_bad_json_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PreprocessingSpec.from_json(text)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"image_size": 0, "channels": 1}, "image_size must be a positive int"),
        ({"image_size": 8, "channels": 2}, "1 \\(grayscale\\) or 3"),
    ],
)
def test_spec_rejects_bad_values(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PreprocessingSpec(**kwargs)


def test_a_spec_written_before_the_pixel_limit_reads_with_the_default() -> None:
    from components.image_formats import DEFAULT_MAX_IMAGE_PIXELS

    spec = PreprocessingSpec.from_json('{"channels": 1, "image_size": 32}')
    assert spec.max_image_pixels == DEFAULT_MAX_IMAGE_PIXELS
    assert '"max_image_pixels": 40000000' in spec.to_json()


def test_the_pixel_limit_is_the_specs_own() -> None:
    spec = PreprocessingSpec(image_size=8, channels=1, max_image_pixels=1000)
    small, large = (tf.io.encode_png(tf.zeros([side, side, 1], tf.uint8)) for side in (31, 32))  # 961, 1024 px
    assert preprocess_image_bytes(tf.stack([small]), spec).shape == (1, 8, 8, 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="image of 32x32 pixels is over the limit of 1000"):
        preprocess_image_bytes(tf.stack([small, large]), spec)


def test_the_size_check_traces_for_a_batch_of_fixed_size() -> None:
    """The JPEG header walk must trace when the batch size is static (the Trainer traces a batch of one)."""
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30)).save(buffer, format="JPEG")
    check = tf.function(lambda images: image_size_errors(images, 100), input_signature=[tf.TensorSpec([1], tf.string)])
    messages = check(tf.constant([buffer.getvalue()])).numpy()
    assert b"40" in messages[0] and b"30" in messages[0]
