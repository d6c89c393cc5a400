"""The label-map schema catches what an inferred schema learns to accept."""

from __future__ import annotations

import pytest
import tensorflow as tf
import tensorflow_data_validation as tfdv

from components.validation.label_map_schema import tighten_schema
from components.validation.strict_example_validator import describe_anomalies


def _examples(rows: list[dict]) -> list[bytes]:
    out = []
    for row in rows:
        feature = {}
        if "image" in row:
            feature["image/encoded"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["image"]]))
        feature["image/class/label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[row["label"]]))
        out.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return out


def _stats(rows: list[dict]):  # type: ignore[no-untyped-def]
    import pyarrow as pa
    from tensorflow_data_validation.statistics import stats_impl
    from tfx_bsl.coders import example_coder

    decoder = example_coder.ExamplesToRecordBatchDecoder()
    batch = decoder.DecodeBatch(_examples(rows))
    return stats_impl.generate_statistics_in_memory(pa.Table.from_batches([batch]).to_batches()[0])


GOOD = [{"image": b"png", "label": label} for label in (0, 1, 2, 1, 0)]


def test_clean_data_has_no_anomalies() -> None:
    schema = tighten_schema(tfdv.infer_schema(_stats(GOOD)), num_classes=3)
    assert not tfdv.validate_statistics(_stats(GOOD), schema).anomaly_info


def test_label_outside_label_map_and_missing_image_are_anomalies() -> None:
    bad = [*GOOD, {"label": 1}, {"image": b"png", "label": 7}]
    # Inferred from the bad data itself, the schema accepts it; the label map does not.
    schema = tighten_schema(tfdv.infer_schema(_stats(bad)), num_classes=3)
    lines = describe_anomalies("eval", tfdv.validate_statistics(_stats(bad), schema))
    text = "\n".join(lines)
    assert "feature 'image/class/label'" in text and "feature 'image/encoded'" in text
    assert "split 'eval'" in text


def test_label_offset_shifts_the_domain() -> None:
    schema = tighten_schema(tfdv.infer_schema(_stats(GOOD)), num_classes=1000, label_offset=1)
    label = next(f for f in schema.feature if f.name == "image/class/label")
    assert (label.int_domain.min, label.int_domain.max) == (1, 1000)


def test_one_class_label_map_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        tighten_schema(tfdv.infer_schema(_stats(GOOD)), num_classes=1)


def _imagenet_example(label: int, synset: str, boxes: int, height: int, extra: bool = False) -> dict:
    return {"image": b"jpeg", "label": label, "synset": synset, "boxes": boxes, "height": height, "extra": extra}


def _imagenet_stats(rows: list[dict]):  # type: ignore[no-untyped-def]
    import pyarrow as pa
    from tensorflow_data_validation.statistics import stats_impl
    from tfx_bsl.coders import example_coder

    serialized = []
    for row in rows:
        feature = {
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["image"]])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[row["label"]])),
            "image/class/synset": tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["synset"].encode()])),
            "image/object/bbox/xmin": tf.train.Feature(float_list=tf.train.FloatList(value=[0.1] * row["boxes"])),
            "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[row["height"]])),
        }
        if row["extra"]:
            feature["image/colorspace"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"RGB"]))
        serialized.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(serialized)
    return stats_impl.generate_statistics_in_memory(pa.Table.from_batches([batch]).to_batches()[0])


def test_features_beyond_the_contract_are_not_validated() -> None:
    # Train shows three synsets, one box per image and one height; eval has other synsets, no or two boxes, other
    # heights and a feature train lacks: none of it matters to tfxp, so none of it is an anomaly.
    train = [_imagenet_example(1 + i % 3, f"n0000000{i % 3}", 1, 100) for i in range(30)]
    evaluation = [_imagenet_example(1 + i % 3, f"n0000001{i % 3}", 2 * (i % 2), 50 + i, extra=True) for i in range(9)]
    schema = tighten_schema(tfdv.infer_schema(_imagenet_stats(train), infer_feature_shape=True), 3, label_offset=1)
    assert not describe_anomalies("eval", tfdv.validate_statistics(_imagenet_stats(evaluation), schema))
    # The contract's features are still checked.
    bad = [*evaluation, _imagenet_example(0, "n00000000", 1, 100)]
    lines = describe_anomalies("eval", tfdv.validate_statistics(_imagenet_stats(bad), schema))
    assert len(lines) == 1 and lines[0].startswith("split 'eval', feature 'image/class/label'")
    assert "check data.labels and data.label_offset" in lines[0] and "1-based labels, offset 1" in lines[0]
