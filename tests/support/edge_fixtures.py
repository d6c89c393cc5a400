"""The synthetic data and model the edge tests share: a 4-class image data set (a bright bar on one side of a noisy
16×16 image) and a tiny tf_keras CNN trained on it, saved by the trainer's exporter (the model contract's signatures
and assets). A build is cached under pytest's base temp dir so the session builds each thing once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.trainer.export import export_saved_model
from edge.app_client import MEDIAPIPE_VENV, PYTHON_ENV
from foundation.preprocessing_spec import PreprocessingSpec

LABELS = ["top", "bottom", "left", "right"]
MEDIAPIPE_PYTHON = Path(os.environ.get(PYTHON_ENV) or MEDIAPIPE_VENV / "bin" / "python")
needs_mediapipe = pytest.mark.skipif(
    not MEDIAPIPE_PYTHON.is_file(),
    reason=f"no MediaPipe venv ({MEDIAPIPE_PYTHON}); `make setup` creates .venv-mediapipe, or set ${PYTHON_ENV}",
)
SPEC = PreprocessingSpec(image_size=16, channels=1)


def synthetic_images(count: int, seed: int, brightness: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """uint8 [count, 16, 16, 1] images whose class is the side holding a bright bar, and their labels."""
    rng = np.random.default_rng(seed)
    labels = np.arange(count) % len(LABELS)
    images = rng.uniform(0.0, 0.3, size=(count, 16, 16, 1))
    bars = [
        (slice(0, 4), slice(None)),
        (slice(12, 16), slice(None)),
        (slice(None), slice(0, 4)),
        (slice(None), slice(12, 16)),
    ]
    for image, label in zip(images, labels, strict=True):
        rows, cols = bars[label]
        image[rows, cols] = rng.uniform(0.8, 1.0)
    return np.round(images * brightness * 255).astype(np.uint8), labels.astype(np.int64)


def example_bytes(pixels: np.ndarray, label: int) -> bytes:
    encoded = tf.io.encode_png(pixels).numpy()
    feature = {
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_split(path: Path, images: np.ndarray, labels: np.ndarray, label_offset: int = 0) -> None:
    """Writes one GZIP TFRecord file of image examples (creating its directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for pixels, label in zip(images, labels, strict=True):
            writer.write(example_bytes(pixels, int(label) + label_offset))


def write_dataset(root: Path, train_brightness: float = 1.0, tfx_layout: bool = False) -> Path:
    """A 4-class data set: 320 train, 120 eval examples, `labels.txt`.

    Args:
        root: Output directory.
        train_brightness: Scales the train images only; < 1 makes calibration data unrepresentative of eval.
        tfx_layout: Write a TFX Examples artifact (`Split-train/data_tfrecord-00000-of-00001.gz`) instead of the
            `tfxp data` layout (`train/part-00000-of-00001.tfrecord.gz`).
    """
    train = synthetic_images(320, seed=1, brightness=train_brightness)
    evaluation = synthetic_images(120, seed=2)
    for split, (images, labels) in {"train": train, "eval": evaluation}.items():
        if tfx_layout:
            write_split(root / f"Split-{split}" / "data_tfrecord-00000-of-00001.gz", images, labels)
        else:
            write_split(root / split / "part-00000-of-00001.tfrecord.gz", images, labels)
    (root / "labels.txt").write_text("".join(f"{label}\n" for label in LABELS))
    return root


def small_cnn(shape: tuple[int, ...], filters: tuple[int, int], classes: int) -> keras.Model:
    """Two 3×3 convolutions of `filters` channels and a softmax over `classes`; pixels are scaled to -1..1 inside."""
    inputs = keras.Input(shape)
    x = keras.layers.Rescaling(2.0, offset=-1.0)(inputs)
    x = keras.layers.Conv2D(filters[0], 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(filters[1], 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(classes, activation="softmax")(x))


def train_classifier(seed: int = 0, epochs: int = 8) -> keras.Model:
    """A tiny CNN trained to ~100% on the synthetic data (normalisation inside the model, as in the contract);
    `epochs=0` leaves it untrained (for tests where accuracy does not matter)."""
    keras.utils.set_random_seed(seed)
    images, labels = synthetic_images(320, seed=1)
    model = small_cnn(SPEC.shape, (8, 16), len(LABELS))
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    if epochs:
        model.fit(images.astype(np.float32) / 255.0, labels, epochs=epochs, batch_size=32, verbose=0)
    return model


def save_with_matrix_inverse(model: keras.Model, export_dir: Path) -> Path:
    """Saves `model` with a `serving_preprocessed` signature that also runs MatrixInverse (not a TFLite builtin)."""

    @tf.function(input_signature=[tf.TensorSpec([None, *SPEC.shape], tf.float32, name="images")])
    def serving_preprocessed(images: tf.Tensor) -> dict[str, tf.Tensor]:
        scale = tf.reduce_sum(tf.linalg.inv(tf.eye(2) + tf.reduce_mean(images)))
        probabilities = model(images, training=False) * scale
        return {"probabilities": probabilities, "classes": tf.argmax(probabilities, axis=-1)}

    signatures = {"serving_preprocessed": serving_preprocessed.get_concrete_function()}
    tf.saved_model.save(model, str(export_dir), signatures=signatures)
    return export_dir


def cached(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """`<base temp>/<name>`, built once per session by `build(path)` (shared by every edge test module)."""
    path = factory.getbasetemp() / "edge-shared" / name
    done = path.parent / f"{name}.done"
    if not done.exists():
        build(path)
        done.touch()
    return path


def shared_data(factory: pytest.TempPathFactory) -> Path:
    return cached(factory, "data", write_dataset)


def shared_model(factory: pytest.TempPathFactory) -> Path:
    """The trained classifier as the trainer exports it: three signatures, labels and preprocessing assets."""
    return cached(factory, "saved_model", lambda path: export_saved_model(train_classifier(), str(path), SPEC, LABELS))
