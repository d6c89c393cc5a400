"""Small models in the tfxp SavedModel contract, for the serving tests (a test helper, not product code).

`write_model_version` exports any tf_keras classifier with the trainer's own exporter
(`components.trainer.export.export_saved_model`: the three contract signatures, assets and warmup records),
so the server, client and load test are exercised on exactly what the pipeline pushes, without a training run.
`write_classification_version` writes a model whose only signature has the shape TF Serving's Classify API
needs, which the contract's signatures do not have.

Example:
    path = write_model_version(base / "digits", 1, tiny_classifier(image_size=8, channels=1, num_classes=3))
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.trainer.export import export_saved_model
from foundation.contract import IMAGE_KEY
from foundation.preprocessing import preprocess_image_bytes
from foundation.preprocessing_spec import PreprocessingSpec
from serving.server_options import ServerOptions


def labelled_server_options(poll_seconds: float) -> ServerOptions:
    """Server options for a labelled models.config, on free ports, polling every `poll_seconds`: with the flag the
    deploy assets set (serving/deploy.py), as TF Serving checks labels before the first load (server_core.cc:514
    before :524)."""
    return ServerOptions(
        grpc_port=0,
        rest_port=0,
        poll_interval_seconds=poll_seconds,
        config_poll_interval_seconds=poll_seconds,
        allow_version_labels_for_unavailable_models=True,
    )


def tiny_classifier(image_size: int, channels: int, num_classes: int, seed: int = 0) -> keras.Model:
    """A small conv net on float32 [0, 1] images; weights from `seed` (other seed, other outputs)."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input(shape=(image_size, image_size, channels), dtype="float32", name="images")
    x = keras.layers.Rescaling(2.0, offset=-1.0)(inputs)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs)


def png_bytes(image: np.ndarray) -> bytes:
    """Encodes a uint8 [H, W, C] array as PNG."""
    return tf.io.encode_png(tf.constant(image, tf.uint8)).numpy()


def random_png(image_size: int, channels: int, seed: int) -> bytes:
    """A PNG of uniform noise, reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    return png_bytes(rng.integers(0, 256, size=(image_size, image_size, channels), dtype=np.uint8))


def image_example(image: bytes) -> tf.train.Example:
    """A tf.Example holding `image` under `image/encoded` (the data contract)."""
    feature = {IMAGE_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[image]))}
    return tf.train.Example(features=tf.train.Features(feature=feature))


def _spec_of(model: keras.Model) -> PreprocessingSpec:
    _, height, _, channels = model.input_shape
    return PreprocessingSpec(image_size=int(height), channels=int(channels))


def _labels(model: keras.Model, labels: Sequence[str] | None) -> list[str]:
    count = int(model.output_shape[-1])
    return list(labels) if labels is not None else [f"class_{index}" for index in range(count)]


def write_model_version(
    base_path: Path,
    version: int,
    model: keras.Model,
    labels: Sequence[str] | None = None,
    warmup_images: Sequence[bytes] = (),
) -> Path:
    """Exports `model` as `base_path/<version>/` with the trainer's exporter; the version appears atomically.

    Args:
        base_path: The model base path; created if missing.
        version: The version number (directory name).
        model: A tf_keras model from float32 [N, H, W, C] in [0, 1] to probabilities [N, C].
        labels: Class names; default `class_0`, `class_1`, ...
        warmup_images: Encoded images recorded as warmup requests.

    Returns:
        The version directory.
    """
    staging = base_path / f".staging-{version}"
    export_saved_model(model, str(staging), _spec_of(model), _labels(model, labels), warmup_images=warmup_images)
    target = base_path / str(version)
    staging.rename(target)
    return target


class _ClassificationModule(tf.Module):
    def __init__(self, model: keras.Model, labels: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        self.spec = _spec_of(model)
        self.label_table = tf.constant(list(labels))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify(self, inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        features = tf.io.parse_example(inputs, {IMAGE_KEY: tf.io.FixedLenFeature([], tf.string)})
        scores = tf.cast(self.model(preprocess_image_bytes(features[IMAGE_KEY], self.spec), training=False), tf.float32)
        classes = tf.tile(self.label_table[tf.newaxis, :], [tf.shape(scores)[0], 1])
        return {"classes": classes, "scores": scores}


def write_classification_version(
    base_path: Path, version: int, model: keras.Model, labels: Sequence[str] | None = None
) -> Path:
    """Exports `model` with one signature, `classification`, in TF Serving's Classify shape.

    The signature takes `inputs` (serialized tf.Examples with `image/encoded`) and returns `classes` (the label
    names, [N, C]) and `scores` ([N, C]).
    """
    module = _ClassificationModule(model, _labels(model, labels))
    staging = base_path / f".staging-{version}"
    tf.saved_model.save(module, str(staging), signatures={"classification": module.classify.get_concrete_function()})
    target = base_path / str(version)
    staging.rename(target)
    return target
