"""The class a Predict or Classify answer predicts, named from the version's label map, for per-version metrics.

A tfxp version carries its label map as `foundation.contract.LABELS_ASSET`; its serving signatures answer
`OUTPUT_CLASSES` (int64 [batch], the top class id) beside `OUTPUT_PROBABILITIES` (float32 [batch, C]). A Classify
answer carries class names and scores. Each answer row is named by one of the label map's classes or `OTHER`, so
a metric labelled with it has at most the label map's classes plus one series, whatever clients send or a
model answers. A version without a (readable) label map names no classes.

Example:
    names = label_names(Path("out/serving/digits/3"))              # ("0", "1", ..., "9")
    predicted_classes({"classes": np.array([7, 1])}, names)        # ["7", "1"]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from tensorflow_serving.apis import classification_pb2

from foundation.contract import LABELS_ASSET, OUTPUT_CLASSES, OUTPUT_PROBABILITIES, LabelMapError, read_label_map

logger = logging.getLogger(__name__)

OTHER = "other"  # a predicted class outside the version's label map


def label_names(version_dir: Path) -> tuple[str, ...]:
    """The class names of the version at `version_dir` (its `LABELS_ASSET`); () without a readable one."""
    path = version_dir / LABELS_ASSET
    if not path.is_file():
        return ()
    try:
        return tuple(read_label_map(path))
    except LabelMapError as error:
        logger.warning("%s: predicted classes are not counted: %s", version_dir, error)
        return ()


def predicted_classes(outputs: Mapping[str, np.ndarray], names: Sequence[str]) -> list[str]:
    """The top class of each row of a Predict answer: `OUTPUT_CLASSES`, else the argmax of
    `OUTPUT_PROBABILITIES`; [] when the answer has neither in the contract's shape or `names` is empty."""
    if not names:
        return []
    ids = outputs.get(OUTPUT_CLASSES)
    if ids is None or ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        probabilities = outputs.get(OUTPUT_PROBABILITIES)
        if probabilities is None or probabilities.ndim != 2 or not np.issubdtype(probabilities.dtype, np.floating):
            return []
        ids = probabilities.argmax(axis=-1) if probabilities.shape[1] else np.empty(0, np.int64)
    return [names[i] if 0 <= i < len(names) else OTHER for i in ids.tolist()]


def classified_classes(result: classification_pb2.ClassificationResult, names: Sequence[str]) -> list[str]:
    """The top class of each example of a Classify answer (the highest score; the first without scores), as
    named in `names`, else `OTHER`; [] when `names` is empty."""
    if not names:
        return []
    known = set(names)
    top = []
    for classifications in result.classifications:
        if not classifications.classes:
            continue
        best = max(classifications.classes, key=lambda entry: entry.score)
        top.append(best.label if best.label in known else OTHER)
    return top
