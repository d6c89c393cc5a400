"""Training augmentation: random-resized crop, scale jitter, horizontal flip and translation, per image or per batch.

`crop` is the Inception crop (Szegedy et al., "Going deeper with convolutions", 2015): a window covering a random
share of the image's area (`AugmentParams.crop_area`, 8–100 % by default) with a random aspect ratio
(`crop_aspect`, 3/4–4/3), drawn by TensorFlow's own `tf.image.stateless_sample_distorted_bounding_box` with up to
10 attempts, as Model Garden's `random_crop_image` does (tf-models-official 2.20.0,
official/vision/ops/preprocess_ops.py:607-642). When no attempt fits, the op gives the whole image, and then, as
in Model Garden's classification input (dataloaders/classification_input.py:216-223), the central crop the model
is evaluated with (`AugmentParams.fallback_crop` = `PreprocessingSpec.central_crop`) is used instead. The resize
to the model input follows, so the crop also zooms.

`scale` is scale jitter as Model Garden's detection and segmentation inputs do it (`resize_and_crop_image` with
`aug_scale_min`/`aug_scale_max`, official/vision/ops/preprocess_ops.py; the RetinaNet COCO recipe: 0.8–1.2): the
image is scaled by a random factor (`AugmentParams.scale_range`), keeping its aspect, and placed at a random offset
in the model input, cropped where it is larger and padded with zeros where it is smaller. The window lands on a
random sub-pixel grid, so the model also sees the resampling an app's classifier does to its frames (MediaPipe's
ImageClassifier resizes with OpenCV, whose sample grid is half a pixel off TensorFlow's; docs/edge.md).

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
    params = AugmentParams(crop_area=(0.08, 1.0), crop_aspect=(3 / 4, 4 / 3))
    pixels = augment_pixels(decode_pixels(image_bytes, spec), ("crop", "flip"), tf.constant([42, 7]), params)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tensorflow as tf

from foundation.preprocessing import center_crop

MAX_CROP_ATTEMPTS = 10  # tf.image.sample_distorted_bounding_box's default, and Model Garden's
# The batch form draws its boxes on a canvas of the image's aspect with at least this many pixels a side: the op
# works in whole pixels, and on a 16-pixel side most small-area windows would round out of range.
BOX_CANVAS_MIN_SIDE = 256
MAX_SHIFT = 0.1  # translation by up to ±10 % of each side
# Largest model input side augmented on batches; between digits (16) and ImageNet (224) the per-pixel cost of
# the batch form passes the per-image op overhead somewhere around 64–96 px on CPU.
BATCH_AUGMENT_MAX_SIZE = 64


@dataclass(frozen=True)
class AugmentParams:
    """The augmentations' settings (`trainer.crop_area`, `trainer.crop_aspect`, `trainer.eval_crop`).

    Attributes:
        crop_area: `crop`: range of the window's share of the image's area, 0 < low <= high <= 1. Defaults to
            (0.08, 1.0), the Inception/ImageNet recipes'.
        crop_aspect: `crop`: range of the window's width / height, 0 < low <= high. Defaults to (3/4, 4/3).
        fallback_crop: `crop`: the central crop (share of the shorter side) used when no window fits in
            `MAX_CROP_ATTEMPTS`, the evaluation crop (`PreprocessingSpec.central_crop`). Defaults to 1.0, the
            whole image.
        scale_range: `scale`: range of the zoom factor, 0 < low <= high (above 1 enlarges). Defaults to
            (0.8, 1.25), a fifth either way (`trainer.scale_range`).
    """

    crop_area: tuple[float, float] = (0.08, 1.0)
    crop_aspect: tuple[float, float] = (3 / 4, 4 / 3)
    fallback_crop: float = 1.0
    scale_range: tuple[float, float] = (0.8, 1.25)

    def __post_init__(self) -> None:
        for name, (low, high), top in (
            ("crop_area", self.crop_area, 1.0),
            ("crop_aspect", self.crop_aspect, float("inf")),
            ("scale_range", self.scale_range, float("inf")),
        ):
            if not 0 < low <= high <= top:
                bound = " <= 1" if name == "crop_area" else ""
                raise ValueError(
                    f"AugmentParams.{name} = ({low}, {high}): expected (low, high) with 0 < low <= high{bound}"
                )
        if not 0 < self.fallback_crop <= 1:
            raise ValueError(f"AugmentParams.fallback_crop = {self.fallback_crop}: expected a share in (0, 1]")


DEFAULT_PARAMS = AugmentParams()

PixelTransform = Callable[[tf.Tensor, tf.Tensor, AugmentParams], tf.Tensor]


def _uniform(seed: tf.Tensor, shape: Sequence[int], low: float = 0.0, high: float = 1.0) -> tf.Tensor:
    return tf.random.stateless_uniform(shape, seed=seed, minval=low, maxval=high)


def sample_crop_box(image_shape: tf.Tensor, seed: tf.Tensor, params: AugmentParams) -> tuple[tf.Tensor, tf.Tensor]:
    """One Inception crop window of an image of `image_shape` [height, width, channels].

    Args:
        image_shape: int32 [3].
        seed: int32/int64 [2]; the same seed and shape give the same window.
        params: The area and aspect ranges.

    Returns:
        (begin int32 [3], size int32 [3]) for `tf.slice`; the whole image when no window fitted.
    """
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        image_shape,
        bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
        seed=seed,
        # The window must cover crop_area[0] of the one box, the whole image: the area bound again, as in
        # Model Garden's random_crop_image.
        min_object_covered=params.crop_area[0],
        aspect_ratio_range=params.crop_aspect,
        area_range=params.crop_area,
        max_attempts=MAX_CROP_ATTEMPTS,
    )
    return begin, size


def _crop(pixels: tf.Tensor, seed: tf.Tensor, params: AugmentParams) -> tf.Tensor:
    shape = tf.shape(pixels)
    begin, size = sample_crop_box(shape, seed, params)
    cropped = tf.slice(pixels, begin, size)
    if params.fallback_crop >= 1.0:
        return cropped
    # The op's fallback is the whole image; Model Garden then takes the evaluation's central crop.
    fell_back = tf.reduce_all(tf.equal(size[:2], shape[:2]))  # size is [height, width, -1]
    return tf.cond(fell_back, lambda: center_crop(pixels, params.fallback_crop), lambda: cropped)


def _translate(pixels: tf.Tensor, seed: tf.Tensor, params: AugmentParams) -> tf.Tensor:
    # Shift by up to ±10 % of each side; uncovered pixels are zero (black).
    size = tf.shape(pixels)[:2]
    limit = tf.cast(tf.cast(size, tf.float32) * MAX_SHIFT, tf.int32)
    shift = tf.cast(tf.round(_uniform(seed, [2], -1.0, 1.0) * tf.cast(limit, tf.float32)), tf.int32)
    padded = tf.pad(pixels, tf.stack([tf.stack([limit[0], limit[0]]), tf.stack([limit[1], limit[1]]), [0, 0]]))
    return tf.slice(padded, tf.concat([limit - shift, [0]], 0), tf.concat([size, [-1]], 0))


def _scale(pixels: tf.Tensor, seed: tf.Tensor, params: AugmentParams) -> tf.Tensor:
    # Zoom by a random factor: a window of side/factor of each side at a random offset (inside the image when it
    # zooms in; the image inside it, zero-padded, when it zooms out); the resize to the model input follows.
    size = tf.shape(pixels)[:2]
    factor = _uniform(seed, [], *params.scale_range)
    window = tf.maximum(tf.cast(tf.round(tf.cast(size, tf.float32) / factor), tf.int32), 1)
    room = tf.abs(size - window)
    draw = _uniform(tf.random.experimental.stateless_fold_in(seed, 1), [2])
    offset = tf.minimum(tf.cast(tf.floor(draw * tf.cast(room + 1, tf.float32)), tf.int32), room)
    inside = window < size  # per side: zoom in (crop at the offset) or out (pad before it)
    cropped = tf.slice(
        pixels, tf.concat([tf.where(inside, offset, 0), [0]], 0), tf.concat([tf.minimum(window, size), [-1]], 0)
    )
    before, after = tf.where(inside, 0, offset), tf.where(inside, 0, room - offset)
    return tf.pad(cropped, tf.stack([tf.stack([before[0], after[0]]), tf.stack([before[1], after[1]]), [0, 0]]))


def _flip(pixels: tf.Tensor, seed: tf.Tensor, params: AugmentParams) -> tf.Tensor:
    return tf.cond(_uniform(seed, []) < 0.5, lambda: tf.reverse(pixels, axis=[1]), lambda: pixels)


AUGMENTATIONS: dict[str, PixelTransform] = {"crop": _crop, "flip": _flip, "scale": _scale, "translate": _translate}


def check_augmentations(names: Sequence[str]) -> None:
    """Raises ValueError naming unknown augmentations and the valid ones (`trainer.augment`)."""
    unknown = sorted(set(names) - set(AUGMENTATIONS))
    if unknown:
        raise ValueError(
            f"unknown augmentation(s) {unknown} (trainer.augment); valid: {', '.join(sorted(AUGMENTATIONS))}"
        )


def augment_pixels(
    pixels: tf.Tensor, names: Sequence[str], seed: tf.Tensor, params: AugmentParams = DEFAULT_PARAMS
) -> tf.Tensor:
    """Applies the named augmentations, in order, to one decoded image.

    Args:
        pixels: uint8 [height, width, channels], as `preprocessing.decode_pixels` returns.
        names: Any of `crop`, `flip`, `scale`, `translate`.
        seed: int32/int64 [2], e.g. (run seed, element index): the same seed gives the same result.
        params: The crop's ranges. Defaults to `AugmentParams()`.

    Returns:
        uint8 pixels; `crop` makes them smaller (the resize to the model input scales them back).

    Raises:
        ValueError: an unknown name (lists the valid ones).
    """
    check_augmentations(names)
    for index, name in enumerate(names):
        pixels = AUGMENTATIONS[name](pixels, tf.random.experimental.stateless_fold_in(seed, index), params)
    return pixels


def augment_on_batches(image_size: int) -> bool:
    """Whether images of this model input size are augmented with `augment_batch` (else `augment_pixels`)."""
    return image_size <= BATCH_AUGMENT_MAX_SIZE


def augment_batch(
    images: tf.Tensor, names: Sequence[str], seed: tf.Tensor, params: AugmentParams = DEFAULT_PARAMS
) -> tf.Tensor:
    """Applies the named augmentations, in order, to each image of a batch, in one `crop_and_resize`.

    Each transform moves the image's sampling box (normalised [y1, x1, y2, x2], starting at the whole image):
    `crop` shrinks it to an Inception window of the box (`sample_crop_box`, drawn per image on a canvas of at
    least `BOX_CANVAS_MIN_SIDE` pixels a side; the ranges apply to the resized image), `translate` shifts it by
    up to ±10 % of each side (uncovered pixels are zero), `flip` swaps its left and right edges. Without
    transforms the box is the whole image and the result equals the input.

    Args:
        images: float32 [N, height, width, channels].
        names: Any of `crop`, `flip`, `scale`, `translate`.
        seed: int32/int64 [2], e.g. (run seed, index of the batch's first element): the same seed and batch
            give the same result.
        params: The crop's ranges. Defaults to `AugmentParams()`.

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
            y1, x1, y2, x2 = tf.unstack(_crop_boxes(tf.shape(images), seed, index, params), axis=1)
            top, left, bottom, right = top + height * y1, left + width * x1, top + height * y2, left + width * x2
        elif name == "scale":
            top, left, bottom, right = _scaled_box(top, left, bottom, right, uniform, index, params)
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


def _scaled_box(
    top: tf.Tensor,
    left: tf.Tensor,
    bottom: tf.Tensor,
    right: tf.Tensor,
    uniform: Callable[..., tf.Tensor],
    index: int,
    params: AugmentParams,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """`scale` on sampling boxes: each box shrinks (zoom in) or grows (zoom out) by 1 / factor and moves to a
    random offset, inside the old box when it is smaller, around it when it is larger."""
    factor = uniform(index, 0, *params.scale_range)
    height, width = (bottom - top) / factor, (right - left) / factor
    new_top = top + uniform(index, 1) * (bottom - top - height)
    new_left = left + uniform(index, 2) * (right - left - width)
    return new_top, new_left, new_top + height, new_left + width


def _crop_boxes(shape: tf.Tensor, seed: tf.Tensor, index: int, params: AugmentParams) -> tf.Tensor:
    """float32 [N, 4]: one normalised Inception window [y1, x1, y2, x2] per image of a batch of `shape`."""
    size = shape[1:3]
    scale = tf.maximum(1, -(-BOX_CANVAS_MIN_SIDE // tf.reduce_min(size)))  # ceil division
    canvas = tf.concat([size * scale, shape[3:4]], 0)
    extent = tf.cast(size * scale, tf.float32)
    base = tf.random.experimental.stateless_fold_in(seed, index)
    fallback = tf.constant([[(1 - params.fallback_crop) / 2] * 2 + [(1 + params.fallback_crop) / 2] * 2])

    def one(element: tf.Tensor) -> tf.Tensor:
        begin, window = sample_crop_box(canvas, tf.random.experimental.stateless_fold_in(base, element), params)
        start, end = tf.cast(begin[:2], tf.float32) / extent, tf.cast(begin[:2] + window[:2], tf.float32) / extent
        box = tf.concat([start, end], 0)
        if params.fallback_crop >= 1.0:
            return box
        # As in `_crop`: when no window fitted, the evaluation's central crop (of the square model input).
        return tf.where(tf.reduce_all(tf.equal(window[:2], canvas[:2])), fallback[0], box)

    return tf.map_fn(one, tf.range(shape[0]), fn_output_signature=tf.TensorSpec([4], tf.float32))
