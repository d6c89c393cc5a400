"""components.baseline.reason: one line per verdict, naming the served version the model was compared with."""

from __future__ import annotations

import pytest

from components.baseline.reason import Baseline, blessing_reason, refused_by_load_check

SERVED = "1796083574"


def served(accuracy: float | None) -> Baseline:
    """The served version SERVED, whose eval accuracy is `accuracy`."""
    return Baseline("served", SERVED, accuracy)


@pytest.mark.parametrize(
    ("blessed", "accuracy", "baseline", "expected"),
    [
        pytest.param(
            True,
            0.95,
            Baseline(),
            "pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9, no served model yet",
            id="first-run",
        ),
        pytest.param(
            False,
            0.85,
            Baseline(),
            "not pushed: eval accuracy 0.85 < evaluator.min_accuracy 0.9, no served model yet",
            id="first-run-below-minimum",
        ),
        pytest.param(
            True,
            0.9625,
            served(0.95),
            f"pushed: eval accuracy 0.963 ≥ evaluator.min_accuracy 0.9 and 0.013 above the served version {SERVED} "
            "(0.95)",
            id="better-than-served",
        ),
        pytest.param(
            True,
            0.95,
            served(0.95),
            f"pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9 and equal to the served version {SERVED} (0.95)",
            id="equal-to-served",
        ),
        pytest.param(
            True,
            0.946,
            served(0.95),
            f"pushed: eval accuracy 0.946 ≥ evaluator.min_accuracy 0.9 and 0.004 below the served version {SERVED} "
            "(0.95), within evaluator.max_accuracy_drop 0.01",
            id="slightly-worse-within-drop",
        ),
        pytest.param(
            False,
            0.921,
            served(0.973),
            f"not pushed: eval accuracy 0.921 is 0.052 below the served version {SERVED} (0.973); "
            "evaluator.max_accuracy_drop is 0.01",
            id="worse-than-served",
        ),
        pytest.param(
            False,
            0.5,
            served(0.95),
            f"not pushed: eval accuracy 0.5 < evaluator.min_accuracy 0.9, and 0.45 below the served version {SERVED} "
            "(0.95); evaluator.max_accuracy_drop is 0.01",
            id="below-minimum-and-worse",
        ),
        pytest.param(
            False,
            0.85,
            served(0.84),
            f"not pushed: eval accuracy 0.85 < evaluator.min_accuracy 0.9, 0.01 above the served version {SERVED} "
            "(0.84)",
            id="below-minimum-but-better",
        ),
        pytest.param(
            True,
            0.95,
            Baseline("none"),
            "pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9; evaluator.baseline is none, so not compared "
            "with the served model",
            id="baseline-none",
        ),
    ],
)
def test_reason_names_the_check_that_decided(blessed: bool, accuracy: float, baseline: Baseline, expected: str) -> None:
    assert blessing_reason(blessed, accuracy, baseline, min_accuracy=0.9, max_accuracy_drop=0.01) == expected


def test_exactly_at_the_allowed_drop_is_within_it() -> None:
    text = blessing_reason(True, 0.94, served(0.95), 0.9, 0.01)
    assert text.endswith("0.01 below the served version 1796083574 (0.95), within evaluator.max_accuracy_drop 0.01")


def test_a_rerun_without_new_data_says_nothing_was_pushed() -> None:
    text = blessing_reason(True, 0.95, served(0.95), 0.9, 0.01, already_served=SERVED)
    assert text == f"no new data, nothing pushed: version {SERVED} already holds this model (eval accuracy 0.95)"


def test_a_rerun_of_a_refused_model_says_there_was_no_new_data() -> None:
    text = blessing_reason(False, 0.944, served(0.992), 0.9, 0.01, no_new_data=True)
    assert text == (
        f"no new data, nothing pushed: eval accuracy 0.944 is 0.048 below the served version {SERVED} (0.992); "
        "evaluator.max_accuracy_drop is 0.01"
    )


def test_tfma_messages_explain_a_refusal_the_checks_do_not() -> None:
    failures = ["example_count: lower_bound 1000 not met"]
    text = blessing_reason(False, 0.95, served(0.95), 0.9, 0.01, failures)
    assert text.startswith("not pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9 and equal to")
    assert text.endswith("(TFMA: example_count: lower_bound 1000 not met)")
    # A refusal the accuracy checks explain does not repeat TFMA's wording.
    assert "TFMA" not in blessing_reason(False, 0.5, Baseline(), 0.9, 0.01, failures)


def test_missing_accuracies_are_said_plainly() -> None:
    assert blessing_reason(False, None, Baseline(), 0.9, 0.01) == "not pushed: the Evaluator produced no accuracy"
    text = blessing_reason(True, 0.95, served(None), 0.9, 0.01)
    assert text == f"pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9; the served version {SERVED} has no " + (
        "accuracy on this eval split"
    )


def test_a_blessed_model_the_load_check_refused_says_the_load_check_decided() -> None:
    evaluator = blessing_reason(True, 0.95, Baseline(), 0.9, 0.01)
    did_not_load = "the model did not load: tfxp local server exited with status 1"
    assert refused_by_load_check(evaluator, did_not_load) == (
        f"not pushed: the load check failed: {did_not_load}; the Evaluator had blessed it "
        "(eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9, no served model yet)"
    )
    assert refused_by_load_check(evaluator, did_not_load, no_new_data=True).startswith(
        f"no new data, nothing pushed: the load check failed: {did_not_load}; "
    )
    assert refused_by_load_check(None, did_not_load).endswith("; the Evaluator had blessed it")
