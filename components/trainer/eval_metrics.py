"""Keras metrics of the Trainer's own evaluation beyond loss and accuracy."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras


@keras.utils.register_keras_serializable(package="tfxp")
class TopPredictedShare(keras.metrics.Metric):
    """The share of images whose top-1 prediction is the most often predicted class (1.0 = one class only)."""

    def __init__(self, num_classes: int, name: str = "top_predicted_share", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        self.num_classes = num_classes
        self.counts = self.add_weight("counts", shape=(num_classes,), initializer="zeros", dtype=tf.float32)

    def update_state(self, y_true: tf.Tensor, y_pred: tf.Tensor, sample_weight: tf.Tensor | None = None) -> None:
        predicted = tf.argmax(y_pred, axis=-1, output_type=tf.int32)
        self.counts.assign_add(
            tf.math.bincount(predicted, minlength=self.num_classes, maxlength=self.num_classes, dtype=tf.float32)
        )

    def result(self) -> tf.Tensor:
        return tf.math.divide_no_nan(tf.reduce_max(self.counts), tf.reduce_sum(self.counts))

    def reset_state(self) -> None:
        self.counts.assign(tf.zeros_like(self.counts))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_classes": self.num_classes}
