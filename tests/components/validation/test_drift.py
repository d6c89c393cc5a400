"""Drift checks between spans, the parts without a pipeline: distances, thresholds, decisions, the accept list, the
per-span statistics cache and the factory wiring (`components.validation.drift*`, `span_statistics`)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from tensorflow_metadata.proto.v0 import anomalies_pb2

from components.data.span_damage import rewrite_span
from components.validation.drift import (
    AGREEMENT,
    DRIFT,
    JENSEN_SHANNON,
    L_INFINITY,
    SKEW,
    Finding,
    agreement_findings,
    decide,
    findings_from_anomalies,
    measure_drift,
    measure_skew,
    stop_decision,
    stop_message,
    summary_entry,
)
from components.validation.drift_check import (
    EARLIER_SPANS,
    SERVED_SPANS,
    DriftRun,
    check_drift,
    previous_spans,
)
from components.validation.drift_options import DriftOptions
from components.validation.span_statistics import image_properties, span_split_files, span_tables, split_statistics
from foundation.data.spans import inside_span
from foundation.data.tfrecords import make_example
from pipeline.component_settings import drift_run
from pipeline.config import ConfigError, build_config
from pipeline.layout import output_layout

OPTIONS = DriftOptions()


def _finding(span: int = 4, distance: float = 0.3, threshold: float = 0.1) -> Finding:
    return Finding(
        span, DRIFT, "label", L_INFINITY, distance, threshold, "data.drift.label_linf", "against spans 1,2,3"
    )


def test_only_findings_above_their_threshold_count_and_action_decides_stop_or_warning() -> None:
    over, within = _finding(distance=0.3), _finding(distance=0.05)
    failed = decide([over, within], "fail", accept=())
    assert failed.stops == (over,) and failed.warnings == () and failed.findings == (over, within)
    warned = decide([over, within], "warn", accept=())
    assert warned.stops == () and warned.warnings == (over,)
    assert decide([within], "fail", accept=()).stops == ()


def test_an_accepted_span_never_stops_and_is_recorded_as_accepted() -> None:
    on_four, on_five = _finding(span=4), _finding(span=5)
    decision = decide([on_four, on_five], "fail", accept=(4,))
    assert decision.stops == (on_five,)
    assert decision.accepted == (on_four,)
    assert decision.to_dict()["accepted"] == [on_four.describe()]


def test_the_stop_message_names_span_feature_distance_threshold_and_key() -> None:
    message = stop_message(decide([_finding(distance=0.301)], "fail", accept=()))
    assert "span 4" in message and "feature 'label'" in message
    assert "L-infinity distance 0.301 above the threshold 0.1 (data.drift.label_linf)" in message
    assert "data.drift.accept=4`" in message and "data.drift.action=warn" in message
    assert "[" not in message  # rich would read square brackets as markup


def test_the_run_summary_entry_holds_warnings_accepted_findings_and_a_stop() -> None:
    warned = json.dumps([_finding().describe()])
    assert summary_entry({"drift_warnings": warned, "drift_accepted": "[]"}, None) == {
        "warnings": [_finding().describe()]
    }
    stop = "component ExampleValidator failed: DriftError: " + stop_message(decide([_finding()], "fail", ()))
    assert summary_entry({}, stop) == {"stopped": stop}
    # A stopped validator publishes nothing: the distances come from the DriftError's record.
    record = dataclasses.replace(decide([_finding()], "fail", ()), label_counts={4: {"7": 12}}).to_dict()
    assert summary_entry({}, stop, record) == {
        "stopped": stop,
        "findings": record["findings"],
        "label_counts": {"4": {"7": 12}},
    }
    assert summary_entry({}, "component Trainer failed: OOM", record) == {}
    assert summary_entry({"drift_warnings": None}, "component Trainer failed: OOM") == {}


def test_findings_are_read_from_tfdv_drift_and_skew_measurements_with_the_key_of_their_threshold() -> None:
    anomalies = anomalies_pb2.Anomalies()
    info = anomalies.drift_skew_info.add()
    info.path.step.append("brightness")
    measurement = info.drift_measurements.add()
    measurement.type = anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE
    measurement.value, measurement.threshold = 0.69, 0.1
    skew = anomalies.drift_skew_info.add()
    skew.path.step.append("label")
    skew_measurement = skew.skew_measurements.add()
    skew_measurement.type = anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY
    skew_measurement.value, skew_measurement.threshold = 0.2, 0.1

    drift = findings_from_anomalies(4, DRIFT, anomalies, OPTIONS, "against span 3")
    assert [(f.feature, f.measure, f.key, f.exceeded) for f in drift] == [
        ("brightness", JENSEN_SHANNON, "data.drift.image_js", True)
    ]
    skewed = findings_from_anomalies(4, SKEW, anomalies, OPTIONS, "eval against train")
    assert [(f.feature, f.key, round(f.distance, 2)) for f in skewed] == [("label", "data.drift.skew_label_linf", 0.2)]


def _table(labels: list[int], brightness: float = 0.3, size: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    count = len(labels)
    return pd.DataFrame({
        "label": [str(label) for label in labels],
        "height": [float(size)] * count,
        "width": [float(size)] * count,
        "channels": [1.0] * count,
        "brightness": rng.normal(brightness, 0.02, count),
        "contrast": rng.normal(0.4, 0.02, count),
        "format": ["PNG"] * count,
    })  # fmt: skip


def _worst(findings: list[Finding]) -> dict[str, float]:
    return {finding.feature: finding.distance for finding in findings}


def test_tfdv_measures_a_many_to_one_remap_brightening_and_resizing_above_the_defaults_and_clean_spans_below() -> None:
    balanced = [label for _ in range(30) for label in range(10)]
    previous = split_statistics(_table(balanced))
    clean = measure_drift(4, split_statistics(_table(balanced)), previous, OPTIONS, "")
    assert not [finding for finding in clean if finding.exceeded], clean

    remapped = [7 if label in (1, 2, 3) else label for label in balanced]
    many_to_one = _worst(measure_drift(4, split_statistics(_table(remapped)), previous, OPTIONS, ""))
    assert many_to_one["label"] == pytest.approx(0.3, abs=0.01) and many_to_one["label"] > OPTIONS.label_linf

    brighter = _worst(measure_drift(4, split_statistics(_table(balanced, brightness=0.5)), previous, OPTIONS, ""))
    assert brighter["brightness"] > OPTIONS.image_js and brighter["label"] < OPTIONS.label_linf
    resized = _worst(measure_drift(4, split_statistics(_table(balanced, size=16)), previous, OPTIONS, ""))
    assert resized["height"] > OPTIONS.image_js and resized["width"] > OPTIONS.image_js


def test_skew_compares_the_eval_split_with_the_train_split_of_the_same_span() -> None:
    balanced = [label for _ in range(30) for label in range(10)]
    train = split_statistics(_table(balanced))
    same = measure_skew(4, train, split_statistics(_table(balanced)), OPTIONS)
    assert same and not [finding for finding in same if finding.exceeded]
    drifted = _worst(measure_skew(4, train, split_statistics(_table(balanced, brightness=0.6)), OPTIONS))
    assert drifted["brightness"] > OPTIONS.skew_image_js


def test_agreement_findings_are_the_drop_below_the_previous_spans_agreement() -> None:
    findings = agreement_findings(4, 0.97, {"train": 0.42, "eval": 0.95}, OPTIONS, "on spans 1,2,3")
    by_split = {finding.feature: finding for finding in findings}
    assert by_split["train labels"].check == AGREEMENT
    assert by_split["train labels"].distance == pytest.approx(0.55) and by_split["train labels"].exceeded
    assert not by_split["eval labels"].exceeded
    assert by_split["train labels"].key == "data.drift.agreement_drop"


def test_drift_is_on_by_default_only_with_spans_and_configured_under_data_drift() -> None:
    assert not DriftOptions().is_on("none") and DriftOptions().is_on("all") and DriftOptions().is_on(3)
    assert not DriftOptions(enabled=False).is_on("all") and DriftOptions(enabled=True).is_on("none")
    config = build_config({}, ["data.drift.action=warn", "data.drift.accept=[4, 5]", "data.drift.label_linf=0.2"])
    assert config.data.drift.action == "warn" and config.data.drift.accept == (4, 5)
    assert build_config({}, ["data.drift.accept=4"]).data.drift.accept == (4,)
    assert build_config({}, ["data.drift.accept=4,6"]).data.drift.accept == (4, 6)
    with pytest.raises(ConfigError, match=r"data\.drift\.action"):
        build_config({}, ["data.drift.action=ignore"])


def test_the_factory_hands_the_validator_the_checks_with_the_cache_under_the_pipeline_output() -> None:
    assert drift_run(build_config({}), output_layout(build_config({}))) == ""
    config = build_config({}, ["data.spans=all", "data.path=gs://b/stream", "pipeline.output=gs://b/out"])
    run = DriftRun.from_json(drift_run(config, output_layout(config)))
    assert run.cache_dir == "gs://b/out/statistics" and run.input_base == "gs://b/stream"
    assert run.serving_base == output_layout(config).serving_base
    assert {split: inside_span(pattern) for split, pattern in run.split_patterns.items()} == {
        "train": "train/*",
        "eval": "eval/*",
    }


def _png(value: int, size: int = 8) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((size, size), value, dtype=np.uint8), mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def test_image_properties_are_size_channels_format_brightness_and_contrast() -> None:
    properties = image_properties(_png(51, size=6))
    assert properties == {"height": 6.0, "width": 6.0, "channels": 1.0, "brightness": pytest.approx(0.2),
                          "contrast": pytest.approx(0.0, abs=1e-6), "format": "PNG",
                          "thumbnail": bytes([51] * 64)}  # fmt: skip


def _write_span(root: Path, span: int, labels: list[int]) -> None:
    import tensorflow as tf

    for split in ("train", "eval"):
        folder = root / f"span-{span}" / split
        folder.mkdir(parents=True)
        with tf.io.TFRecordWriter(str(folder / "part-00000-of-00001.tfrecord")) as writer:
            for index, label in enumerate(labels):
                writer.write(make_example(_png(40 + index % 50), label).SerializeToString())


def test_span_statistics_are_cached_under_the_cache_dir_by_fingerprint_and_recomputed_when_the_files_change(
    tmp_path: Path,
) -> None:
    data, cache = tmp_path / "data", tmp_path / "out" / "statistics"
    _write_span(data, 1, list(range(10)) * 3)
    patterns = {"train": "train/*", "eval": "eval/*"}
    files = span_split_files(str(data), "span-1", 1, patterns)
    first, cached = span_tables(files, str(cache), image_sample=100)
    assert not cached and len(first["train"]) == 30
    again, cached = span_tables(span_split_files(str(data), "span-1", 1, patterns), str(cache), image_sample=100)
    assert cached and again["train"].equals(first["train"])
    assert sorted(path.name for path in data.rglob("*") if path.is_file()) == ["part-00000-of-00001.tfrecord"] * 2

    # 300 takes one more byte than 1: the size changes too (tf.io.gfile's modification time is in whole seconds)
    rewrite_span(data / "span-1", data / "span-1", relabel={1: 300})
    changed, cached = span_tables(span_split_files(str(data), "span-1", 1, patterns), str(cache), image_sample=100)
    assert not cached and "1" not in set(changed["train"]["label"])


def test_check_drift_stops_a_remapped_span_and_warn_or_accept_let_it_through(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for span in (1, 2, 3):
        _write_span(data, span, list(range(10)) * 3)
    _write_span(data, 4, [7 if label in (1, 2, 3) else label for label in list(range(10)) * 3])
    patterns = {"train": "span-*/train/*", "eval": "span-*/eval/*"}

    def run(**options: object) -> DriftRun:
        return DriftRun(
            DriftOptions(**options), str(data), patterns, "all", str(tmp_path / "cache"), str(tmp_path / "none")
        )

    decision = check_drift(run())
    assert [(finding.span, finding.feature) for finding in decision.stops] == [(4, "label")]
    assert "against spans 1,2,3" in decision.stops[0].describe()
    assert check_drift(run(action="warn")).warnings == decision.stops
    accepted = check_drift(run(accept=(4,)))
    assert accepted.stops == () and accepted.accepted == decision.stops
    assert json.loads(json.dumps(decision.to_dict()))["stops"] == [decision.stops[0].describe()]
    # The label distribution of every span up to the newest, in label order (the report's plot).
    assert decision.label_counts[1] == {str(label): 3 for label in range(10)}
    assert decision.label_counts[4] == {"0": 3, "4": 3, "5": 3, "6": 3, "7": 12, "8": 3, "9": 3}
    assert list(decision.to_dict()["label_counts"]) == ["1", "2", "3", "4"]

    # A refused span stays refused when a newer span arrives; spans that passed are not judged again.
    _write_span(data, 5, list(range(10)) * 3)
    later = check_drift(run())
    assert [(finding.span, finding.feature) for finding in later.stops] == [(4, "label")]
    assert {finding.span for finding in later.findings} == {4, 5}
    assert len(list((tmp_path / "cache").glob("span-*/*/passed-*.json"))) == 4  # spans 1, 2, 3 and 5


def test_a_drift_stop_on_kubeflow_files_a_run_record_the_notice_names_span_and_why(tmp_path: Path) -> None:
    from components.notify.notice import notice_text, parse_final_status, run_outcome
    from components.notify.run_record import read_run_record
    from components.validation.strict_example_validator import record_drift_stop

    decision = decide([_finding(distance=0.301)], "fail", accept=())
    records = str(tmp_path / "serving" / "runs")
    # Open-source KFP: <root>/<pipeline>/<run id>/<task>/<uuid>/<output>; the record is named after the run id.
    uri = "minio://mlpipeline/v2/artifacts/tfxp-digits/7d0c/ExampleValidator/ab12/anomalies"
    assert Path(record_drift_stop(records, uri, decision)).name == "7d0c.json"
    record = read_run_record(records, "7d0c")
    assert record is not None and (record.stopped_at, record.trained, record.pushed_version) == (
        "ExampleValidator",
        False,
        None,
    )
    # Open-source KFP's final status names neither the task nor the error: the record does.
    outcome = run_outcome(parse_final_status({"state": "FAILED", "error": {}}), run_id="7d0c",
                          blessed=record.blessed, decision=record.decision, stopped_at=record.stopped_at)  # fmt: skip
    assert notice_text("tfxp-digits", outcome) == (
        ":x: tfxp-digits run 7d0c failed at ExampleValidator: stopped by the drift check: span 4, feature 'label' "
        "(drift against spans 1,2,3): L-infinity distance 0.301 above the threshold 0.1 (data.drift.label_linf); "
        "if the change is real: --set data.drift.accept=4"
    )
    assert stop_decision(decision) == record.decision
    # No task folder in the URI: no run to name, nothing written (the stop itself stands).
    assert record_drift_stop(records, "/out/anomalies/7", decision) == ""


def test_the_previous_spans_are_the_served_models_else_every_earlier_one() -> None:
    assert previous_spans(5, [1, 2, 3, 4, 5], served_spans=(1, 2, 3)) == ([1, 2, 3], SERVED_SPANS)
    assert previous_spans(3, [1, 2, 3, 4], served_spans=(1, 2, 3, 4)) == ([1, 2], SERVED_SPANS)  # only older ones
    assert previous_spans(5, [1, 2, 3, 4, 5], served_spans=None) == ([1, 2, 3, 4], EARLIER_SPANS)
    assert previous_spans(5, [3, 4, 5], served_spans=(1, 2)) == ([3, 4], EARLIER_SPANS)  # its spans were removed
    assert previous_spans(1, [1, 2], served_spans=(2,)) == ([], EARLIER_SPANS)


def test_a_refused_span_the_served_model_never_saw_is_not_the_reference_for_the_next(tmp_path: Path) -> None:
    from foundation.publish import PUSH_RECORD

    data, serving = tmp_path / "data", tmp_path / "serving"
    for span in (1, 2, 3, 5):
        _write_span(data, span, list(range(10)) * 3)
    _write_span(data, 4, [7] * 30)  # refused: never trained on
    patterns = {"train": "span-*/train/*", "eval": "span-*/eval/*"}
    # agreement_drop 1: no agreement check (the version below is no model); the drift checks read its record.
    options = DriftOptions(agreement_drop=1, accept=(4,))

    def judged_five() -> Finding:
        run = DriftRun(options, str(data), patterns, "all", str(tmp_path / f"cache-{len(list(tmp_path.iterdir()))}"),
                       str(serving))  # fmt: skip
        return next(f for f in check_drift(run).findings if f.span == 5 and f.check == DRIFT and f.feature == "label")

    # Nothing served yet: span 5 against every earlier span, the refused span 4 (all 7s) among them.
    assert "(drift against spans 1,2,3,4)" in judged_five().describe()
    assert judged_five().distance > 0.1
    (serving / "100").mkdir(parents=True)
    (serving / "100" / "saved_model.pb").write_bytes(b"pb")
    (serving / "100" / PUSH_RECORD).write_text(json.dumps({"identity": "m", "version": 100, "spans": [1, 2, 3]}))
    # Served: the model trained on spans 1,2,3; span 5 is compared with those, and passes.
    five = judged_five()
    assert "(drift against spans 1,2,3, the served model's)" in five.describe()
    assert five.distance == pytest.approx(0.0)
