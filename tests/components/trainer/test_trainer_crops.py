"""Inception-style random-resized training crops, and the central evaluation crop shared by evaluation, every
SavedModel signature and the device model (MediaPipe's region of interest)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from edge_fixtures import needs_mediapipe
from PIL import Image

from components.trainer.augment import AugmentParams, augment_batch, augment_pixels
from components.trainer.export import export_saved_model
from components.trainer.input_pipeline import InputOptions, make_dataset
from foundation.preprocessing import center_crop, pixels_to_input, preprocess_image_bytes
from foundation.preprocessing_spec import PreprocessingSpec, central_square

SEEDS = 200


def _seed(index: int) -> tf.Tensor:
    return tf.constant([7, index], tf.int64)


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


# --- the random-resized crop, per image (augment_pixels) --------------------------------------------------------


def _crop_shapes(params: AugmentParams, height: int = 300, width: int = 400) -> np.ndarray:
    image = tf.zeros([height, width, 3], tf.uint8)
    return np.array([augment_pixels(image, ["crop"], _seed(i), params).shape[:2] for i in range(SEEDS)])


def test_per_image_crop_area_and_aspect_stay_in_range_and_cover_it() -> None:
    shapes = _crop_shapes(AugmentParams())
    area = shapes[:, 0] * shapes[:, 1] / (300 * 400)
    aspect = shapes[:, 1] / shapes[:, 0]
    # Whole-pixel rounding moves the aspect by at most one pixel over the height.
    assert area.min() >= 0.08 and area.max() <= 1.0
    assert aspect.min() >= 0.75 * (1 - 1 / shapes[:, 0].min()) and aspect.max() <= 4 / 3 * (1 + 1 / shapes[:, 0].min())
    assert area.min() < 0.2 and area.max() > 0.7  # the whole range is drawn from, not one size
    assert aspect.min() < 0.85 and aspect.max() > 1.2


def test_per_image_crop_follows_the_ranges_it_is_given() -> None:
    shapes = _crop_shapes(AugmentParams(crop_area=(0.25, 0.36), crop_aspect=(1.0, 1.0)), 200, 200)
    area = shapes[:, 0] * shapes[:, 1] / 200**2
    assert (shapes[:, 0] == shapes[:, 1]).all()  # aspect exactly 1
    assert area.min() >= 0.25 and area.max() <= 0.36


def test_same_seed_same_crop_and_other_seeds_other_crops() -> None:
    ramp = tf.constant(np.arange(300 * 400 * 3, dtype=np.int64).reshape(300, 400, 3) % 251, tf.uint8)
    first, again = (augment_pixels(ramp, ["crop", "flip"], _seed(3)) for _ in range(2))
    np.testing.assert_array_equal(first, again)
    assert len({augment_pixels(ramp, ["crop"], _seed(i)).shape for i in range(10)}) > 5


def test_no_window_fits_falls_back_to_the_evaluation_crop() -> None:
    # On a square image no window of width / height in [3, 4] covers 90 % of the area: the op gives the whole
    # image, and the crop falls back to the central square of the evaluation crop.
    impossible: dict[str, Any] = {"crop_area": (0.9, 1.0), "crop_aspect": (3.0, 4.0)}
    image = tf.zeros([100, 100, 1], tf.uint8)
    assert augment_pixels(image, ["crop"], _seed(0), AugmentParams(**impossible)).shape == (100, 100, 1)
    fallback = augment_pixels(image, ["crop"], _seed(0), AugmentParams(**impossible, fallback_crop=0.875))
    assert fallback.shape == (87, 87, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"crop_area": (0.0, 1.0)}, r"AugmentParams.crop_area = \(0.0, 1.0\): expected \(low, high\) with 0 < low"),
        ({"crop_area": (0.5, 1.5)}, r"crop_area .*<= high <= 1"),
        ({"crop_aspect": (2.0, 1.0)}, r"AugmentParams.crop_aspect = \(2.0, 1.0\)"),
        ({"fallback_crop": 0.0}, r"AugmentParams.fallback_crop = 0.0: expected a share in \(0, 1\]"),
    ],
)
def test_bad_crop_settings_name_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AugmentParams(**kwargs)
    if "fallback_crop" not in kwargs:  # InputOptions takes it as central_crop, which PreprocessingSpec checks
        with pytest.raises(ValueError, match=message):  # refused when the options are made
            InputOptions(image_size=8, channels=1, batch_size=2, augment=("crop",), **kwargs)


# --- the random-resized crop, per batch (augment_batch), measured through its boxes -------------------------------


def _coordinates(count: int, size: int = 32) -> tf.Tensor:
    """float32 [count, size, size, 2]: channel 0 = row / (size − 1), channel 1 = column / (size − 1).

    crop_and_resize samples bilinearly, which reproduces linear ramps exactly, so an output's corner pixels are
    its box's normalised corners: [0, 0] = (y1, x1), [-1, -1] = (y2, x2).
    """
    ramp = np.linspace(0.0, 1.0, size, dtype=np.float32)
    grid = np.stack(np.meshgrid(ramp, ramp, indexing="ij"), axis=-1)
    return tf.tile(tf.constant(grid)[None], [count, 1, 1, 1])


def _boxes(names: list[str], params: AugmentParams, seed: int = 1) -> np.ndarray:
    out = augment_batch(_coordinates(SEEDS), names, _seed(seed), params).numpy()
    return np.stack([out[:, 0, 0, 0], out[:, 0, 0, 1], out[:, -1, -1, 0], out[:, -1, -1, 1]], axis=1)


def test_batch_crop_boxes_stay_in_range() -> None:
    y1, x1, y2, x2 = _boxes(["crop"], AugmentParams()).T
    height, width = y2 - y1, x2 - x1
    area, aspect = height * width, width / height
    assert (y1 >= -1e-6).all() and (x1 >= -1e-6).all() and (y2 <= 1 + 1e-6).all() and (x2 <= 1 + 1e-6).all()
    # The boxes are drawn on a 256-pixel canvas: whole-pixel rounding moves the aspect by well under 5 %.
    assert area.min() >= 0.08 - 1e-4 and area.max() <= 1 + 1e-6
    assert aspect.min() >= 0.75 * 0.95 and aspect.max() <= 4 / 3 * 1.05
    assert area.min() < 0.2 and area.max() > 0.7


def test_batch_crop_is_seeded_and_flip_still_mirrors_the_crop() -> None:
    params = AugmentParams()
    np.testing.assert_array_equal(_boxes(["crop"], params, 4), _boxes(["crop"], params, 4))
    assert not np.allclose(_boxes(["crop"], params, 4), _boxes(["crop"], params, 5))
    flipped = _boxes(["crop", "flip"], params, 4)
    mirrored = flipped[:, 1] > flipped[:, 3]  # a flipped box runs from right to left
    assert 0.3 < mirrored.mean() < 0.7
    unflipped = _boxes(["crop"], params, 4)
    np.testing.assert_allclose(np.abs(flipped[:, 3] - flipped[:, 1]), unflipped[:, 3] - unflipped[:, 1], atol=1e-5)


def test_batch_crop_falls_back_to_the_evaluation_crop() -> None:
    params = AugmentParams(crop_area=(0.9, 1.0), crop_aspect=(3.0, 4.0), fallback_crop=0.5)
    np.testing.assert_allclose(_boxes(["crop"], params), [[0.25, 0.25, 0.75, 0.75]] * SEEDS, atol=1e-5)


# --- the central crop ---------------------------------------------------------------------------------------------


def _bilinear(image: np.ndarray, size: int) -> np.ndarray:
    """NumPy bilinear resize with half-pixel centres and no antialiasing (what tf.image.resize does)."""

    def weights(in_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        position = (np.arange(size) + 0.5) * in_size / size - 0.5
        floor = np.floor(position)
        lower = np.maximum(floor, 0).astype(int)
        upper = np.minimum(np.ceil(position), in_size - 1).astype(int)
        return lower, upper, (position - floor)[:, None]

    top, bottom, dy = weights(image.shape[0])
    left, right, dx = weights(image.shape[1])
    rows = image[top] * (1 - dy[..., None]) + image[bottom] * dy[..., None]
    return rows[:, left] * (1 - dx) + rows[:, right] * dx


def _reference(pixels: np.ndarray, fraction: float, size: int) -> np.ndarray:
    """The central square of side fraction · min(h, w), cut with PIL, resized with NumPy, in [0, 1]."""
    height, width = pixels.shape[:2]
    side = fraction * min(height, width)
    top, left = int((height - side) / 2), int((width - side) / 2)
    square = Image.fromarray(pixels).crop((left, top, left + int(side), top + int(side)))
    return _bilinear(np.asarray(square, np.float32) / 255.0, size)


def _photo(height: int = 37, width: int = 53, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


@pytest.mark.parametrize(("height", "width"), [(37, 53), (53, 37), (40, 40)])
def test_central_crop_is_the_central_square_of_the_shorter_side_resized(height: int, width: int) -> None:
    pixels = _photo(height, width)
    spec = PreprocessingSpec(image_size=16, channels=3, central_crop=0.875)
    ours = pixels_to_input(tf.constant(pixels), spec).numpy()
    np.testing.assert_allclose(ours, _reference(pixels, 0.875, 16), atol=1e-5)
    # And the signatures' batch path gives the same from the encoded image.
    encoded = preprocess_image_bytes(tf.constant([_png(pixels)]), spec).numpy()[0]
    np.testing.assert_allclose(encoded, ours, atol=1e-6)


def test_central_crop_of_one_is_the_whole_image_squashed_as_before() -> None:
    pixels = _photo()
    spec = PreprocessingSpec(image_size=16, channels=3)
    assert spec.central_crop == 1.0
    squashed = _bilinear(pixels.astype(np.float32) / 255.0, 16)
    np.testing.assert_allclose(pixels_to_input(tf.constant(pixels), spec).numpy(), squashed, atol=1e-5)


def test_the_plain_python_square_is_the_graph_crop() -> None:
    # One rule in two spellings: `central_square` (for the device model's region of interest) and `center_crop`.
    ramp = np.arange(120 * 130, dtype=np.int32).reshape(120, 130, 1)
    for height, width, fraction in [(120, 130, 0.875), (7, 130, 0.875), (99, 13, 0.5), (120, 120, 0.3), (5, 3, 0.1)]:
        top, left, side = central_square(height, width, fraction)
        cropped = center_crop(tf.constant(ramp[:height, :width]), fraction).numpy()
        np.testing.assert_array_equal(cropped, ramp[top : top + side, left : left + side])


def test_preprocessing_json_round_trips_the_central_crop() -> None:
    spec = PreprocessingSpec(image_size=224, channels=3, central_crop=0.875)
    assert json.loads(spec.to_json())["central_crop"] == 0.875
    assert PreprocessingSpec.from_json(spec.to_json()) == spec
    # Specs written before the field existed read as the whole image.
    assert PreprocessingSpec.from_json('{"channels": 3, "image_size": 224}').central_crop == 1.0


@pytest.mark.parametrize("value", [0.0, 1.5, -0.2, True, "0.875"])
def test_a_bad_central_crop_is_refused_with_its_value(value: object) -> None:
    with pytest.raises(ValueError, match=r"PreprocessingSpec.central_crop must be a share of the shorter side in"):
        PreprocessingSpec(image_size=8, channels=3, central_crop=value)  # type: ignore[arg-type]


# --- the input pipeline: eval and plain training crop centrally, the `crop` augmentation replaces it ------------------


@pytest.fixture(scope="module")
def framed_records(tmp_path_factory: pytest.TempPathFactory) -> str:
    """12×16 images: 0 outside, 200 in the central 6×6 square (what a central crop of 0.5 keeps)."""
    pixels = np.zeros((12, 16), np.uint8)
    pixels[3:9, 5:11] = 200
    path = tmp_path_factory.mktemp("framed") / "part-00000-of-00001.tfrecord.gz"
    feature = {
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[_png(pixels)])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[0])),
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
    with tf.io.TFRecordWriter(str(path), "GZIP") as writer:
        for _ in range(8):
            writer.write(example)
    return str(path)


@pytest.mark.parametrize("cache", [True, False])
def test_eval_and_training_without_crop_use_the_central_crop(framed_records: str, cache: bool) -> None:
    common: dict[str, Any] = {"image_size": 4, "channels": 1, "batch_size": 4, "central_crop": 0.5, "cache": cache}
    for options in (
        InputOptions(**common, training=False),
        InputOptions(**common, training=True, augment=("flip",), deterministic=True),
    ):
        images, _ = next(iter(make_dataset(framed_records, options)))
        np.testing.assert_allclose(images.numpy(), 200 / 255.0, atol=1e-6)


def test_training_with_crop_augmentation_skips_the_central_crop(framed_records: str) -> None:
    options = InputOptions(
        image_size=4, channels=1, batch_size=8, central_crop=0.5, augment=("crop",), crop_area=(0.9, 1.0), cache=False
    )
    images, _ = next(iter(make_dataset(framed_records, options)))
    assert float(tf.reduce_min(images)) == 0.0  # windows of ≥ 90 % of the area reach the dark frame


# --- the exported SavedModel: serving_default and serving_tf_example crop as evaluation does -------------------------

SIZE = 8


def _cell_model() -> keras.Model:
    """Gray (1×1 conv, mean of RGB) → one logit per pixel (20 · value): the top class is the brightest cell."""
    inputs = keras.Input((SIZE, SIZE, 3))
    gray = keras.layers.Conv2D(1, 1, use_bias=False)
    flat = keras.layers.Flatten()(gray(inputs))
    logits = keras.layers.Dense(SIZE * SIZE, use_bias=False)
    outputs = keras.layers.Softmax()(logits(flat))
    model = keras.Model(inputs, outputs)
    gray.set_weights([np.full((1, 1, 3, 1), 1 / 3, np.float32)])
    logits.set_weights([20 * np.eye(SIZE * SIZE, dtype=np.float32)])
    return model


CROP_SPEC = PreprocessingSpec(image_size=SIZE, channels=3, central_crop=0.875)
LABELS = [f"cell-{index:02d}" for index in range(SIZE * SIZE)]


@pytest.fixture(scope="module")
def cropped_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("crop-model") / "1"
    export_saved_model(_cell_model(), str(directory), CROP_SPEC, LABELS)
    return directory


def _example(image: bytes) -> bytes:
    feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_the_exported_signatures_apply_the_central_crop(cropped_model: Path) -> None:
    from edge.inputs import read_preprocessing

    photos = [_photo(37, 53, seed=1), _photo(60, 45, seed=2)]
    loaded = tf.saved_model.load(str(cropped_model))
    reference = np.stack([_reference(photo, 0.875, SIZE) for photo in photos]).astype(np.float32)
    expected = loaded.signatures["serving_preprocessed"](images=tf.constant(reference))["probabilities"].numpy()
    squashed = np.stack([_bilinear(photo.astype(np.float32) / 255.0, SIZE) for photo in photos]).astype(np.float32)
    uncropped = loaded.signatures["serving_preprocessed"](images=tf.constant(squashed))["probabilities"].numpy()
    assert not np.allclose(expected, uncropped, atol=1e-3)  # the crop matters for this model

    encoded = [_png(photo) for photo in photos]
    default = loaded.signatures["serving_default"](image_bytes=tf.constant(encoded))
    from_examples = loaded.signatures["serving_tf_example"](examples=tf.constant([_example(e) for e in encoded]))
    np.testing.assert_allclose(default["probabilities"].numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(from_examples["probabilities"].numpy(), expected, atol=1e-5)
    assert read_preprocessing(cropped_model) == CROP_SPEC  # assets/preprocessing.json carries the crop


# --- the device model: MediaPipe with the central square as its region of interest ---------------------------------


def _camera_frame() -> tuple[np.ndarray, int]:
    """A 120×200 frame and its top class with the 0.875 central crop.

    The crop keeps the 105×105 square at (47, 7); cell (2, 5) of its 8×8 grid holds a bright block, and a second
    block left of the crop is what a squashed frame sees besides.
    """
    frame = np.zeros((120, 200, 3), np.uint8)
    frame[33:47, 113:127] = 255
    frame[72:93, 2:23] = 255
    return frame, 2 * SIZE + 5


def test_the_region_of_interest_is_the_central_square() -> None:
    from edge.app_client import central_square_roi

    # The serving square, moved by (scale − 1) / 2 frame pixels to MediaPipe's sampling grid.
    shift = (420 / 224 - 1) / 2
    expected = ((110 + shift) / 640, (30 + shift) / 480, (530 + shift) / 640, (450 + shift) / 480)
    np.testing.assert_allclose(central_square_roi(480, 640, 0.875, 224), expected, rtol=1e-12)
    # Without a margin to move into (a crop of 1), the move is cut: the region stays inside the frame.
    np.testing.assert_allclose(
        central_square_roi(640, 480, 1.0, 224),
        (0.0, (80 + 0.5 * (480 / 224 - 1)) / 640, 1.0, (560 + 0.5 * (480 / 224 - 1)) / 640),
    )


@needs_mediapipe
def test_mediapipe_with_the_region_of_interest_sees_what_serving_sees(cropped_model: Path) -> None:
    from edge.app_client import MetadataSpec, classify, with_model_metadata
    from edge.data import camera_frame
    from edge.quantize import convert
    from edge.runtime import TfliteModel

    frame, cropped_class = _camera_frame()
    encoded = tf.constant(_png(frame))
    served = tf.saved_model.load(str(cropped_model)).signatures["serving_default"](image_bytes=encoded[None])
    assert int(served["classes"][0]) == cropped_class

    tflite = convert(cropped_model, "none")
    # LiteRT on edge.data's frame (the serving crop, then the resize) agrees with serving.
    litert = TfliteModel(tflite).predict(camera_frame(encoded, CROP_SPEC).numpy()[None])
    assert int(np.argmax(litert)) == cropped_class

    description = MetadataSpec(name="cells", version="test", description="brightest cell", input_description="RGB")
    with_metadata = with_model_metadata(tflite, LABELS, description)
    through_roi = classify(with_metadata, frame[None], CROP_SPEC)
    assert through_roi.indices.tolist() == [cropped_class] and through_roi.labels == (LABELS[cropped_class],)
    assert through_roi.scores[0] > 0.99  # it saw the block whole, as serving did
    # Without the region of interest MediaPipe squashes the whole frame, and sees another image.
    assert classify(with_metadata, frame[None]).indices.tolist() != [cropped_class]

    # On smooth frames every pixel counts: MediaPipe's scores are LiteRT's on the serving crop, so the region's move
    # to MediaPipe's sampling grid (central_square_roi) lines the two resizes up (unmoved, most top-1s differ).
    rng = np.random.default_rng(0)
    small = rng.uniform(0, 255, (6, 6, 10, 3)).astype(np.float32)
    frames = tf.cast(tf.image.resize(small, [120, 200], method="bicubic"), tf.uint8).numpy()
    served_frames = np.stack([camera_frame(tf.constant(_png(each)), CROP_SPEC).numpy() for each in frames])
    litert = TfliteModel(tflite).predict(served_frames)
    mediapipe = classify(with_metadata, frames, CROP_SPEC)
    np.testing.assert_array_equal(mediapipe.indices, litert.argmax(axis=1))
    np.testing.assert_allclose(mediapipe.scores, litert.max(axis=1), atol=0.005)
