"""`scale`, the default augmentation: scale jitter (Model Garden's aug_scale_min/max) at a random offset, so the
device model holds up to the resizing an app's classifier does to camera frames."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from components.trainer.augment import AugmentParams, augment_batch, augment_pixels
from components.trainer.input_pipeline import InputOptions
from components.trainer.options import TrainerOptions

PIXELS = tf.constant(np.arange(1, 65, dtype=np.uint8).reshape(8, 8, 1))


def _contains(outer: np.ndarray, inner: np.ndarray) -> bool:
    height, width = inner.shape[:2]
    return any(
        np.array_equal(outer[top : top + height, left : left + width], inner)
        for top in range(outer.shape[0] - height + 1)
        for left in range(outer.shape[1] - width + 1)
    )


def test_zooming_in_keeps_a_window_of_the_image_and_zooming_out_pads_it_with_zeros() -> None:
    twice = augment_pixels(PIXELS, ("scale",), tf.constant([1, 2]), AugmentParams(scale_range=(2.0, 2.0))).numpy()
    assert twice.shape == (4, 4, 1) and _contains(PIXELS.numpy(), twice)

    half = augment_pixels(PIXELS, ("scale",), tf.constant([1, 2]), AugmentParams(scale_range=(0.5, 0.5))).numpy()
    assert half.shape == (16, 16, 1) and _contains(half, PIXELS.numpy())
    assert int((half == 0).sum()) == 16 * 16 - 8 * 8


def test_scale_is_seeded_and_varies_the_zoom_and_offset_within_the_range() -> None:
    params = AugmentParams()
    assert params.scale_range == (0.8, 1.25)
    first = augment_pixels(PIXELS, ("scale",), tf.constant([42, 3]), params).numpy()
    assert np.array_equal(first, augment_pixels(PIXELS, ("scale",), tf.constant([42, 3]), params).numpy())
    shapes = {augment_pixels(PIXELS, ("scale",), tf.constant([42, index]), params).shape for index in range(40)}
    assert len(shapes) > 2 and all(6 <= shape[0] <= 10 for shape in shapes)  # 8 / 1.25 … 8 / 0.8


def test_the_batch_form_zooms_the_sampling_box() -> None:
    images = tf.random.stateless_uniform([8, 16, 16, 1], seed=[1, 2], minval=0.5, maxval=1.0)
    same = augment_batch(images, ("scale",), tf.constant([1, 2]), AugmentParams(scale_range=(1.0, 1.0)))
    np.testing.assert_allclose(same.numpy(), images.numpy(), atol=1e-6)

    zoomed_out = augment_batch(images, ("scale",), tf.constant([1, 2]), AugmentParams(scale_range=(0.5, 0.5)))
    zero_share = float(tf.reduce_mean(tf.cast(zoomed_out == 0, tf.float32)))
    assert 0.5 < zero_share < 0.8  # about 3/4 of each image is padding
    zoomed_in = augment_batch(images, ("scale",), tf.constant([1, 2]), AugmentParams(scale_range=(2.0, 2.0)))
    assert float(tf.reduce_min(zoomed_in)) >= 0.5  # a window inside the image: no padding


def test_scale_is_the_default_augmentation_and_its_range_a_typed_key() -> None:
    trainer = TrainerOptions()
    assert trainer.augment == ("scale",) and trainer.scale_range == (0.8, 1.25)
    assert TrainerOptions(scale_range=(0.9, 1.1)).scale_range == (0.9, 1.1)
    with pytest.raises(ValueError, match=r"trainer.scale_range = \[0.0, 1.2\]"):
        TrainerOptions(scale_range=(0.0, 1.2))
    with pytest.raises(ValueError, match="scale_range"):
        TrainerOptions(scale_range=(1.3, 1.2))
    options = InputOptions(image_size=16, channels=1, batch_size=4, augment=("scale",), scale_range=(0.9, 1.1))
    assert options.augment_params.scale_range == (0.9, 1.1)
