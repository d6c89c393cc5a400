"""The one definition of image preprocessing, shared by training, the serving signatures and edge conversion.

An encoded JPEG/PNG becomes float32 pixels in [0, 1], resized to `image_size` × `image_size` with `channels`
channels. Normalisation beyond [0, 1] happens inside the Keras model, so the TFLite model (which is converted
from the `serving_preprocessed` signature) and every SavedModel signature share it too.

Example:
    spec = PreprocessingSpec(image_size=32, channels=1)
    images = preprocess_image_bytes(tf.constant([png_bytes]), spec)  # float32 [1, 32, 32, 1]
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

_VALID_CHANNELS = (1, 3)


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


def decode_pixels(image_bytes: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """Decodes one encoded image to uint8 pixels at its own size (the first half of `decode_image`).

    Training augments these pixels (random crop, flip) before `pixels_to_input`, where it is cheap.

    Args:
        image_bytes: Scalar string tensor holding a JPEG or PNG (GIF/BMP also decode).
        spec: Channels to decode to.

    Returns:
        uint8 [height, width, channels].
    """
    return tf.io.decode_image(image_bytes, channels=spec.channels, expand_animations=False)


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
    """Decodes one encoded image and resizes it.

    Args:
        image_bytes: Scalar string tensor holding a JPEG or PNG (GIF/BMP also decode).
        spec: Output size and channels.

    Returns:
        float32 [image_size, image_size, channels] in [0, 1].
    """
    return pixels_to_input(decode_pixels(image_bytes, spec), spec)


def preprocess_image_bytes(batch: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """Decodes and resizes a batch of encoded images.

    Args:
        batch: String tensor [N] of JPEG/PNG bytes.
        spec: Output size and channels.

    Returns:
        float32 [N, image_size, image_size, channels] in [0, 1].
    """
    return tf.map_fn(
        lambda image_bytes: decode_image(image_bytes, spec),
        batch,
        fn_output_signature=tf.TensorSpec(spec.shape, tf.float32),
        parallel_iterations=16,
    )
