"""Small SavedModels in the tfxp model contract, for the serving tests and benchmarks.

The trainer's exporter writes the real thing (`components/trainer/export.py`); these helpers write a model with
the same signatures and assets from any tf_keras classifier, so the server, client and load test can be tested
and measured without a training run. Besides the three contract signatures they add `classification` (TF
Serving's Classify shape: `inputs` serialized tf.Example → `classes` label strings, `scores`), which is what
TF Serving's Classify API needs.

Example:
    path = write_model_version(base / "digits", 1, tiny_classifier(image_size=8, channels=1, num_classes=3))
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.trainer.preprocessing import PreprocessingSpec, preprocess_image_bytes
from serving.warmup import write_warmup_requests

IMAGE_FEATURE = "image/encoded"


def tiny_classifier(image_size: int, channels: int, num_classes: int, seed: int = 0) -> keras.Model:
    """A small conv net on float32 [0, 1] images; weights from `seed` (different seeds, different outputs)."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input(shape=(image_size, image_size, channels), dtype="float32", name="images")
    x = keras.layers.Rescaling(2.0, offset=-1.0)(inputs)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs)


class _ContractModule(tf.Module):
    def __init__(self, model: keras.Model, labels: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        _, height, _, channels = model.input_shape
        self.spec = PreprocessingSpec(image_size=int(height), channels=int(channels))
        self.label_table = tf.constant(list(labels))

    def _outputs(self, images: tf.Tensor) -> dict[str, tf.Tensor]:
        probabilities = tf.cast(self.model(images, training=False), tf.float32)
        return {"probabilities": probabilities, "classes": tf.argmax(probabilities, axis=-1, output_type=tf.int64)}

    def _images_from_bytes(self, image_bytes: tf.Tensor) -> tf.Tensor:
        return preprocess_image_bytes(image_bytes, self.spec)

    def _images_from_examples(self, examples: tf.Tensor) -> tf.Tensor:
        features = tf.io.parse_example(examples, {IMAGE_FEATURE: tf.io.FixedLenFeature([], tf.string)})
        return self._images_from_bytes(features[IMAGE_FEATURE])

    def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        shape = (None, *self.spec.shape)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")])
        def serving_default(image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
            return self._outputs(self._images_from_bytes(image_bytes))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serving_tf_example(examples: tf.Tensor) -> dict[str, tf.Tensor]:
            return self._outputs(self._images_from_examples(examples))

        @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32, name="images")])
        def serving_preprocessed(images: tf.Tensor) -> dict[str, tf.Tensor]:
            return self._outputs(images)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def classification(inputs: tf.Tensor) -> dict[str, tf.Tensor]:
            scores = self._outputs(self._images_from_examples(inputs))["probabilities"]
            classes = tf.tile(self.label_table[tf.newaxis, :], [tf.shape(scores)[0], 1])
            return {"classes": classes, "scores": scores}

        return {
            "serving_default": serving_default.get_concrete_function(),
            "serving_tf_example": serving_tf_example.get_concrete_function(),
            "serving_preprocessed": serving_preprocessed.get_concrete_function(),
            "classification": classification.get_concrete_function(),
        }


def png_bytes(image: np.ndarray) -> bytes:
    """Encodes a uint8 [H, W, C] array as PNG."""
    return tf.io.encode_png(tf.constant(image, tf.uint8)).numpy()


def random_png(image_size: int, channels: int, seed: int) -> bytes:
    """A PNG of uniform noise, reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    return png_bytes(rng.integers(0, 256, size=(image_size, image_size, channels), dtype=np.uint8))


def image_example(image: bytes) -> bytes:
    """A serialized tf.Example holding `image` under `image/encoded` (the data contract)."""
    feature = {IMAGE_FEATURE: tf.train.Feature(bytes_list=tf.train.BytesList(value=[image]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_model_version(
    base_path: Path,
    version: int,
    model: keras.Model,
    labels: Sequence[str] | None = None,
    warmup_images: Sequence[bytes] = (),
    model_name: str = "model",
) -> Path:
    """Exports `model` as `base_path/<version>/` in the tfxp SavedModel contract.

    The version appears atomically (written beside it, then renamed), as a polling server expects.

    Args:
        base_path: The model base path; created if missing.
        version: The version number (directory name).
        model: A tf_keras model from float32 [N, H, W, C] in [0, 1] to probabilities [N, C].
        labels: Class names; default `class_0`, `class_1`, ...
        warmup_images: Encoded images recorded as warmup requests (none = no warmup file).
        model_name: Model name written into the warmup requests.

    Returns:
        The version directory.
    """
    num_classes = int(model.output_shape[-1])
    labels = list(labels) if labels is not None else [f"class_{index}" for index in range(num_classes)]
    if len(labels) != num_classes:
        raise ValueError(f"{len(labels)} labels given for a model with {num_classes} classes")
    module = _ContractModule(model, labels)
    staging = base_path / f".staging-{version}"
    tf.saved_model.save(module, str(staging), signatures=module.signatures())
    (staging / "assets").mkdir(exist_ok=True)
    (staging / "assets" / "labels.txt").write_text("".join(f"{label}\n" for label in labels))
    (staging / "assets" / "preprocessing.json").write_text(module.spec.to_json())
    if warmup_images:
        write_warmup_requests(staging, list(warmup_images), model_name)
    target = base_path / str(version)
    staging.rename(target)
    return target
