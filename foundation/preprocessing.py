"""The one definition of image preprocessing, shared by training, the serving signatures and edge conversion.

An encoded image in a format the model accepts (`foundation.image_formats`: JPEG, PNG, GIF, BMP, WebP) becomes
float32 pixels in [0, 1], resized to `image_size` × `image_size` with `channels` channels; other formats are
refused in-graph with an InvalidArgumentError naming the detected format. EXIF orientation is not applied: the
pixels are used as stored (docs/architecture.md, "Model contract"). Normalisation beyond [0, 1] happens inside the Keras
model, so the TFLite model (which is converted from the `serving_preprocessed` signature) and every SavedModel
signature share it too.

With `central_crop` < 1 (ImageNet: 0.875), evaluation and every SavedModel signature that takes encoded images first
crop the central square of side `central_crop` × the shorter side, keeping the aspect, then resize (Model Garden's
`center_crop_image`); training with the `crop` augmentation uses its random-resized crop instead (augment.py).
The device model gets the same crop from its app: MediaPipe's region of interest (docs/edge.md).

Example:
    spec = PreprocessingSpec(image_size=32, channels=1)
    images = preprocess_image_bytes(tf.constant([png_bytes]), spec)  # float32 [1, 32, 32, 1]
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from foundation.image_formats import (
    ACCEPTED_FORMATS,
    ANIMATED_WEBP_MESSAGE,
    BMP_BITS_OFFSET,
    BMP_BITS_TEMPLATE,
    BMP_DECODED_BITS,
    BMP_SIZE_OFFSET,
    DEFAULT_MAX_IMAGE_PIXELS,
    GIF_EXTENSION,
    GIF_FRAMES_TEMPLATE,
    GIF_IMAGE,
    GIF_IMAGE_BYTES,
    GIF_MAX_STEPS,
    GIF_NO_END_MESSAGE,
    GIF_PACKED_OFFSET,
    GIF_SCREEN_BYTES,
    GIF_SIZE_OFFSET,
    GIF_WINDOW,
    HEADER_BYTES,
    JPEG_MAX_STEPS,
    JPEG_NO_FRAME_MESSAGE,
    JPEG_NO_LENGTH_MARKERS,
    JPEG_SOF_MARKERS,
    JPEG_WINDOW,
    OVERSIZED_TEMPLATE,
    PNG_SIZE_OFFSET,
    SIGNATURES,
    UNKNOWN,
    UNKNOWN_MESSAGE,
    UNSUPPORTED_TEMPLATE,
    WEBP_ANIMATION_FLAG,
    WEBP_EXTENDED,
    WEBP_FLAGS_OFFSET,
)

_VALID_CHANNELS = (1, 3)
# ITU-R BT.601 luma, as libjpeg and Pillow's convert("L"); they sum to 1, so gray pixels stay exactly as they are.
# The edge model's camera input (edge/camera.py) uses them too.
LUMA_WEIGHTS = (0.299, 0.587, 0.114)


@dataclass(frozen=True)
class PreprocessingSpec:
    """How encoded images become model inputs.

    Attributes:
        image_size: Square output size in pixels (height = width).
        channels: 1 (grayscale) or 3 (RGB); decoding converts the image to this many channels.
        max_image_pixels: Largest width x height an image's header may declare; larger ones are refused before
            decoding (`foundation.image_formats.DEFAULT_MAX_IMAGE_PIXELS`). Specs written before it existed
            read as the default.
        central_crop: The central square's side as a share of the image's shorter side, cropped before the
            resize (`center_crop`; `trainer.eval_crop`, Model Garden's 0.875). Defaults to 1.0: the whole image,
            squashed to a square, as specs written before it existed read.
    """

    image_size: int
    channels: int
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    central_crop: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.image_size, int) or isinstance(self.image_size, bool) or self.image_size < 1:
            raise ValueError(f"PreprocessingSpec.image_size must be a positive int, got {self.image_size!r}")
        if self.channels not in _VALID_CHANNELS:
            raise ValueError(f"PreprocessingSpec.channels must be 1 (grayscale) or 3 (RGB), got {self.channels!r}")
        if not isinstance(self.max_image_pixels, int) or self.max_image_pixels < 1:
            raise ValueError(
                f"PreprocessingSpec.max_image_pixels must be a positive int, got {self.max_image_pixels!r}"
            )
        if (
            not isinstance(self.central_crop, (int, float))
            or isinstance(self.central_crop, bool)
            or not 0 < self.central_crop <= 1
        ):
            raise ValueError(
                f"PreprocessingSpec.central_crop must be a share of the shorter side in (0, 1] (1 = the whole "
                f"image, Model Garden's 0.875), got {self.central_crop!r}"
            )

    @property
    def shape(self) -> tuple[int, int, int]:
        """The [H, W, C] shape of one preprocessed image."""
        return (self.image_size, self.image_size, self.channels)

    def to_json(self) -> str:
        """The spec as JSON (what `assets/preprocessing.json` holds)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PreprocessingSpec:
        """Reads a spec written by `to_json`.

        Raises:
            ValueError: the text is not a JSON object, or has missing or unknown keys.
        """
        try:
            values: Any = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"preprocessing spec is not valid JSON ({error}); expected e.g. {_EXAMPLE}") from None
        if not isinstance(values, dict):
            raise ValueError(f"preprocessing spec must be a JSON object like {_EXAMPLE}, got {text[:80]!r}")
        fields = {field.name for field in dataclasses.fields(cls)}
        optional = {field.name for field in dataclasses.fields(cls) if field.default is not dataclasses.MISSING}
        unknown, missing = sorted(set(values) - fields), sorted(fields - optional - set(values))
        if unknown or missing:
            raise ValueError(
                f"preprocessing spec has unknown keys {unknown} and missing keys {missing}; "
                f"expected exactly {sorted(fields)}, e.g. {_EXAMPLE}"
            )
        return cls(**values)


