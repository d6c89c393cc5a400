"""The one definition of image preprocessing, shared by training, the serving signatures and edge conversion.

An encoded image in a format the model accepts (`components.image_formats`: JPEG, PNG, GIF, BMP, WebP) becomes
float32 pixels in [0, 1], resized to `image_size` × `image_size` with `channels` channels; other formats are
refused in-graph with an InvalidArgumentError naming the detected format. EXIF orientation is not applied: the
pixels are used as stored (docs/architecture.md, "Model contract"). Normalisation beyond [0, 1] happens inside the Keras
model, so the TFLite model (which is converted from the `serving_preprocessed` signature) and every SavedModel
signature share it too.

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

from components.image_formats import (
    ACCEPTED_FORMATS,
    ANIMATED_WEBP_MESSAGE,
    BMP_BITS_OFFSET,
    BMP_BITS_TEMPLATE,
    BMP_DECODED_BITS,
    HEADER_BYTES,
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
    """

    image_size: int
    channels: int

    def __post_init__(self) -> None:
        if not isinstance(self.image_size, int) or isinstance(self.image_size, bool) or self.image_size < 1:
            raise ValueError(f"PreprocessingSpec.image_size must be a positive int, got {self.image_size!r}")
        if self.channels not in _VALID_CHANNELS:
            raise ValueError(f"PreprocessingSpec.channels must be 1 (grayscale) or 3 (RGB), got {self.channels!r}")

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
        unknown, missing = sorted(set(values) - fields), sorted(fields - set(values))
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


def image_format_errors(image_bytes: tf.Tensor) -> tf.Tensor:
    """In-graph `components.image_formats.served_format_error`, element-wise.

    Reads only the first `HEADER_BYTES` bytes of each element, with the same tables as the Python function, so
    both give the same message for the same bytes.

    Args:
        image_bytes: String tensor of any shape holding encoded images.

    Returns:
        String tensor of the same shape: the refusal message, or "" for an accepted format.
    """
    head = tf.strings.join([tf.strings.substr(image_bytes, 0, HEADER_BYTES), b"\x00" * HEADER_BYTES])

    def at(offset: int, magic: bytes) -> tf.Tensor:
        return tf.equal(tf.strings.substr(head, offset, len(magic)), magic)

    name = tf.fill(tf.shape(image_bytes), UNKNOWN)
    for signature in reversed(SIGNATURES):  # the first signature that matches wins, as in detect_image_format
        name = tf.where(_all([at(offset, magic) for offset, magic in signature.parts]), signature.name, name)
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


def check_image_formats(image_bytes: tf.Tensor) -> tf.Tensor:
    """`image_bytes`, gated on every element being in a format the model decodes.

    One vectorised check per batch (about 40 string ops): run inside the per-image loop it would cost more
    than decoding a small PNG.

    Args:
        image_bytes: String tensor of any shape holding encoded images.

    Returns:
        The same tensor; evaluating it raises InvalidArgumentError("assertion failed: [<message>]") with the
        message of the first refused element (`components.image_formats.served_format_error`).
    """
    messages = tf.reshape(image_format_errors(image_bytes), [-1])
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


def pixels_to_input(pixels: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """uint8 pixels of any size → the model input (the second half of `decode_image`).

    Returns:
        float32 [image_size, image_size, channels] in [0, 1].
    """
    image = tf.image.convert_image_dtype(pixels, tf.float32)  # uint8 → [0, 1]
    # Bilinear resize is the identity when the image already has the target size.
    image = tf.image.resize(image, [spec.image_size, spec.image_size], method=tf.image.ResizeMethod.BILINEAR)
    image = tf.clip_by_value(image, 0.0, 1.0)
    return tf.ensure_shape(image, spec.shape)


def decode_image(image_bytes: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """Checks the format of one encoded image, decodes it and resizes it.

    Args:
        image_bytes: Scalar string tensor holding an encoded image (`components.image_formats.ACCEPTED_TEXT`).
        spec: Output size and channels.

    Returns:
        float32 [image_size, image_size, channels] in [0, 1].

    Raises:
        tf.errors.InvalidArgumentError: (when evaluated) a refused format, or corrupt image data.
    """
    return pixels_to_input(decode_pixels(check_image_formats(image_bytes), spec), spec)


def preprocess_image_bytes(batch: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """Checks the formats of a batch of encoded images, decodes and resizes them.

    Args:
        batch: String tensor [N] of encoded images (`components.image_formats.ACCEPTED_TEXT`).
        spec: Output size and channels.

    Returns:
        float32 [N, image_size, image_size, channels] in [0, 1].

    Raises:
        tf.errors.InvalidArgumentError: (when evaluated) a refused format, or corrupt image data.
    """
    return tf.map_fn(
        lambda image_bytes: pixels_to_input(decode_pixels(image_bytes, spec), spec),
        check_image_formats(batch),
        fn_output_signature=tf.TensorSpec(spec.shape, tf.float32),
        parallel_iterations=16,
    )
