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
