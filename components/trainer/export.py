"""Writes the SavedModel of the model contract (docs/architecture.md).

Three signatures share one preprocessing and one model call:

- `serving_default`: `image_bytes` string [None] → `probabilities` float32 [None, C], `classes` int64 [None]
- `serving_tf_example`: `examples` string [None] (serialized tf.Example with `image/encoded`) → same outputs
- `serving_preprocessed`: `images` float32 [None, H, W, C] → same outputs

and, for TFMA only, `tfxp_eval_labels`: `examples` → `label_index` int64 [None] (the example's label minus
`data.label_offset`, so 1-based data sets are scored against 0-based classes),
plus `assets/labels.txt`, `assets/preprocessing.json` and `assets.extra/tf_serving_warmup_requests`.

The signatures taking encoded images decode, crop the central `spec.central_crop` of the shorter side and resize
(`preprocess_image_bytes`), exactly as evaluation does; `serving_preprocessed` takes images already so prepared,
and `preprocessing.json` (`PreprocessingSpec.to_json`, with `central_crop`) tells the device export the crop.

Example:
    export_saved_model(model, "/models/digits/1", spec, labels, warmup_images=[png_bytes])
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf
import tf_keras as keras

from foundation.contract import (
    EVAL_LABEL_KEY,
    IMAGE_KEY,
    INPUT_EXAMPLES,
    INPUT_IMAGE_BYTES,
    INPUT_IMAGES,
    LABEL_KEY,
    LABELS_FILE,
    OUTPUT_CLASSES,
    OUTPUT_PROBABILITIES,
    PREPROCESSING_FILE,
    SIGNATURE_DEFAULT,
    SIGNATURE_EVAL_LABELS,
    SIGNATURE_PREPROCESSED,
    SIGNATURE_TF_EXAMPLE,
    WARMUP_ASSET,
    write_label_map,
)
from foundation.preprocessing import preprocess_image_bytes
from foundation.preprocessing_spec import PreprocessingSpec


def make_signatures(
    model: keras.Model, spec: PreprocessingSpec, label_offset: int = 0
) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """The three serving signatures of the model contract, all through one model call, and TFMA's labels."""

    @tf.function(input_signature=[tf.TensorSpec([None, *spec.shape], tf.float32, name=INPUT_IMAGES)])
    def serving_preprocessed(images: tf.Tensor) -> dict[str, tf.Tensor]:
        # Cast: the contract promises float32 whatever the model's output dtype is.
        probabilities = tf.cast(model(images, training=False), tf.float32)
        classes = tf.argmax(probabilities, axis=-1, output_type=tf.int64)
        return {OUTPUT_PROBABILITIES: probabilities, OUTPUT_CLASSES: classes}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_IMAGE_BYTES)])
    def serving_default(image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        return serving_preprocessed(preprocess_image_bytes(image_bytes, spec))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_EXAMPLES)])
    def serving_tf_example(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        features = tf.io.parse_example(examples, {IMAGE_KEY: tf.io.FixedLenFeature([], tf.string)})
        return serving_default(features[IMAGE_KEY])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_EXAMPLES)])
    def eval_labels(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        # TFMA runs this as a preprocessing function and reads the label from its output.
        features = tf.io.parse_example(examples, {LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)})
        return {EVAL_LABEL_KEY: features[LABEL_KEY] - label_offset}

    return {
        SIGNATURE_EVAL_LABELS: eval_labels.get_concrete_function(),
        SIGNATURE_DEFAULT: serving_default.get_concrete_function(),
        SIGNATURE_TF_EXAMPLE: serving_tf_example.get_concrete_function(),
        SIGNATURE_PREPROCESSED: serving_preprocessed.get_concrete_function(),
    }


def export_saved_model(
    model: keras.Model,
    export_dir: str,
    spec: PreprocessingSpec,
    labels: Sequence[str],
    warmup_images: Sequence[bytes] = (),
    label_offset: int = 0,
) -> None:
    """Saves `model` with the contract's signatures, assets and warmup requests.

    Args:
        model: A float32-output classifier taking float32 [N, H, W, C] images in [0, 1].
        export_dir: SavedModel directory (created; for TFX, `fn_args.serving_model_dir`).
        spec: The preprocessing the model was trained with.
        labels: Class names, index = class id.
        warmup_images: Encoded images for `assets.extra/tf_serving_warmup_requests`, one request each; empty = none.
        label_offset: Subtracted from `image/class/label` by the `tfxp_eval_labels` signature.

    Raises:
        ValueError: the label count differs from the model's output classes.
    """
    num_classes = model.output_shape[-1]
    if len(labels) != num_classes:
        raise ValueError(f"the label map has {len(labels)} names but the model predicts {num_classes} classes")
    signatures = make_signatures(model, spec, label_offset)
    with tempfile.TemporaryDirectory(prefix="tfxp-assets-") as staging:
        # Assets are copied into <export_dir>/assets/ on save; attaching them to the model tracks them.
        labels_file = Path(staging) / LABELS_FILE
        write_label_map(labels_file, labels)
        spec_file = Path(staging) / PREPROCESSING_FILE
        spec_file.write_text(spec.to_json() + "\n")
        model.tfxp_labels = tf.saved_model.Asset(str(labels_file))
        model.tfxp_preprocessing = tf.saved_model.Asset(str(spec_file))
        # Keras's SavedModel writer with save_traces=False skips tracing every layer's call function, which
        # tf.saved_model.save does (about 5× slower here); the model still reloads with tf_keras from its config.
        model.save(export_dir, save_format="tf", signatures=signatures, save_traces=False, include_optimizer=False)
        del model.tfxp_labels, model.tfxp_preprocessing  # the staged files vanish with the temp dir
    if warmup_images:
        write_warmup_requests(f"{export_dir}/{WARMUP_ASSET}", warmup_images)


def write_warmup_requests(path: str, images: Sequence[bytes]) -> None:
    """Writes one `serving_default` PredictionLog record per image (TF Serving replays them at load time)."""
    # Imported here: tensorflow_serving.apis is only needed for export, not for training or tests of the maths.
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
    with tf.io.TFRecordWriter(path) as writer:
        for image in images:
            request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=SIGNATURE_DEFAULT))
            request.inputs[INPUT_IMAGE_BYTES].CopyFrom(tf.make_tensor_proto([image], dtype=tf.string))
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
