"""The TFMA-only `tfxp_eval_labels` signature: 1-based data sets are scored against 0-based classes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.trainer.export import export_saved_model
from foundation.contract import EVAL_LABEL_KEY, SIGNATURE_EVAL_LABELS
from foundation.data.tfrecords import make_example
from foundation.preprocessing_spec import PreprocessingSpec


def test_eval_labels_subtract_the_label_offset(tmp_path: Path) -> None:
    spec = PreprocessingSpec(image_size=4, channels=1)
    model = keras.Sequential([keras.layers.Input(spec.shape), keras.layers.Flatten(), keras.layers.Dense(3, "softmax")])
    export_saved_model(model, str(tmp_path / "model"), spec, ["a", "b", "c"], label_offset=1)
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    png = tf.io.encode_png(np.zeros((4, 4, 1), np.uint8)).numpy()
    examples = tf.constant([make_example(png, label).SerializeToString() for label in (1, 2, 3)])
    labels = loaded.signatures[SIGNATURE_EVAL_LABELS](examples=examples)[EVAL_LABEL_KEY]
    assert labels.numpy().tolist() == [0, 1, 2]
