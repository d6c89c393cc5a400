"""SavedModel warmup records: what TF Serving replays when it loads a version, before it takes traffic.

TF Serving reads `assets.extra/tf_serving_warmup_requests`, a TFRecord file of `PredictionLog` protos, and runs
each request once at load time, so the first real requests do not pay for graph tracing and allocation (see
TF Serving's "SavedModel Warmup" guide). The trainer's export writes the file
(`components.trainer.export.write_warmup_requests`); the local server reads it here and replays it.

Example:
    records = read_warmup_requests(Path("out/serving/digits/1700000000"))
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from foundation.contract import WARMUP_ASSET
from foundation.data.record_frames import record_frames_problem

# TF Serving refuses warmup files with more records than this (servables/tensorflow/saved_model_warmup_util).
MAX_WARMUP_RECORDS = 1000


def read_warmup_requests(saved_model_dir: Path) -> list[prediction_log_pb2.PredictionLog]:
    """The warmup records of a SavedModel; empty when it has none.

    Raises:
        ValueError: the file is not a TFRecord of PredictionLog protos, or has too many records.
    """
    path = Path(saved_model_dir) / WARMUP_ASSET
    if not path.is_file():
        return []
    problem = record_frames_problem(str(path), records=MAX_WARMUP_RECORDS + 1)
    if problem is not None:  # TensorFlow's reader would allocate what a header declares
        raise ValueError(f"{path}: not a TFRecord file of PredictionLog protos ({problem})")
    records = []
    try:
        for serialized in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
            records.append(prediction_log_pb2.PredictionLog.FromString(serialized))
    except (tf.errors.OpError, ValueError) as error:
        raise ValueError(f"{path}: not a TFRecord file of PredictionLog protos ({error})") from error
    if len(records) > MAX_WARMUP_RECORDS:
        raise ValueError(f"{path} has {len(records)} warmup records; TF Serving accepts at most {MAX_WARMUP_RECORDS}")
    return records
