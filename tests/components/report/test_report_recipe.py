"""The Training section's recipe and the Trainer's diagnosis: the recipe's facts and its learning-rate plot, a
page from training metrics written before either was recorded, and a broken model's symptoms and causes on the
page and in the run's reason."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from report_fixtures import run_summary, section_of

from components.report import evaluation
from components.report.build import build_page, report_html
from components.report.facts import RunFacts
from components.report.inputs import ReportInputs, summarize
from components.report.page import Alert, Facts, Figure, Missing, Paragraph, Section
from components.report.recipe_section import NOT_RECORDED

WARMUP, STEPS, PEAK = 5005, 112_590, 2.048
# Linear warmup to the peak, then cosine to 0, as the Trainer records it (fewer points than its 200).
CURVE = [[step, PEAK * (step + 1) / WARMUP] for step in range(0, WARMUP, 500)] + [
    [step, 0.5 * PEAK * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP)))]
    for step in range(WARMUP, STEPS, 600)
]
RECIPE: dict[str, Any] = {
    "description": "sgd, momentum 0.875, weight decay 3.05e-05 (not on batch_norm, bias), cosine schedule, peak "
    "2.048 at global batch 2048, warmup 5005 steps, label smoothing 0.1",
    "optimizer": {
        "name": "sgd",
        "momentum": 0.875,
        "nesterov": True,
        "weight_decay": 3.05e-05,
        "decay_exclude": ["batch_norm", "bias"],
        "lars_eta": 0.001,
        "beta_1": 0.9,
        "beta_2": 0.999,
        "epsilon": 1e-07,
    },
    "optimizer_class": "SGD",
    "schedule": {
        "name": "cosine",
        "learning_rate": 0.256,
        "base_batch_size": 256,
        "warmup_steps": 0,
        "warmup_epochs": 8.0,
        "warmup_fraction": 0.0,
        "boundaries": [],
        "factors": [],
        "power": 2.0,
        "end_learning_rate": 0.0,
    },
    "peak_learning_rate": PEAK,
    "warmup_steps": WARMUP,
    "train_steps": STEPS,
    "label_smoothing": 0.1,
    "decayed_in_loss": 54,
    "model": "resnet50",
    "zero_gamma": True,
    "augment": ["crop", "flip"],
    "crop_area": [0.08, 1.0],
    "crop_aspect": [0.75, 1.3333],
    "eval_crop": 0.875,
    "curve": CURVE,
}
BROKEN = {
    "broken": True,
    "symptoms": [
        "training accuracy 0.95 but eval accuracy 0.37",
        "answers one class for 100% of the eval images",
    ],
    "likely_causes": [
        "the schedule: a peak rate too high for the optimizer (trainer.schedule.learning_rate, ...)",
        "BatchNorm statistics: the moving means and variances lag the weights",
        "the preprocessing: eval images differ from training images; check data.label_offset",
    ],
}
TRAINING = {"model": "resnet50", "steps": STEPS, "images_per_second": 2900.0, "final_accuracy": 0.76}


def _training_section(training: dict[str, Any]) -> tuple[Section, str]:
    facts = RunFacts("/out", run_summary(metrics={"accuracy": 0.76, "training": training}))
    return section_of(build_page(facts), "training"), report_html(facts)


def test_a_recorded_recipe_shows_its_facts_and_the_learning_rate_schedule() -> None:
    section, page = _training_section({**TRAINING, "recipe": RECIPE})

    assert [b.text for b in section.blocks if isinstance(b, Paragraph)] == [f"Recipe: {RECIPE['description']}."]
    facts = dict(next(b for b in section.blocks if isinstance(b, Facts) and dict(b.items).get("optimizer")).items)
    assert facts["model"] == "resnet50 (each residual block's last BatchNorm γ starts at 0)"
    assert facts["optimizer"] == "sgd (SGD), momentum 0.875, Nesterov"
    assert facts["weight decay"] == "λ 3.05e-05, not on batch norm, bias, added to the loss for 54 variables"
    assert facts["schedule"] == "cosine, from the peak to 0 at the last step"
    assert facts["peak learning rate"] == (
        "2.048 (trainer.schedule.learning_rate 0.256 per 256 images, scaled to the global batch)"
    )
    assert facts["warmup"] == "5,005 of 112,590 steps (4% of the run), linear to the peak"
    assert facts["end learning rate"].endswith(f"at step {CURVE[-1][0]:,}")
    assert facts["label smoothing"] == "0.1"
    assert facts["training crop"] == "random, 8%–100% of the image's area, aspect (width / height) 0.75–1.33"
    assert facts["eval crop"] == "central, 87.5% of the shorter side, then resized"
    (figure,) = [b for b in section.blocks if isinstance(b, Figure) and 'data-plot="schedule"' in b.svg]
    desc = re.search(r'<desc id="schedule-desc">([^<]+)</desc>', figure.svg)
    assert desc is not None
    assert f"Learning rate at {len(CURVE)} optimizer steps from 0 to {CURVE[-1][0]:,}" in desc[1]
    assert "peaks at 2.048 at step 5,005" in desc[1] and "the warmup ends at step 5,005" in desc[1]
    assert "warmup ends (step 5,005)" in figure.svg  # the marker's legend entry, as text in the SVG
    assert "Learning rate per step (cosine schedule)" in page and "sgd (SGD), momentum 0.875, Nesterov" in page
    assert not [b for b in section.blocks if isinstance(b, Alert)]
    assert "The recipe is not recorded" not in page and "No learning-rate plot" not in page


@pytest.mark.parametrize(
    ("changes", "label", "expected"),
    [
        ({"name": "lars", "nesterov": False}, "optimizer", "lars (SGD), momentum 0.875, trust coefficient η 0.001"),
        ({"name": "adamw"}, "optimizer", "adamw (SGD), β₁ 0.9, β₂ 0.999, ε 1e-07"),
        ({"weight_decay": 0.0}, "weight decay", "none"),
        ({"decay_exclude": []}, "weight decay", "λ 3.05e-05, on every variable, added to the loss for 54 variables"),
    ],
    ids=["lars", "adamw", "no-decay", "decay-everywhere"],
)
def test_each_optimizer_is_described_by_what_it_uses(changes: dict[str, Any], label: str, expected: str) -> None:
    recipe = copy.deepcopy(RECIPE)
    recipe["optimizer"].update(changes)
    section, _ = _training_section({**TRAINING, "recipe": recipe})
    facts = dict(next(b for b in section.blocks if isinstance(b, Facts) and dict(b.items).get("optimizer")).items)
    assert facts[label] == expected


def test_training_metrics_from_before_the_recipe_still_render_and_say_it_is_not_recorded() -> None:
    section, page = _training_section(dict(TRAINING))

    assert NOT_RECORDED in [b.text for b in section.blocks if isinstance(b, Missing)]
    assert not [b for b in section.blocks if isinstance(b, Alert)]
    assert 'data-plot="schedule"' not in page
    assert "The recipe is not recorded" in page and "looks broken" not in page


def test_a_recipe_with_an_unusable_curve_has_its_facts_and_says_there_is_no_plot() -> None:
    recipe = {**RECIPE, "curve": [[0, "x"], [1, float("nan")], "junk", [2]]}
    section, page = _training_section({**TRAINING, "recipe": recipe, "diagnosis": {"broken": "yes"}})

    assert "No learning-rate plot: the recipe records no schedule curve." in [
        b.text for b in section.blocks if isinstance(b, Missing)
    ]
    assert "sgd (SGD), momentum 0.875, Nesterov" in page and 'data-plot="schedule"' not in page
    assert not [b for b in section.blocks if isinstance(b, Alert)]  # "broken" must be true, not merely truthy


def test_a_broken_model_is_an_alert_with_its_symptoms_and_numbered_causes() -> None:
    section, page = _training_section({**TRAINING, "recipe": RECIPE, "diagnosis": BROKEN})

    (alert,) = [b for b in section.blocks if isinstance(b, Alert)]
    assert section.blocks.index(alert) == 1  # right under the section's lead
    assert alert.title == "The trained model looks broken:"
    assert alert.text == (
        "training accuracy 0.95 but eval accuracy 0.37; answers one class for 100% of the eval images. Likely "
        "causes: (1) the schedule: a peak rate too high for the optimizer (trainer.schedule.learning_rate, ...); "
        "(2) BatchNorm statistics: the moving means and variances lag the weights; (3) the preprocessing: eval "
        "images differ from training images; check data.label_offset."
    )
    assert '<p class="alert" role="note"><strong>The trained model looks broken:</strong> training accuracy' in page


def test_a_diagnosis_that_is_not_broken_shows_nothing() -> None:
    healthy = {"broken": False, "symptoms": [], "likely_causes": []}
    section, page = _training_section({**TRAINING, "recipe": RECIPE, "diagnosis": healthy})
    assert not [b for b in section.blocks if isinstance(b, Alert)] and "looks broken" not in page


@pytest.fixture
def tfma(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """TFMA's readers, answering what the test puts in the returned dict (an exception: raised)."""
    answers: dict[str, Any] = {"metrics": {"candidate": {"sparse_categorical_accuracy": 0.37}}, "failures": []}

    def metrics(uri: str) -> Any:
        if isinstance(answers["metrics"], Exception):
            raise answers["metrics"]
        return answers["metrics"]

    monkeypatch.setattr(evaluation, "evaluation_metrics", metrics)
    monkeypatch.setattr(evaluation, "validation_failures", lambda uri: answers["failures"])
    return answers


