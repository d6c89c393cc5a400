"""The gate never ranks a candidate against a served model of other classes: it decides by min_accuracy alone."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from components.baseline.comparable import label_map_mismatch
from components.baseline.driver import ServedModelDriver
from components.baseline.evaluator import holds_model
from components.baseline.executor import Executor
from components.baseline.reason import Baseline, blessing_reason
from foundation.contract import INPUT_EXAMPLES, LABELS_ASSET, SIGNATURE_EVAL_LABELS, SIGNATURE_TF_EXAMPLE

DIGITS = [str(digit) for digit in range(10)]


def _served(base: Path, version: str, labels: list[str] | None) -> Path:
    """A loadable SavedModel with the eval signatures as `base/version`, with `labels` as its label map asset."""
    module = tf.Module()
    module.scale = tf.Variable(2.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_EXAMPLES)])
    def count(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"count": tf.cast(tf.size(examples), tf.float32) * module.scale}

    target = base / version
    signatures = {name: count.get_concrete_function() for name in (SIGNATURE_TF_EXAMPLE, SIGNATURE_EVAL_LABELS)}
    tf.saved_model.save(module, str(target), signatures=signatures)
    if labels is not None:
        (target / LABELS_ASSET).parent.mkdir(exist_ok=True)
        (target / LABELS_ASSET).write_text("\n".join(labels) + "\n")
    return target


def _baseline(tmp_path: Path, base: Path, labels: list[str]) -> standard_artifacts.Model:
    labels_path = tmp_path / "labels.txt"
    labels_path.write_text("\n".join(labels) + "\n")
    baseline = standard_artifacts.Model()
    baseline.uri = str(tmp_path / "ServedBaseline" / "baseline_model" / "1")
    Path(baseline.uri).mkdir(parents=True)
    properties = {"base_path": str(base), "labels_path": str(labels_path), "served_fingerprint": ""}
    Executor().Do({}, {"baseline_model": [baseline]}, properties)
    return baseline


@pytest.mark.parametrize(
    ("served", "run", "expected"),
    [
        (
            ["cat", "dog", "eel"],
            DIGITS,
            "its label map has 3 classes (cat, dog, eel), this run's 10 (0, 1, 2, 3, 4, ...)",
        ),
        (["0", "2", "1"], ["0", "1", "2"], "its label map differs from this run's at line 2 (2 against 1)"),
        (DIGITS, DIGITS, None),
    ],
)
def test_label_maps_are_comparable_only_when_equal(served: list[str], run: list[str], expected: str | None) -> None:
    assert label_map_mismatch(served, run) == expected


def test_a_served_model_of_other_classes_is_not_handed_to_the_evaluator(tmp_path: Path) -> None:
    base = tmp_path / "serving"
    _served(base, "100", ["cat", "dog", "eel"])

    baseline = _baseline(tmp_path, base, DIGITS)

    assert not holds_model(baseline)  # the Evaluator then drops the change threshold: min_accuracy alone
    assert baseline.get_string_custom_property("served_version") == "100"
    assert baseline.get_string_custom_property("not_compared").startswith("its label map has 3 classes")


@pytest.mark.parametrize("labels", [DIGITS, None])
def test_a_served_model_with_the_run_label_map_or_none_is_compared(tmp_path: Path, labels: list[str] | None) -> None:
    base = tmp_path / "serving"
    _served(base, "100", labels)

    baseline = _baseline(tmp_path, base, DIGITS)

    assert holds_model(baseline)
    assert baseline.get_string_custom_property("not_compared") == ""


def test_the_baseline_reruns_when_the_run_label_map_changes(tmp_path: Path) -> None:
    base = tmp_path / "serving"
    _served(base, "100", DIGITS)
    labels = tmp_path / "labels.txt"

    def fingerprint() -> str:
        info = SimpleNamespace(exec_properties={"base_path": str(base), "labels_path": str(labels)})
        return ServedModelDriver(None).fingerprint(info)

    labels.write_text("\n".join(DIGITS) + "\n")
    first = fingerprint()
    labels.write_text("a\nb\nc\n")
    assert fingerprint() != first


@pytest.mark.parametrize(
    ("blessed", "accuracy", "expected"),
    [
        (
            True,
            0.95,
            "pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9; not compared with the served version 100: "
            "its label map has 3 classes, so decided by evaluator.min_accuracy only",
        ),
        (
            False,
            0.5,
            "not pushed: eval accuracy 0.5 < evaluator.min_accuracy 0.9; not compared with the served version 100: "
            "its label map has 3 classes, so decided by evaluator.min_accuracy only",
        ),
    ],
)
def test_the_reason_says_the_served_model_was_not_compared(blessed: bool, accuracy: float, expected: str) -> None:
    baseline = Baseline("served", "100", None, not_compared="its label map has 3 classes")
    assert blessing_reason(blessed, accuracy, baseline, 0.9, 0.01) == expected


@pytest.mark.parametrize("not_compared", ["its label map has 3 classes (cat, dog, eel), this run's 10", ""])
def test_the_run_summary_says_the_gate_did_not_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, not_compared: str
) -> None:
    """`tfxp run` prints the blessing reason; the summary's baseline says why it was not compared (only then)."""
    from components.report import evaluation
    from components.report.inputs import ReportInputs, summarize

    monkeypatch.setattr(
        evaluation, "evaluation_metrics", lambda uri: {"candidate": {"sparse_categorical_accuracy": 0.95}}
    )
    monkeypatch.setattr(evaluation, "validation_failures", lambda uri: [])
    config = {"evaluator": {"baseline": "served", "min_accuracy": 0.9, "max_accuracy_drop": 0.01}}
    baseline = {"version": "100", "path": "/serving/100", "not_compared": not_compared}
    inputs = ReportInputs(config=config, evaluation_uri=str(tmp_path), blessed=True, baseline=baseline)

    written = summarize(inputs).to_json_dict()

    if not_compared:
        assert written["baseline"]["not_compared"] == not_compared
        assert written["blessing_reason"] == (
            f"pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9; not compared with the served version 100: "
            f"{not_compared}, so decided by evaluator.min_accuracy only"
        )
    else:  # a compared baseline keeps the keys run-summary.json always had
        assert set(written["baseline"]) == {"mode", "version", "path", "accuracy"}
        assert "not compared" not in written["blessing_reason"]
