"""The shared preprocessing: decode + resize to float32 [0, 1], and the spec's JSON round trip."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from foundation.image_checks import image_size_errors
from foundation.preprocessing import decode_image, decode_pixels, preprocess_image_bytes
from foundation.preprocessing_spec import PreprocessingSpec


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
        ({"image_size": 0, "channels": 1}, r"image_size must be an int in 1\.\.4096, got 0"),
        # A hand-edited preprocessing.json: 3e9 would make a device model of 3e9 x 3e9 frames.
        ({"image_size": 3_000_000_000, "channels": 1}, r"image_size must be an int in 1\.\.4096, got 3000000000"),
        ({"image_size": 8, "channels": 2}, "1 \\(grayscale\\) or 3"),
    ],
)
def test_spec_rejects_bad_values(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PreprocessingSpec(**kwargs)


def test_a_spec_written_before_the_pixel_limit_reads_with_the_default() -> None:
    from foundation.image_formats import DEFAULT_MAX_IMAGE_PIXELS

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


# --- animated GIFs: TF's decoder holds every frame, so the size check counts them ------------------------------

LIMIT = 40_000_000


def _graph_errors(images: list[bytes], limit: int = LIMIT) -> list[str]:
    """`image_size_errors` traced for a batch of fixed size, as the Trainer traces it."""
    check = tf.function(
        lambda batch: image_size_errors(batch, limit), input_signature=[tf.TensorSpec([len(images)], tf.string)]
    )
    return [message.decode() for message in check(tf.constant(images)).numpy()]


def test_an_animated_gif_bomb_is_refused_by_python_and_by_the_graph_alike() -> None:
    from image_bombs import gif_bomb

    from foundation.image_checks import check_image_formats
    from foundation.image_formats import image_pixels, oversized_error

    bomb = gif_bomb()  # 200 frames of 3000 x 3000: 1.5 MB, 1.75 GB in DecodeImage
    expected = (
        "animated GIF of 200 frames of 3000x3000 pixels (1800000000 pixels once decoded, as the decoder holds every "
        "frame) is over the limit of 40000000 pixels per image the model was exported with "
        "(trainer.max_image_pixels); send its first frame as PNG or JPEG"
    )
    assert image_pixels(bomb) == 200 * 3000 * 3000
    assert oversized_error(bomb, LIMIT) == expected
    assert _graph_errors([bomb]) == [expected]
    check = tf.function(
        lambda batch: check_image_formats(batch, LIMIT), input_signature=[tf.TensorSpec([1], tf.string)]
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"animated GIF of 200 frames of 3000x3000 pixels"):
        check(tf.constant([bomb]))


def test_a_small_animated_gif_passes_while_its_frames_times_pixels_are_within_the_limit() -> None:
    from image_bombs import gif_bomb

    from foundation.image_formats import oversized_error

    small = gif_bomb(10, 64)  # 10 x 64 x 64 = 40960 pixels once decoded
    within = PreprocessingSpec(image_size=8, channels=1, max_image_pixels=40960)
    assert preprocess_image_bytes(tf.constant([small]), within).shape == (1, 8, 8, 1)
    assert oversized_error(small, 40960) is None and _graph_errors([small], 40960) == [""]
    over = PreprocessingSpec(image_size=8, channels=1, max_image_pixels=40959)
    with pytest.raises(tf.errors.InvalidArgumentError, match="animated GIF of 10 frames of 64x64 pixels"):
        preprocess_image_bytes(tf.constant([small]), over)


def test_a_truncated_gif_counts_the_frames_it_holds() -> None:
    from image_bombs import gif_bomb

    from foundation.image_formats import GifFrames, gif_frames, oversized_error

    bomb, small = gif_bomb(), gif_bomb(10, 64)
    half, cut_small, screen_only = bomb[: len(bomb) // 2], small[: len(small) - 30], small[:20]
    assert [gif_frames(data) for data in (half, cut_small, screen_only)] == [
        GifFrames(100, 3000, 3000),
        GifFrames(10, 64, 64),
        GifFrames(0, 0, 0),
    ]
    messages = _graph_errors([half, cut_small, screen_only])
    assert messages == [oversized_error(data, LIMIT) or "" for data in (half, cut_small, screen_only)]
    assert "animated GIF of 100 frames of 3000x3000" in messages[0] and messages[1:] == ["", ""]


def test_a_gif_whose_blocks_do_not_end_within_the_cap_is_refused() -> None:
    from image_bombs import gif_bomb

    from foundation.image_formats import GIF_MAX_STEPS, GIF_NO_END_MESSAGE, gif_frames, oversized_error

    small = gif_bomb(1, 16)
    comment = b"\x21\xfe" + b"\x01x" * GIF_MAX_STEPS + b"\x00"  # a comment of one-byte sub-blocks
    endless = small[:-1] + comment + small[-1:]
    assert gif_frames(endless) == "exhausted" and oversized_error(endless, LIMIT) == GIF_NO_END_MESSAGE
    assert _graph_errors([endless, small]) == [GIF_NO_END_MESSAGE, ""]
    assert "within its first 65536 blocks" in GIF_NO_END_MESSAGE


def test_a_gif_whose_frames_are_larger_than_its_screen_counts_the_frames_size() -> None:
    from image_bombs import gif_bomb

    from foundation.image_formats import image_pixels, oversized_error

    # giflib allocates each frame at its own descriptor's size, whatever the screen declares.
    bomb = bytearray(gif_bomb(8, 3000))
    bomb[6:10] = (16).to_bytes(2, "little") * 2  # a 16 x 16 screen
    single = bytearray(gif_bomb(1, 9000))
    single[6:10] = (16).to_bytes(2, "little") * 2
    assert image_pixels(bytes(bomb)) == 8 * 3000 * 3000
    messages = _graph_errors([bytes(bomb), bytes(single)])
    assert messages == [oversized_error(bytes(data), LIMIT) for data in (bomb, single)]
    assert "animated GIF of 8 frames of 3000x3000 pixels (72000000 pixels" in messages[0]
    assert messages[1].startswith("image of 9000x9000 pixels is over the limit of 40000000")