def _summary(tmp_path: Path, training: dict[str, Any]) -> dict[str, Any]:
    model = tmp_path / "Trainer" / "model"
    model.mkdir(parents=True)
    (model / "training_metrics.json").write_text(json.dumps(training))
    inputs = ReportInputs(
        config={"evaluator": {"min_accuracy": 0.9, "baseline": "none"}},
        model_uri=str(model),
        evaluation_uri=str(tmp_path / "evaluation"),
        blessed=False,
    )
    return summarize(inputs).to_json_dict()


def test_a_broken_model_names_its_symptoms_and_causes_in_the_runs_reason(tmp_path: Path, tfma: dict[str, Any]) -> None:
    summary = _summary(tmp_path, {**TRAINING, "recipe": RECIPE, "diagnosis": BROKEN})

    assert summary["decision"] == "not pushed"
    assert summary["blessing_reason"] == (
        "not pushed: eval accuracy 0.37 < evaluator.min_accuracy 0.9; evaluator.baseline is none, so not compared "
        "with the served model; the Trainer's own evaluation says the model is broken: training accuracy 0.95 but "
        "eval accuracy 0.37; answers one class for 100% of the eval images; likely causes: (1) the schedule: a peak "
        "rate too high for the optimizer (trainer.schedule.learning_rate, ...); (2) BatchNorm statistics: the moving "
        "means and variances lag the weights; (3) the preprocessing: eval images differ from training images; check "
        "data.label_offset"
    )
    decision = section_of(build_page(RunFacts("/out", summary)), "decision")
    reasons = [b.text for b in decision.blocks if isinstance(b, Paragraph) and b.text.startswith("Reason: ")]
    assert reasons == [f"Reason: {summary['blessing_reason']}"]


def test_an_unreadable_evaluation_still_names_the_broken_models_causes(tmp_path: Path, tfma: dict[str, Any]) -> None:
    tfma["metrics"] = OSError("no such file")
    summary = _summary(tmp_path, {**TRAINING, "diagnosis": BROKEN})

    assert summary["blessing_reason"].startswith(
        f"not pushed: the Evaluator's output in {tmp_path / 'evaluation'} could not be read; the Trainer's own "
        "evaluation says the model is broken: training accuracy 0.95"
    )


@pytest.mark.parametrize("diagnosis", [None, {"broken": False, "symptoms": [], "likely_causes": []}])
def test_a_model_not_diagnosed_broken_keeps_the_plain_reason(
    tmp_path: Path, tfma: dict[str, Any], diagnosis: dict[str, Any] | None
) -> None:
    training = dict(TRAINING) if diagnosis is None else {**TRAINING, "diagnosis": diagnosis}
    summary = _summary(tmp_path, training)
    assert summary["blessing_reason"] == (
        "not pushed: eval accuracy 0.37 < evaluator.min_accuracy 0.9; evaluator.baseline is none, so not compared "
        "with the served model"
    )
