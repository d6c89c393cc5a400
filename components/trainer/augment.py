"""Training augmentation: random crop, horizontal flip and translation, per image or per batch.

Two forms of the same three transforms, because which one is cheap depends on the image size:

- `augment_pixels`, for one decoded uint8 image *before* the resize to the model input: a crop is a slice
  that the resize (needed anyway) scales back up, and flips and shifts move small uint8 arrays. Its cost is
  a fixed ~20 small ops per image. For 224×224 JPEGs this is the cheap form: augmenting float32 batches
  instead costs as much as the decoding itself (a `crop_and_resize` pass over 64 × 224² × 3 ≈ 90–140 ms
  against ≈ 70 ms to decode the 64 JPEGs on both cores; measured on this 2-core VM with bench/input_pipeline.py:
  the pipeline fell to ~0.4 × the decode ceiling).
- `augment_batch`, for a batch of resized float32 images: all three transforms become one box per image and
  a single `crop_and_resize` over the batch, whose cost is per pixel. For small images (digits at 16×16) this
  is the cheap form: ~25,000 vs ~15,000 images/s for the per-image form in the same pipeline.

`augment_on_batches(image_size)` picks the form (`BATCH_AUGMENT_MAX_SIZE`).

Randomness is stateless, seeded per element by (seed, element index), so a seed reproduces a run exactly,
also with parallel maps.

Example:
    pixels = augment_pixels(decode_pixels(image_bytes, spec), ("crop", "flip"), tf.constant([42, 7]))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

PixelTransform = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]

CROP_MIN_SCALE = 0.8  # a crop keeps 80–100 % of each side
MAX_SHIFT = 0.1  # translation by up to ±10 % of each side
# Largest model input side augmented on batches; between digits (16) and ImageNet (224) the per-pixel cost of
# the batch form passes the per-image op overhead somewhere around 64–96 px on CPU.
BATCH_AUGMENT_MAX_SIZE = 64


def _uniform(seed: tf.Tensor, shape: Sequence[int], low: float = 0.0, high: float = 1.0) -> tf.Tensor:
    return tf.random.stateless_uniform(shape, seed=seed, minval=low, maxval=high)


def _crop(pixels: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    # A window of 80–100 % of each side (same scale for both: no aspect distortion) at a random position.
    size = tf.shape(pixels)[:2]
    scale = _uniform(seed, [], CROP_MIN_SCALE, 1.0)
    window = tf.maximum(tf.cast(tf.round(tf.cast(size, tf.float32) * scale), tf.int32), 1)
    position = _uniform(tf.random.experimental.stateless_fold_in(seed, 1), [2])
    offset = tf.cast(position * tf.cast(size - window + 1, tf.float32), tf.int32)
    offset = tf.minimum(offset, size - window)
    return tf.slice(pixels, tf.concat([offset, [0]], 0), tf.concat([window, [-1]], 0))


def _translate(pixels: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    # Shift by up to ±10 % of each side; uncovered pixels are zero (black).
    size = tf.shape(pixels)[:2]
    limit = tf.cast(tf.cast(size, tf.float32) * MAX_SHIFT, tf.int32)
    shift = tf.cast(tf.round(_uniform(seed, [2], -1.0, 1.0) * tf.cast(limit, tf.float32)), tf.int32)
    padded = tf.pad(pixels, tf.stack([tf.stack([limit[0], limit[0]]), tf.stack([limit[1], limit[1]]), [0, 0]]))
    return tf.slice(padded, tf.concat([limit - shift, [0]], 0), tf.concat([size, [-1]], 0))


def _flip(pixels: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    return tf.cond(_uniform(seed, []) < 0.5, lambda: tf.reverse(pixels, axis=[1]), lambda: pixels)


AUGMENTATIONS: dict[str, PixelTransform] = {"crop": _crop, "flip": _flip, "translate": _translate}


def check_augmentations(names: Sequence[str]) -> None:
    """Raises ValueError naming unknown augmentations and the valid ones (`trainer.augment`)."""
    unknown = sorted(set(names) - set(AUGMENTATIONS))
    if unknown:
        raise ValueError(
            f"unknown augmentation(s) {unknown} (trainer.augment); valid: {', '.join(sorted(AUGMENTATIONS))}"
        )


def augment_pixels(pixels: tf.Tensor, names: Sequence[str], seed: tf.Tensor) -> tf.Tensor:
    """Applies the named augmentations, in order, to one decoded image.

    Args:
        pixels: uint8 [height, width, channels], as `preprocessing.decode_pixels` returns.
        names: Any of `crop`, `flip`, `translate`.
        seed: int32/int64 [2], e.g. (run seed, element index): the same seed gives the same result.

    Returns:
        uint8 pixels; `crop` makes them smaller (the resize to the model input scales them back).

    Raises:
        ValueError: an unknown name (lists the valid ones).
    """
    check_augmentations(names)
    for index, name in enumerate(names):
        pixels = AUGMENTATIONS[name](pixels, tf.random.experimental.stateless_fold_in(seed, index))
    return pixels


def augment_on_batches(image_size: int) -> bool:
    """Whether images of this model input size are augmented with `augment_batch` (else `augment_pixels`)."""
    return image_size <= BATCH_AUGMENT_MAX_SIZE


def augment_batch(images: tf.Tensor, names: Sequence[str], seed: tf.Tensor) -> tf.Tensor:
    """Applies the named augmentations, in order, to each image of a batch, in one `crop_and_resize`.

    Each transform moves the image's sampling box (normalised [y1, x1, y2, x2], starting at the whole image):
    `crop` shrinks it to 80–100 % of each side at a random position, `translate` shifts it by up to ±10 % of
    each side (uncovered pixels are zero), `flip` swaps its left and right edges. Without transforms the box
    is the whole image and the result equals the input.

    Args:
        images: float32 [N, height, width, channels].
        names: Any of `crop`, `flip`, `translate`.
        seed: int32/int64 [2], e.g. (run seed, index of the batch's first element): the same seed and batch
            give the same result.

    Returns:
        float32 images of the input shape.

    Raises:
        ValueError: an unknown name (lists the valid ones).
    """
    check_augmentations(names)
    if not names:
        return images
    count = tf.shape(images)[0]
    top, left = tf.zeros([count]), tf.zeros([count])
    bottom, right = tf.ones([count]), tf.ones([count])

    def uniform(index: int, draw: int, low: float = 0.0, high: float = 1.0) -> tf.Tensor:
        folded = tf.random.experimental.stateless_fold_in(tf.random.experimental.stateless_fold_in(seed, index), draw)
        return tf.random.stateless_uniform([count], seed=folded, minval=low, maxval=high)

    for index, name in enumerate(names):
        height, width = bottom - top, right - left
        if name == "crop":
            scale = uniform(index, 0, CROP_MIN_SCALE, 1.0)
            top, left = top + height * (1 - scale) * uniform(index, 1), left + width * (1 - scale) * uniform(index, 2)
            bottom, right = top + height * scale, left + width * scale
        elif name == "translate":
            shift_y, shift_x = uniform(index, 0, -MAX_SHIFT, MAX_SHIFT), uniform(index, 1, -MAX_SHIFT, MAX_SHIFT)
            top, bottom = top - height * shift_y, bottom - height * shift_y
            left, right = left - width * shift_x, right - width * shift_x
        else:  # flip
            flip = uniform(index, 0) < 0.5
            left, right = tf.where(flip, right, left), tf.where(flip, left, right)
    boxes = tf.stack([top, left, bottom, right], axis=1)
    size = tf.shape(images)[1:3]
    return tf.image.crop_and_resize(images, boxes, tf.range(count), size, extrapolation_value=0.0)
