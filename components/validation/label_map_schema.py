"""A data schema that knows the label map: labels in range, one encoded image per example.

TFX's SchemaGen infers a schema from the very data it should validate, so it learns whatever is wrong
with it (a missing image in 1% of examples becomes "present in 99%"). tfxp starts from the inferred
schema and tightens what the data contract (docs/architecture.md) guarantees. Every other feature (ImageNet's
synsets, texts, bounding boxes, heights and widths) is kept in the schema but deprecated, so TFDV does not
validate it: nothing reads it, and what the train split happened to show (the synsets seen, one box per
image) must not fail the eval split.
"""

from __future__ import annotations

from tensorflow_metadata.proto.v0 import schema_pb2

from foundation.contract import IMAGE_KEY, LABEL_KEY

CONTRACT_FEATURES = (IMAGE_KEY, LABEL_KEY)


def _feature(schema: schema_pb2.Schema, name: str, feature_type: int) -> schema_pb2.Feature:
    for feature in schema.feature:
        if feature.name == name:
            return feature
    feature = schema.feature.add(name=name)
    feature.type = feature_type  # type: ignore[assignment]
    return feature


def _require_single_value(feature: schema_pb2.Feature) -> None:
    feature.presence.min_fraction = 1.0
    feature.presence.min_count = 1
    feature.ClearField("shape")
    feature.value_count.min = 1
    feature.value_count.max = 1


def tighten_schema(schema: schema_pb2.Schema, num_classes: int, label_offset: int = 0) -> schema_pb2.Schema:
    """Returns a copy of `schema` that enforces the data contract for a label map of `num_classes`.

    Every example must carry exactly one `image/encoded` and one `image/class/label` in
    `[label_offset, label_offset + num_classes - 1]`; other features are deprecated (not validated).

    Args:
        schema: Usually TFDV's inferred schema (other features keep their inferred constraints).
        num_classes: Lines in labels.txt.
        label_offset: The first label value (1 for ImageNet's 1-based build script).

    Raises:
        ValueError: `num_classes` < 2.
    """
    if num_classes < 2:
        raise ValueError(f"the label map has {num_classes} class(es); a classifier needs at least 2")
    tightened = schema_pb2.Schema()
    tightened.CopyFrom(schema)
    image = _feature(tightened, IMAGE_KEY, schema_pb2.BYTES)
    _require_single_value(image)
    image.ClearField("domain")  # a tiny train split may show few distinct images; any bytes are fine
    for feature in tightened.feature:
        if feature.name not in CONTRACT_FEATURES:
            feature.lifecycle_stage = schema_pb2.DEPRECATED
    label = _feature(tightened, LABEL_KEY, schema_pb2.INT)
    _require_single_value(label)
    label.ClearField("domain")
    label.int_domain.min = label_offset
    label.int_domain.max = label_offset + num_classes - 1
    return tightened