_EXAMPLE = '{"channels": 1, "image_size": 32}'


def _all(conditions: list[tf.Tensor]) -> tf.Tensor:
    return functools.reduce(tf.logical_and, conditions)


def _any(conditions: list[tf.Tensor]) -> tf.Tensor:
    return functools.reduce(tf.logical_or, conditions)


def _header(image_bytes: tf.Tensor) -> tf.Tensor:
    return tf.strings.join([tf.strings.substr(image_bytes, 0, HEADER_BYTES), b"\x00" * HEADER_BYTES])


def _format_names(head: tf.Tensor) -> tf.Tensor:
    def at(offset: int, magic: bytes) -> tf.Tensor:
        return tf.equal(tf.strings.substr(head, offset, len(magic)), magic)

    name = tf.fill(tf.shape(head), UNKNOWN)
    for signature in reversed(SIGNATURES):  # the first signature that matches wins, as in detect_image_format
        name = tf.where(_all([at(offset, magic) for offset, magic in signature.parts]), signature.name, name)
    return name


def _bytes(strings: tf.Tensor, size: int) -> tf.Tensor:
    """int32 [N, size]: the bytes of N strings of exactly `size` bytes (N may be 0)."""
    raw = tf.cast(tf.io.decode_raw(strings, tf.uint8), tf.int32)
    return tf.reshape(raw, [-1, size])


def _number(raw: tf.Tensor, offset: int, size: int, little: bool) -> tf.Tensor:
    """int64 [N]: the unsigned integer in bytes offset..offset+size of `raw` [N, width]."""
    weights = [256**index for index in range(size)]
    weights = weights if little else weights[::-1]
    return tf.reduce_sum(tf.cast(raw[:, offset : offset + size], tf.int64) * weights, axis=1)


