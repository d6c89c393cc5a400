"""Labels against images: how often the served model's prediction equals a record's label, on a sample.

A class-to-class relabelling (every 3 called 5, every 5 called 3) leaves the label distribution as it was, so no
drift comparator sees it; the served model does: it still calls a 3 a 3, and agrees far less with the new span's
labels than with the earlier spans'. Inference on a few hundred records, no training.

The model's own signatures are used: `SIGNATURE_TF_EXAMPLE` for the predictions and `SIGNATURE_EVAL_LABELS` for
the 0-based class ids of the labels (the label offset the model was trained with).

Example:
    model = load_served_model(served.path)
    agreement(model, read_records(["data/span-4/train/part-00000-of-00002.tfrecord.gz"], 256))  # 0.38
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from foundation.contract import (
    EVAL_LABEL_KEY,
    INPUT_EXAMPLES,
    OUTPUT_PROBABILITIES,
    SIGNATURE_EVAL_LABELS,
    SIGNATURE_TF_EXAMPLE,
)
from foundation.data.tfrecords import compression_for

_BATCH = 128


def read_records(paths: Sequence[str], count: int) -> list[bytes]:
    """The first `count` serialized records of `paths`, in order."""
    records: list[bytes] = []
    for path in paths:
        dataset = tf.data.TFRecordDataset(path, compression_type=compression_for(path))
        for record in dataset.take(count - len(records)).as_numpy_iterator():
            records.append(bytes(record))
        if len(records) >= count:
            break
    return records


def load_served_model(path: str) -> Any:
    """The SavedModel at `path` (a served version directory)."""
    return tf.saved_model.load(path)


def agreement(model: Any, records: Sequence[bytes]) -> float | None:
    """The share of `records` whose label the model predicts; None for no records."""
    if not records:
        return None
    predict = model.signatures[SIGNATURE_TF_EXAMPLE]
    labels = model.signatures[SIGNATURE_EVAL_LABELS]
    agreed = 0
    for start in range(0, len(records), _BATCH):
        batch = tf.constant(list(records[start : start + _BATCH]))
        predicted = np.argmax(predict(**{INPUT_EXAMPLES: batch})[OUTPUT_PROBABILITIES].numpy(), axis=-1)
        truth = np.reshape(labels(**{INPUT_EXAMPLES: batch})[EVAL_LABEL_KEY].numpy(), [-1])
        agreed += int(np.sum(predicted == truth))
    return agreed / len(records)
