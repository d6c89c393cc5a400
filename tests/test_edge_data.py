"""edge.data (reading labelled splits in both layouts), plus the synthetic data and model the edge tests share.

The helpers at the top write a 4-class image data set (a bright bar on one side of a noisy 16×16 image) and train
a tiny tf_keras CNN on it, saved by the trainer's exporter (the model contract's signatures and assets). Other
`test_edge_*` modules import them (`from test_edge_data import ...`); a build is cached under pytest's base temp
dir so the session builds each thing once.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.trainer.export import export_saved_model
from edge.app_client import MEDIAPIPE_VENV, PYTHON_ENV
from edge.data import example_files, load_split
from edge.errors import EdgeError
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


def _example(pixels: np.ndarray, label: int) -> bytes:
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
            writer.write(_example(pixels, int(label) + label_offset))


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


def test_example_files_reads_a_data_directory_and_an_artifact(tmp_path: Path, data_dir: Path) -> None:
    tfx = write_dataset(tmp_path / "artifact", tfx_layout=True)

    assert [Path(f).name for f in example_files(data_dir, "eval")] == ["part-00000-of-00001.tfrecord.gz"]
    assert [Path(f).name for f in example_files(tfx, "train")] == ["data_tfrecord-00000-of-00001.gz"]


def test_example_files_reads_every_layout_tfxp_run_reads(tmp_path: Path) -> None:
    # ImageNet's flat, uncompressed, extension-less shards; and spans, each read as the run reads them.
    flat = tmp_path / "imagenet"
    for name in ("train-00000-of-00002", "train-00001-of-00002", "validation-00000-of-00001"):
        (flat / name).parent.mkdir(parents=True, exist_ok=True)
        (flat / name).write_bytes(b"")
    assert [Path(f).name for f in example_files(flat, "eval")] == ["validation-00000-of-00001"]
    for span in (1, 2):
        write_dataset(tmp_path / "stream" / f"span-{span}")
    (tmp_path / "stream" / "span-3.tmp" / "eval").mkdir(parents=True)  # staged: never read
    files = example_files(tmp_path / "stream", "eval")
    assert [Path(f).parent.parent.name for f in files] == ["span-1", "span-2"]


def test_example_files_without_the_split_says_what_it_found_and_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(EdgeError, match=r"no `eval` examples under .*found nothing.*data.train_pattern.*Split-<split>"):
        example_files(tmp_path, "eval")
    (tmp_path / "part-0.tfrecord.gz").write_bytes(b"")
    with pytest.raises(EdgeError, match=r"split into train and eval by hash buckets only in a run.*Examples artifact"):
        example_files(tmp_path, "eval")


def test_load_split_decodes_with_the_shared_preprocessing(data_dir: Path) -> None:
    data = load_split(data_dir, "eval", SPEC)
    expected_images, expected_labels = synthetic_images(120, seed=2)

    assert data.images.shape == (120, 16, 16, 1)
    assert data.images.dtype == np.float32
    np.testing.assert_allclose(data.images, expected_images / 255.0, atol=1e-6)
    np.testing.assert_array_equal(data.labels, expected_labels)


def test_load_split_shuffled_sample_is_seeded_and_covers_classes(data_dir: Path) -> None:
    first = load_split(data_dir, "train", SPEC, limit=40, shuffle=True, seed=3)
    again = load_split(data_dir, "train", SPEC, limit=40, shuffle=True, seed=3)
    in_order = load_split(data_dir, "train", SPEC, limit=40)

    assert len(first) == 40
    np.testing.assert_array_equal(first.labels, again.labels)
    assert not np.array_equal(first.images, in_order.images)
    assert set(first.labels.tolist()) == {0, 1, 2, 3}


def test_the_shuffled_sample_does_not_depend_on_process_wide_seeds(data_dir: Path) -> None:
    # The Trainer sets these seeds; a cached Trainer leaves them unset: the calibration sample must not change.
    random.seed(1), np.random.seed(1), tf.random.set_seed(1)
    first = load_split(data_dir, "train", SPEC, limit=40, shuffle=True)
    random.seed(2), np.random.seed(2), tf.random.set_seed(2)
    second = load_split(data_dir, "train", SPEC, limit=40, shuffle=True)
    other_seed = load_split(data_dir, "train", SPEC, limit=40, shuffle=True, seed=1)

    np.testing.assert_array_equal(first.images, second.images)
    assert first.digest == second.digest and len(first.digest) == 64
    assert other_seed.digest != first.digest


def test_load_split_applies_the_label_offset(tmp_path: Path) -> None:
    # 1-based labels in ImageNet's flat layout, as its build scripts write them.
    images, labels = synthetic_images(8, seed=4)
    write_split(tmp_path / "train-00000-of-00001.gz", images, labels, label_offset=1)
    write_split(tmp_path / "validation-00000-of-00001.gz", images, labels, label_offset=1)

    assert load_split(tmp_path, "eval", SPEC, label_offset=1).labels.tolist() == labels.tolist()
    with pytest.raises(EdgeError, match=r"label 1 .* below the label offset 2.*data.label_offset"):
        load_split(tmp_path, "eval", SPEC, label_offset=2)


def test_load_split_reads_uncompressed_records(tmp_path: Path) -> None:
    images, labels = synthetic_images(4, seed=5)
    path = tmp_path / "Split-eval" / "data.tfrecord"
    path.parent.mkdir()
    with tf.io.TFRecordWriter(str(path)) as writer:
        for pixels, label in zip(images, labels, strict=True):
            writer.write(_example(pixels, int(label)))

    assert load_split(tmp_path, "eval", SPEC).labels.tolist() == labels.tolist()


def test_load_split_rejects_records_without_the_contract_features(tmp_path: Path) -> None:
    path = tmp_path / "Split-eval" / "data_tfrecord-00000-of-00001.gz"
    path.parent.mkdir()
    example = tf.train.Example(
        features=tf.train.Features(feature={"pixels": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))})
    )
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        writer.write(example.SerializeToString())

    with pytest.raises(EdgeError, match=r"cannot read the `eval` examples .*`image/encoded`.*`image/class/label`"):
        load_split(tmp_path, "eval", SPEC)


def test_the_cli_reads_the_serving_crop_beside_the_device_model(tmp_path: Path) -> None:
    from edge.data import central_crop_near

    model = tmp_path / "model.tflite"
    assert central_crop_near(model) == 1.0  # no edge_metadata.json: the whole frame
    (tmp_path / "edge_metadata.json").write_text('{"normalization": {"central_crop": 0.875}}')
    assert central_crop_near(model) == 0.875
    (tmp_path / "edge_metadata.json").write_text('{"normalization": {"central_crop": "lots"}}')
    assert central_crop_near(model) == 1.0
