"""SavedModel warmup records: what TF Serving replays when it loads a version, before it takes traffic.

TF Serving reads `assets.extra/tf_serving_warmup_requests`, a TFRecord file of `PredictionLog` protos, and runs
each request once at load time, so the first real requests do not pay for graph tracing and allocation (see
TF Serving's "SavedModel Warmup" guide). The local server in this package replays the same file.

Example:
    write_warmup_requests(Path("out/serving/digits/1700000000"), [png_bytes], "digits")
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
# TF Serving refuses warmup files with more records than this (servables/tensorflow/saved_model_warmup_util).
MAX_WARMUP_RECORDS = 1000


def warmup_records(image_bytes: Sequence[bytes], model_name: str) -> list[prediction_log_pb2.PredictionLog]:
    """One `serving_default` Predict request per image (batch size 1, the common online case).

    Raises:
        ValueError: no images, or more than TF Serving accepts.
    """
    if not image_bytes:
        raise ValueError("warmup needs at least one encoded image; pass a few eval images")
    if len(image_bytes) > MAX_WARMUP_RECORDS:
        raise ValueError(f"{len(image_bytes)} warmup images given; TF Serving accepts at most {MAX_WARMUP_RECORDS}")
    records = []
    for image in image_bytes:
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(name=model_name, signature_name="serving_default")
        )
        request.inputs["image_bytes"].CopyFrom(tf.make_tensor_proto([image], dtype=tf.string))
        records.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request)))
    return records


def write_warmup_requests(saved_model_dir: Path, image_bytes: list[bytes], model_name: str) -> Path:
    """Writes `assets.extra/tf_serving_warmup_requests` into a SavedModel directory.

    Args:
        saved_model_dir: The exported SavedModel (the directory holding `saved_model.pb`).
        image_bytes: Encoded JPEG/PNG images, one warmup request each.
        model_name: The served model name recorded in the requests' model spec.

    Returns:
        The path of the warmup file.

    Raises:
        ValueError: no images, too many, or `saved_model_dir` holds no `saved_model.pb`.
    """
    saved_model_dir = Path(saved_model_dir)
    if not (saved_model_dir / "saved_model.pb").is_file():
        raise ValueError(f"{saved_model_dir} holds no saved_model.pb; write warmup records after exporting the model")
    records = warmup_records(image_bytes, model_name)
    path = saved_model_dir / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    return path


def read_warmup_requests(saved_model_dir: Path) -> list[prediction_log_pb2.PredictionLog]:
    """The warmup records of a SavedModel; empty when it has none.

    Raises:
        ValueError: the file is not a TFRecord of PredictionLog protos, or has too many records.
    """
    path = Path(saved_model_dir) / WARMUP_FILE
    if not path.is_file():
        return []
    records = []
    try:
        for serialized in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
            records.append(prediction_log_pb2.PredictionLog.FromString(serialized))
    except (tf.errors.OpError, ValueError) as error:
        raise ValueError(f"{path}: not a TFRecord file of PredictionLog protos ({error})") from error
    if len(records) > MAX_WARMUP_RECORDS:
        raise ValueError(f"{path} has {len(records)} warmup records; TF Serving accepts at most {MAX_WARMUP_RECORDS}")
    return records
