"""The one definition of image preprocessing, shared by training, the serving signatures and edge conversion.

An encoded image in a format the model accepts (`foundation.image_formats`: JPEG, PNG, GIF, BMP, WebP) becomes
float32 pixels in [0, 1], resized to `image_size` × `image_size` with `channels` channels; other formats are
refused in-graph with an InvalidArgumentError naming the detected format. EXIF orientation is not applied: the
pixels are used as stored (docs/architecture.md, "Model contract"). Normalisation beyond [0, 1] happens inside the Keras
model, so the TFLite model (which is converted from the `serving_preprocessed` signature) and every SavedModel
signature share it too. The spec is `foundation.preprocessing_spec`; the format and size checks that run before
decoding are `foundation.image_checks`.

With `central_crop` < 1 (ImageNet: 0.875), evaluation and every SavedModel signature that takes encoded images first
crop the central square of side `central_crop` × the shorter side, keeping the aspect, then resize (Model Garden's
`center_crop_image`); training with the `crop` augmentation uses its random-resized crop instead (augment.py).
The device model gets the same crop from its app: MediaPipe's region of interest (docs/edge.md).

Example:
    spec = PreprocessingSpec(image_size=32, channels=1)
    images = preprocess_image_bytes(tf.constant([png_bytes]), spec)  # float32 [1, 32, 32, 1]
"""

from __future__ import annotations

import tensorflow as tf

from foundation.image_checks import check_image_formats
from foundation.preprocessing_spec import LUMA_WEIGHTS, PreprocessingSpec


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
