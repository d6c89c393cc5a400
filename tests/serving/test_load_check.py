"""The load check (`serving.load_check`): the comparison on its own, then real checks of tiny exported models served
by tfxp's server in a child process: one that passes, and ones that fail for a real reason, each saying why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from serving_fixtures import (
    image_example,
    random_png,
    tiny_classifier,
    write_classification_version,
    write_model_version,
)

from serving import load_check
from serving.load_check import (
    Answers,
    LoadCheckError,
    LoadCheckResult,
    Mismatch,
    check_model_serving,
    compare_answers,
    in_process_answers,
)
from serving.server_process import LOCAL_SERVER

IMAGES = [random_png(8, 1, seed) for seed in range(6)]
EXAMPLES = [image_example(image).SerializeToString() for image in IMAGES]


def _answers(probabilities: list[list[float]]) -> Answers:
    array = np.asarray(probabilities, dtype=np.float32)
    return Answers(array, array.argmax(axis=1))


def test_equal_answers_agree() -> None:
    answers = _answers([[0.9, 0.1], [0.2, 0.8]])
    comparison = compare_answers(answers, answers)
    assert comparison.agrees and comparison.examples == 2 and comparison.max_abs_difference == 0.0


def test_a_gap_within_the_tolerance_agrees_and_one_beyond_it_does_not() -> None:
    expected = _answers([[0.9, 0.1], [0.2, 0.8]])
    close = _answers([[0.90005, 0.09995], [0.2, 0.8]])
    assert compare_answers(expected, close, atol=1e-4).agrees
    far = _answers([[0.9, 0.1], [0.25, 0.75]])
    comparison = compare_answers(expected, far, atol=1e-4)
    assert not comparison.agrees
    assert comparison.mismatches == (
        Mismatch(index=1, expected_class=1, served_class=1, max_abs_difference=pytest.approx(0.05)),
    )
    assert comparison.max_abs_difference == pytest.approx(0.05)


def test_another_top_class_is_a_mismatch_and_the_line_names_it() -> None:
    comparison = compare_answers(_answers([[0.9, 0.1], [0.2, 0.8]]), _answers([[0.9, 0.1], [0.8, 0.2]]), atol=1.0)
    # Within any tolerance, the top class still has to be the same.
    assert [(m.index, m.expected_class, m.served_class) for m in comparison.mismatches] == [(1, 1, 0)]
    assert comparison.describe().startswith(
        "1 of 2 examples answered unlike in-process (atol 1): example 1: top class 0 served, 1 in-process"
    )


def test_answers_of_another_shape_are_refused_naming_both_shapes() -> None:
    with pytest.raises(LoadCheckError, match=r"shape \(1, 3\) .* in-process ones \(1, 2\)"):
        compare_answers(_answers([[0.9, 0.1]]), _answers([[0.8, 0.1, 0.1]]))


def test_the_result_round_trips_through_json() -> None:
    result = LoadCheckResult(
        passed=False,
        reason="1 of 2 examples answered unlike in-process",
        server=LOCAL_SERVER,
        model_name="digits",
        examples_compared=2,
        max_abs_difference=0.6,
        mismatches=(Mismatch(1, 1, 0, 0.6),),
        load_seconds=3.2,
    )
    assert LoadCheckResult.from_json(result.to_json()) == result
    assert json.loads(result.to_json())["mismatches"] == [
        {"index": 1, "expected_class": 1, "served_class": 0, "max_abs_difference": 0.6}
    ]


def test_bad_arguments_are_refused_before_anything_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="at least one example"):
        check_model_serving("/nowhere", [], "digits", 10)
    with pytest.raises(ValueError, match="timeout_seconds must be positive, got 0"):
        check_model_serving("/nowhere", EXAMPLES, "digits", 0)
    monkeypatch.setattr(load_check, "tf_serving_binary", lambda: None)
    with pytest.raises(ValueError, match="no tensorflow_model_server is on PATH"):
        check_model_serving("/nowhere", EXAMPLES, "digits", 10, server="tensorflow_model_server")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("load-check")
    return {
        "model": write_model_version(base / "a", 1, tiny_classifier(8, 1, 3, seed=0), warmup_images=IMAGES[:2]),
        "other": write_model_version(base / "b", 1, tiny_classifier(8, 1, 3, seed=1)),
        "classify_only": write_classification_version(base / "c", 1, tiny_classifier(8, 1, 3)),
    }


@pytest.mark.slow  # a server in a child process
def test_a_model_that_loads_and_answers_like_in_process_passes(models: dict[str, Path]) -> None:
    result = check_model_serving(str(models["model"]), EXAMPLES, "digits", 60, server="local")
    assert result.passed, result.reason
    assert (result.server, result.version, result.examples_compared) == (LOCAL_SERVER, 1, len(EXAMPLES))
    assert result.max_abs_difference is not None and result.max_abs_difference <= 1e-4
    assert result.load_seconds is not None and result.load_seconds > 0
    assert result.reason.startswith("version 1 loaded in tfxp local server in ")
    assert f"answered all {len(EXAMPLES)} examples like in-process" in result.reason


@pytest.mark.slow  # a server in a child process
def test_a_corrupt_warmup_file_means_the_version_never_becomes_available(
    models: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(models["model"], broken)
    (broken / "assets.extra" / "tf_serving_warmup_requests").write_bytes(b"not a TFRecord file")
    result = check_model_serving(str(broken), EXAMPLES, "digits", 60, server="local")
    assert not result.passed
    assert result.reason.startswith("the model did not load: version 1 of digits in tfxp local server")
    assert "ended (UNKNOWN: " in result.reason and "not a TFRecord file of PredictionLog protos" in result.reason
    assert "failed to load" in result.server_log  # the server's own log line, kept in the result
    assert (result.examples_compared, result.load_seconds) == (0, None)


@pytest.mark.slow  # a server in a child process
def test_answers_unlike_the_reference_fail_naming_the_examples(models: dict[str, Path]) -> None:
    # The served model is `model`; the reference answers are another model's (other weights), in-process.
    reference = in_process_answers(str(models["other"]), EXAMPLES)
    result = check_model_serving(str(models["model"]), EXAMPLES, "digits", 60, server="local", expected=reference)
    assert not result.passed
    assert f"examples answered unlike in-process (atol 0.0001): example {result.mismatches[0].index}:" in result.reason
    assert result.max_abs_difference is not None and result.max_abs_difference > 1e-4
    assert result.examples_compared == len(EXAMPLES)


@pytest.mark.slow  # a server in a child process
def test_a_model_without_the_tf_example_signature_loads_but_does_not_answer(models: dict[str, Path]) -> None:
    result = check_model_serving(str(models["classify_only"]), EXAMPLES, "digits", 60, server="local")
    assert not result.passed
    assert result.reason.startswith("the model loaded but did not answer: predict on examples 0-5 failed with ")
    assert "serving_tf_example" in result.reason
