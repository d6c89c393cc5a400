"""Training augmentation: random crop, horizontal flip and translation of decoded uint8 pixels.

Augmentation runs on each decoded image *before* the resize to the model input, inside the input pipeline's
parallel map: a crop is then a slice that the resize (needed anyway) scales back up, and flips and shifts
move small uint8 arrays that sit in cache. Measured on this 2-core VM with 224×224 JPEGs (bench/
input_pipeline.py), augmenting float32 batches after `batch()` instead costs as much as the decoding itself:
a `crop_and_resize` pass over a 64 × 224² × 3 batch ≈ 90–140 ms, a broadcast flip ≈ 90–250 ms, against
≈ 70 ms to decode the 64 JPEGs on both cores; the pipeline fell to ~0.5 × the decode ceiling.

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