def _jpeg_dimensions(data: tf.Tensor, is_jpeg: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """In-graph `foundation.image_formats.jpeg_dimensions` over [N] strings: (width, height, exhausted)."""
    length = tf.strings.length(data)
    sof = tf.constant(sorted(JPEG_SOF_MARKERS), tf.int32)
    no_length = tf.constant(sorted(JPEG_NO_LENGTH_MARKERS), tf.int32)
    zeros = tf.zeros_like(length, tf.int64)

    def step(
        count: tf.Tensor, position: tf.Tensor, active: tf.Tensor, width: tf.Tensor, height: tf.Tensor
    ) -> tuple[tf.Tensor, ...]:
        start = tf.minimum(position, length)
        window = tf.strings.substr(
            tf.strings.join(
                [tf.strings.substr(data, start, tf.fill(tf.shape(start), JPEG_WINDOW)), b"\x00" * JPEG_WINDOW]
            ),
            0,
            JPEG_WINDOW,
        )
        raw = _bytes(window, JPEG_WINDOW)
        ended = position + JPEG_WINDOW > length
        stray = tf.not_equal(raw[:, 0], 0xFF) | tf.equal(raw[:, 1], 0xFF)
        marker = raw[:, 1:2]
        found = active & ~ended & ~stray & tf.reduce_any(tf.equal(marker, sof), axis=1)
        width = tf.where(found, _number(raw, 7, 2, little=False), width)
        height = tf.where(found, _number(raw, 5, 2, little=False), height)
        size = tf.where(
            stray,
            1,
            tf.where(tf.reduce_any(tf.equal(marker, no_length), axis=1), 2, 2 + raw[:, 2] * 256 + raw[:, 3]),
        )
        moving = active & ~ended & ~found
        return count + 1, tf.where(moving, position + size, position), moving, width, height

    _, _, exhausted, width, height = tf.while_loop(
        lambda count, position, active, *_: (count < JPEG_MAX_STEPS) & tf.reduce_any(active),
        step,
        (tf.constant(0), tf.fill(tf.shape(length), 2), is_jpeg, zeros, zeros),
        # A batch traced at a fixed size (the Trainer's batch of 1) leaves the loop with an unknown one.
        shape_invariants=(tf.TensorShape([]), *[tf.TensorShape([None])] * 4),
        maximum_iterations=JPEG_MAX_STEPS,
    )
    return width, height, exhausted


def _color_table_bytes(packed: tf.Tensor) -> tf.Tensor:
    """int32: the bytes of the color table a GIF packed field (int32 byte values) announces, 0 for none."""
    entries = tf.bitwise.left_shift(tf.ones_like(packed), tf.bitwise.bitwise_and(packed, 0x07) + 1)
    return tf.where(tf.bitwise.bitwise_and(packed, 0x80) != 0, 3 * entries, 0)


def _gif_frames(data: tf.Tensor, is_gif: tf.Tensor, packed: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """In-graph `foundation.image_formats.gif_frames` over [N] strings: (frames, the largest frame's width
    and height, exhausted)."""
    length = tf.strings.length(data)

    def step(
        count: tf.Tensor,
        position: tf.Tensor,
        in_chain: tf.Tensor,
        active: tf.Tensor,
        frames: tf.Tensor,
        width: tf.Tensor,
        height: tf.Tensor,
    ) -> tuple[tf.Tensor, ...]:
        start = tf.minimum(position, length)
        window = tf.strings.substr(
            tf.strings.join(
                [tf.strings.substr(data, start, tf.fill(tf.shape(start), GIF_WINDOW)), b"\x00" * GIF_WINDOW]
            ),
            0,
            GIF_WINDOW,
        )
        raw = _bytes(window, GIF_WINDOW)
        live = active & (position < length)
        chain = live & in_chain
        image = live & ~in_chain & tf.equal(raw[:, 0], GIF_IMAGE)
        extension = live & ~in_chain & tf.equal(raw[:, 0], GIF_EXTENSION)
        size = tf.where(chain, 1 + raw[:, 0], tf.where(image, GIF_IMAGE_BYTES + _color_table_bytes(raw[:, 9]), 2))
        moving = chain | image | extension
        in_chain = tf.where(chain, tf.not_equal(raw[:, 0], 0), image | extension)
        frames = frames + tf.cast(image, tf.int64)
        frame_width, frame_height = _number(raw, 5, 2, little=True), _number(raw, 7, 2, little=True)
        larger = image & (frame_width * frame_height > width * height)
        width, height = tf.where(larger, frame_width, width), tf.where(larger, frame_height, height)
        return count + 1, tf.where(moving, position + size, position), in_chain, moving, frames, width, height

    _, _, _, exhausted, frames, width, height = tf.while_loop(
        lambda count, position, in_chain, active, *_: (count < GIF_MAX_STEPS) & tf.reduce_any(active),
        step,
        (
            tf.constant(0),
            GIF_SCREEN_BYTES + _color_table_bytes(packed),
            tf.zeros_like(is_gif),
            is_gif,
            *[tf.zeros_like(length, tf.int64)] * 3,
        ),
        # As in _jpeg_dimensions: a batch traced at a fixed size leaves the loop with an unknown one.
        shape_invariants=(tf.TensorShape([]), *[tf.TensorShape([None])] * 6),
        maximum_iterations=GIF_MAX_STEPS,
    )
    return frames, width, height, exhausted


def _fill(template: str, values: dict[str, tf.Tensor | int]) -> tf.Tensor:
    """`template.format(**values)` element-wise, for int64 [N] tensors and plain ints."""
    parts = template.format(**{key: f"\0{key}\0" for key in values}).split("\0")
    pieces: list[str | tf.Tensor] = []
    for index, part in enumerate(parts):
        value = values[part] if index % 2 else part
        pieces.append(str(value) if isinstance(value, (str, int)) else tf.strings.as_string(value))
    return tf.strings.join(pieces)


def image_size_errors(image_bytes: tf.Tensor, max_pixels: int) -> tf.Tensor:
    """In-graph `foundation.image_formats.oversized_error`: string [N] messages for [N] encoded images whose
    header declares more than `max_pixels` pixels ("" for the others), read before anything is decoded."""
    head = _header(image_bytes)
    name = _format_names(head)
    raw = _bytes(tf.strings.substr(head, 0, HEADER_BYTES), HEADER_BYTES)
    zeros = tf.zeros_like(name, tf.int64)

    def signed(value: tf.Tensor) -> tf.Tensor:  # BMP's int32 fields, |value|
        return tf.abs(tf.where(value >= 2**31, value - 2**32, value))

    dims = {
        "PNG": (_number(raw, PNG_SIZE_OFFSET, 4, False), _number(raw, PNG_SIZE_OFFSET + 4, 4, False)),
        "GIF": (_number(raw, GIF_SIZE_OFFSET, 2, True), _number(raw, GIF_SIZE_OFFSET + 2, 2, True)),
        "BMP": (signed(_number(raw, BMP_SIZE_OFFSET, 4, True)), signed(_number(raw, BMP_SIZE_OFFSET + 4, 4, True))),
    }
    chunk = tf.strings.substr(head, 12, 4)
    vp8l = _number(raw, 21, 4, True)
    webp = [
        (
            tf.equal(chunk, "VP8 ") & tf.equal(tf.strings.substr(head, 23, 3), b"\x9d\x01\x2a"),
            _number(raw, 26, 2, True) % 16384,
            _number(raw, 28, 2, True) % 16384,
        ),
        (tf.equal(chunk, "VP8L") & tf.equal(raw[:, 20], 0x2F), vp8l % 16384 + 1, (vp8l // 16384) % 16384 + 1),
        (tf.equal(chunk, "VP8X"), _number(raw, 24, 3, True) + 1, _number(raw, 27, 3, True) + 1),
    ]
    width, height = zeros, zeros
    for format_name, (format_width, format_height) in dims.items():
        width = tf.where(tf.equal(name, format_name), format_width, width)
        height = tf.where(tf.equal(name, format_name), format_height, height)
    png_ok = tf.equal(tf.strings.substr(head, 12, 4), "IHDR")
    width, height = tf.where(tf.equal(name, "PNG") & ~png_ok, zeros, width), height
    for condition, format_width, format_height in webp:
        width = tf.where(tf.equal(name, "WebP") & condition, format_width, width)
        height = tf.where(tf.equal(name, "WebP") & condition, format_height, height)
    is_jpeg = tf.equal(name, "JPEG")
    jpeg_width, jpeg_height, exhausted = tf.cond(
        tf.reduce_any(is_jpeg),
        lambda: _jpeg_dimensions(image_bytes, is_jpeg),
        lambda: (zeros, zeros, tf.zeros_like(is_jpeg)),
    )
    width, height = tf.where(is_jpeg, jpeg_width, width), tf.where(is_jpeg, jpeg_height, height)
    is_gif = tf.equal(name, "GIF")
    gif_frames, frame_width, frame_height, gif_exhausted = tf.cond(
        tf.reduce_any(is_gif),
        lambda: _gif_frames(image_bytes, is_gif, raw[:, GIF_PACKED_OFFSET]),
        lambda: (zeros, zeros, zeros, tf.zeros_like(is_gif)),
    )
    frames = tf.where(is_gif, tf.maximum(gif_frames, 1), tf.ones_like(zeros))
    larger = is_gif & (frame_width * frame_height > width * height)  # giflib allocates each frame at its size
    width, height = tf.where(larger, frame_width, width), tf.where(larger, frame_height, height)
    pixels = width * height * frames
    sizes = {"width": width, "height": height, "limit": max_pixels}
    message = tf.where(
        frames > 1,
        _fill(GIF_FRAMES_TEMPLATE, {**sizes, "frames": frames, "pixels": pixels}),
        _fill(OVERSIZED_TEMPLATE, sizes),
    )
    message = tf.where(pixels > max_pixels, message, "")
    message = tf.where(is_gif & gif_exhausted, GIF_NO_END_MESSAGE, message)
    return tf.where(exhausted, JPEG_NO_FRAME_MESSAGE, message)


def image_format_errors(image_bytes: tf.Tensor) -> tf.Tensor:
    """In-graph `foundation.image_formats.served_format_error`, element-wise.

    Reads only the first `HEADER_BYTES` bytes of each element, with the same tables as the Python function, so
    both give the same message for the same bytes.

    Args:
        image_bytes: String tensor of any shape holding encoded images.

    Returns:
        String tensor of the same shape: the refusal message, or "" for an accepted format.
    """
    head = _header(image_bytes)

    def at(offset: int, magic: bytes) -> tf.Tensor:
        return tf.equal(tf.strings.substr(head, offset, len(magic)), magic)

    name = _format_names(head)
    flags = tf.io.decode_raw(tf.strings.substr(head, WEBP_FLAGS_OFFSET, 1), tf.uint8)[..., 0]
    animated = _all(
        [
            tf.equal(name, "WebP"),
            at(*WEBP_EXTENDED),
            tf.not_equal(tf.bitwise.bitwise_and(flags, WEBP_ANIMATION_FLAG), 0),
        ]
    )
    bits = tf.io.decode_raw(tf.strings.substr(head, BMP_BITS_OFFSET, 2), tf.uint16, little_endian=True)[..., 0]
    bits = tf.cast(bits, tf.int32)
    odd_bmp = tf.equal(name, "BMP") & tf.logical_not(_any([tf.equal(bits, depth) for depth in BMP_DECODED_BITS]))

    before, after = UNSUPPORTED_TEMPLATE.split("{name}")
    bmp_before, bmp_after = BMP_BITS_TEMPLATE.split("{bits}")
    accepted = _any([tf.equal(name, accepted_name) for accepted_name in ACCEPTED_FORMATS])
    message = tf.where(accepted, "", tf.strings.join([before, name, after]))
    message = tf.where(tf.equal(name, UNKNOWN), UNKNOWN_MESSAGE, message)
    message = tf.where(animated, ANIMATED_WEBP_MESSAGE, message)
    return tf.where(odd_bmp, tf.strings.join([bmp_before, tf.strings.as_string(bits), bmp_after]), message)


def check_image_formats(image_bytes: tf.Tensor, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> tf.Tensor:
    """`image_bytes`, gated on every element being in a format the model decodes, of at most `max_pixels`.

    One vectorised check per batch (about 80 string ops, plus a few per JPEG marker and per GIF block): run inside the
    per-image loop it would cost more than decoding a small PNG.

    Args:
        image_bytes: String tensor of any shape holding encoded images.
        max_pixels: Largest width x height a header may declare (`image_size_errors`).

    Returns:
        The same tensor; evaluating it raises InvalidArgumentError("assertion failed: [<message>]") with the
        message of the first refused element (`foundation.image_formats.served_format_error`).
    """
    flat = tf.reshape(image_bytes, [-1])
    messages = image_format_errors(flat)
    messages = tf.where(tf.equal(messages, ""), image_size_errors(flat, max_pixels), messages)
    refused = tf.not_equal(messages, "")
    first = tf.concat([tf.boolean_mask(messages, refused), [""]], axis=0)[0]
    check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(refused)), [first], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(image_bytes)


def decode_pixels(image_bytes: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """Decodes one encoded image to uint8 pixels at its own size (the first half of `decode_image`).

    Every accepted format goes the same way: DecodeImage to RGB, then, for one-channel models, ITU-R 601 luma
    (the weights of libjpeg and Pillow's `convert("L")`). Asking DecodeImage for one channel instead fails
    for GIF, BMP, WebP and CMYK JPEG, whose decoders give only RGB (or RGBA). The format check is not repeated
    here: callers check whole batches first with `check_image_formats` (`decode_image`,
    `preprocess_image_bytes` and the trainer's input pipeline do). Training augments these pixels (random
    crop, flip) before `pixels_to_input`, where it is cheap.

    Args:
        image_bytes: Scalar string tensor holding an image in an accepted format.
        spec: Channels to decode to.

    Returns:
        uint8 [height, width, channels].
    """
    # channels=3, never 0: TF 2.21's WebP decoder corrupts memory on animated WebP with channels=0.
    rgb = tf.io.decode_image(image_bytes, channels=3, expand_animations=False)
    if spec.channels == 3:
        return rgb
    luma = tf.tensordot(tf.cast(rgb, tf.float32), LUMA_WEIGHTS, axes=1)
    return tf.cast(tf.round(luma), tf.uint8)[..., tf.newaxis]


def central_square(height: int, width: int, fraction: float) -> tuple[int, int, int]:
    """(top, left, side) in pixels of the central square `center_crop` keeps of a height × width image.

    The same arithmetic as `center_crop`, for callers without TensorFlow (the device model's region of
    interest, `edge.app_client.central_square_roi`): side = ⌊fraction · min(h, w)⌋ (at least 1),
    offset = ⌊(size − fraction · min(h, w)) / 2⌋ on each axis, as Model Garden truncates them.
    """
    crop = fraction * min(height, width)
    return int((height - crop) / 2.0), int((width - crop) / 2.0), max(int(crop), 1)


def center_crop(pixels: tf.Tensor, fraction: float) -> tf.Tensor:
    """The central square of side ⌊fraction · min(height, width)⌋ of an [height, width, channels] image.

    Model Garden's `center_crop_image` (tf-models-official 2.20.0, official/vision/ops/preprocess_ops.py:531-563),
    which its classification input crops with before the resize to evaluate (dataloaders/classification_input.py:
    289-296) and to serve (`inference_fn`, :320-322). The offset is computed from the unrounded side, then both are
    truncated to ints; a side of at least one pixel is kept so that tiny images still give an image.
    `central_square` is the same rule in plain Python.
    """
    size = tf.cast(tf.shape(pixels)[:2], tf.float32)
    crop = fraction * tf.minimum(size[0], size[1])
    offset = tf.cast((size - crop) / 2.0, tf.int32)
    side = tf.maximum(tf.cast(crop, tf.int32), 1)
    return pixels[offset[0] : offset[0] + side, offset[1] : offset[1] + side]


def pixels_to_input(pixels: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """uint8 pixels of any size → the model input (the second half of `decode_image`).

    With `spec.central_crop` < 1 the central square (`center_crop`) is cropped first; at 1 nothing is cropped and
    the whole image is squashed to a square, as before the crop existed.

    Returns:
        float32 [image_size, image_size, channels] in [0, 1].
    """
    if spec.central_crop < 1.0:
        pixels = center_crop(pixels, spec.central_crop)
    image = tf.image.convert_image_dtype(pixels, tf.float32)  # uint8 → [0, 1]
    # Bilinear resize is the identity when the image already has the target size.
    image = tf.image.resize(image, [spec.image_size, spec.image_size], method=tf.image.ResizeMethod.BILINEAR)
    image = tf.clip_by_value(image, 0.0, 1.0)
    return tf.ensure_shape(image, spec.shape)


def decode_image(image_bytes: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """Checks the format of one encoded image, decodes it and resizes it.

    Args:
        image_bytes: Scalar string tensor holding an encoded image (`foundation.image_formats.ACCEPTED_TEXT`).
        spec: Output size and channels.

    Returns:
        float32 [image_size, image_size, channels] in [0, 1].

    Raises:
        tf.errors.InvalidArgumentError: (when evaluated) a refused format, or corrupt image data.
    """
    return pixels_to_input(decode_pixels(check_image_formats(image_bytes, spec.max_image_pixels), spec), spec)


def preprocess_image_bytes(batch: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """Checks the formats of a batch of encoded images, decodes and resizes them.

    Args:
        batch: String tensor [N] of encoded images (`foundation.image_formats.ACCEPTED_TEXT`).
        spec: Output size and channels.

    Returns:
        float32 [N, image_size, image_size, channels] in [0, 1].

    Raises:
        tf.errors.InvalidArgumentError: (when evaluated) a refused format, or corrupt image data.
    """
    return tf.map_fn(
        lambda image_bytes: pixels_to_input(decode_pixels(image_bytes, spec), spec),
        check_image_formats(batch, spec.max_image_pixels),
        fn_output_signature=tf.TensorSpec(spec.shape, tf.float32),
        parallel_iterations=16,
    )
