"""The Evaluation section's evidence: TFMA's confusion matrix, and the eval images the model gets most wrong.

The confusion matrix is TFMA's `MultiClassConfusionMatrixPlot` (in the eval config, `pipeline.pipeline`). The
misclassified images come from running the Trainer's SavedModel (`serving_tf_example`, the signature TFMA uses)
on at most `MAX_SCANNED` eval examples, so writing the report stays quick for ImageNet-sized splits too.

Example:
    confusion_matrix("OUT/tfxp-digits/root/Evaluator/evaluation/7", ["0", "1", ...])
    # {"labels": ["0", "1", ...], "matrix": [[35, 0, ...], ...]}
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator, Sequence
from typing import Any

from foundation import paths
from foundation.bounded import parse_json, read_document
from foundation.contract import (
    IMAGE_KEY,
    INPUT_EXAMPLES,
    LABEL_KEY,
    OUTPUT_PROBABILITIES,
    SIGNATURE_TF_EXAMPLE,
    TRAINING_METRICS_FILE,
)

CONFUSION_PLOT = "multi_class_confusion_matrix_plot"
"""The plot's key in TFMA's output (`MultiClassConfusionMatrixPlot`)."""
CANDIDATE = "candidate"
"""TFMA's name for the model under evaluation when there is a baseline."""
VALIDATIONS_FILE = "validations"  # TFMA's validation result: validations.tfrecord in the evaluation dir
MAX_SCANNED = 2000
"""Eval examples run through the model to find the misclassified ones."""
KEEP = 16
"""Misclassified images shown."""
THUMBNAIL_PIXELS = 96
BATCH = 256


def evaluation_metrics(evaluation_uri: str) -> dict[str, dict[str, float]]:
    """Overall-slice metrics from a TFMA output dir: {"candidate": {...}, "baseline": {...}, "diff": {...}}."""
    import tensorflow_model_analysis as tfma

    grouped: dict[str, dict[str, float]] = {}
    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for item in metrics.metric_keys_and_values:
            group = "diff" if item.key.is_diff else (item.key.model_name or "candidate")
            value = item.value
            if value.HasField("double_value"):
                grouped.setdefault(group, {})[item.key.name] = value.double_value.value
    return grouped


def validation_failures(evaluation_uri: str) -> list[str]:
    """The first line of each TFMA threshold failure; empty when the Evaluator wrote no validation result.

    Raises:
        Exception: whatever TFMA raises for a validation result it cannot read.
    """
    import tensorflow_model_analysis as tfma

    if not paths.children(evaluation_uri, f"{VALIDATIONS_FILE}*"):  # Evaluator without thresholds
        return []
    result = tfma.load_validation_result(evaluation_uri)
    return [
        failure.message.strip().splitlines()[0]
        for per_slice in result.metric_validations_per_slice
        for failure in per_slice.failures
        if failure.message
    ]


def training_metrics(model_uri: str) -> dict[str, Any]:
    """`training_metrics.json` written by the Trainer into the Model artifact; {} when there is none.

    Raises:
        ValueError: the file is not a JSON object (a `json.JSONDecodeError` when it is not JSON at all).
        OSError: the file cannot be read.
    """
    path = f"{model_uri.rstrip('/')}/{TRAINING_METRICS_FILE}"
    if not paths.is_file(path):
        return {}
    loaded = parse_json(read_document(path, f"training metrics {path}"))
    if not isinstance(loaded, dict):
        raise ValueError(f"expected a JSON object, got {type(loaded).__name__}")
    return loaded


def class_name(labels: Sequence[str], class_id: int) -> str:
    """The label map's name of `class_id`, or the id itself when the label map does not have it."""
    return labels[class_id] if 0 <= class_id < len(labels) else str(class_id)


def confusion_matrix(evaluation_uri: str, labels: Sequence[str]) -> dict[str, Any] | None:
    """TFMA's multi-class confusion matrix of the candidate model on the overall slice.

    Args:
        evaluation_uri: The Evaluator's `evaluation` artifact directory.
        labels: Class names by class id.

    Returns:
        {"labels": names, "matrix": counts[true][predicted]} over the classes that occur; None when TFMA wrote no
        confusion matrix (a run before it was in the eval config).
    """
    import tensorflow_model_analysis as tfma

    entries: list[Any] = []
    for plots in tfma.load_plots(evaluation_uri):
        if plots.slice_key.single_slice_keys:
            continue
        for item in plots.plot_keys_and_values:
            if item.key.name != CONFUSION_PLOT or item.key.model_name not in ("", CANDIDATE):
                continue
            matrices = item.value.multi_class_confusion_matrix_at_thresholds.matrices
            if matrices:  # the threshold 0.0 matrix: the predicted class is the most probable one
                entries = list(min(matrices, key=lambda matrix: matrix.threshold).entries)
    if not entries:
        return None
    classes = sorted({entry.actual_class_id for entry in entries} | {entry.predicted_class_id for entry in entries})
    classes = [class_id for class_id in classes if class_id >= 0]  # -1: no prediction above the threshold
    index = {class_id: position for position, class_id in enumerate(classes)}
    matrix = [[0] * len(classes) for _ in classes]
    for entry in entries:
        if entry.actual_class_id in index and entry.predicted_class_id in index:
            row, column = index[entry.actual_class_id], index[entry.predicted_class_id]
            matrix[row][column] += round(entry.num_weighted_examples)
    return {"labels": [class_name(labels, class_id) for class_id in classes], "matrix": matrix}


def per_class_rates(matrix: Sequence[Sequence[int]]) -> list[tuple[float | None, float | None, int]]:
    """(precision, recall, support) per class of a confusion matrix (rows true, columns predicted); None where
    a class was never predicted (precision) or never occurs (recall)."""
    rates = []
    for position, row in enumerate(matrix):
        support = sum(row)
        predicted = sum(other[position] for other in matrix)
        hits = row[position]
        rates.append((hits / predicted if predicted else None, hits / support if support else None, support))
    return rates


def thumbnail_png(encoded: bytes, pixels: int = THUMBNAIL_PIXELS) -> str:
    """An image (JPEG or PNG bytes) as a base64 PNG no larger than `pixels` on its longer side."""
    from PIL import Image

    with Image.open(io.BytesIO(encoded)) as image:
        image.thumbnail((pixels, pixels))
        converted = image.convert("L" if image.mode in ("L", "1", "I;16") else "RGB")
        buffer = io.BytesIO()
        converted.save(buffer, format="PNG", optimize=True)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _examples(files: Sequence[str], limit: int) -> Iterator[list[bytes]]:
    """Serialized examples of gzipped TFRecord files (ImportExampleGen's output), in batches, at most `limit`."""
    import tensorflow as tf

    dataset = tf.data.TFRecordDataset(list(files), compression_type="GZIP").take(limit).batch(BATCH)
    for batch in dataset:
        yield [record.numpy() for record in batch]  # type: ignore[union-attr]


def misclassified(
    saved_model_dir: str,
    eval_files: Sequence[str],
    labels: Sequence[str],
    label_offset: int,
    limit: int = MAX_SCANNED,
    keep: int = KEEP,
) -> tuple[list[dict[str, Any]], int]:
    """The eval images the model classifies wrongly with the highest confidence.

    Args:
        saved_model_dir: The Trainer's SavedModel (`Format-Serving`).
        eval_files: The eval split's TFRecord files (gzipped, as ImportExampleGen writes them).
        labels: Class names by class id.
        label_offset: `data.label_offset`: the example's label minus it is the class id.
        limit: Examples to scan.
        keep: Images to return.

    Returns:
        ([{"png", "true", "predicted", "confidence"}, ...] most confident first, examples scanned).
    """
    import numpy as np
    import tensorflow as tf

    model = tf.saved_model.load(saved_model_dir)
    predict = model.signatures[SIGNATURE_TF_EXAMPLE]
    wrong: list[tuple[float, bytes, int, int]] = []
    scanned = 0
    for batch in _examples(eval_files, limit):
        probabilities = predict(**{INPUT_EXAMPLES: tf.constant(batch)})[OUTPUT_PROBABILITIES].numpy()
        for serialized, row in zip(batch, probabilities, strict=True):
            example = tf.train.Example.FromString(serialized)
            features = example.features.feature
            truth = int(features[LABEL_KEY].int64_list.value[0]) - label_offset
            predicted = int(np.argmax(row))
            if predicted != truth:
                wrong.append((float(row[predicted]), features[IMAGE_KEY].bytes_list.value[0], truth, predicted))
        scanned += len(batch)
    wrong.sort(key=lambda item: -item[0])
    shown = [
        {
            "png": thumbnail_png(image),
            "true": class_name(labels, truth),
            "predicted": class_name(labels, predicted),
            "confidence": round(confidence, 4),
        }
        for confidence, image, truth, predicted in wrong[:keep]
    ]
    return shown, scanned


def eval_files(examples_uri: str) -> list[str]:
    """The eval split's files of an Examples artifact (`Split-eval/*`)."""
    return [path for path in paths.children(f"{examples_uri.rstrip('/')}/Split-eval") if paths.is_file(path)]


def saved_model_dir(model_uri: str) -> str:
    """The SavedModel inside a Trainer `model` artifact (TFX's `Format-Serving`), or the artifact itself."""
    serving = f"{model_uri.rstrip('/')}/Format-Serving"
    return serving if paths.is_dir(serving) else model_uri
