"""The sections about the model: Training, Evaluation and Edge.

Each function takes the run's facts and returns a `Section`; what is missing (a component that did not run, an
output that could not be read, no edge model, no baseline yet) is said on the page, never raised. The Data section
is `components.report.data_section`.
"""

from __future__ import annotations

from typing import Any

from components.report import plots, recipe_section, text
from components.report.absence import absent
from components.report.evaluation import per_class_rates
from components.report.facts import RunFacts
from components.report.page import (
    Facts,
    Figure,
    ImageGrid,
    Lead,
    Missing,
    Name,
    Paragraph,
    Section,
    Table,
    Thumbnail,
)

CHOICES = ("strategy", "precision", "xla")
"""The Trainer's runtime choices, each recorded with its reason in training_metrics.json."""


def training_section(facts: RunFacts) -> Section:
    """Loss and accuracy per epoch, images/s and step-time percentiles, the precision/XLA/strategy choices, the
    recipe with its learning-rate schedule, and the Trainer's alert when it says the model is broken."""
    training = facts.summary.get("metrics", {}).get("training") or {}
    blocks: list[Any] = []
    if not training and not facts.curves:
        return Section("training", "Training", [absent(facts, "Trainer", "training metrics")])
    if training:
        blocks.append(
            Lead(
                f"{training.get('model', 'model')}: {_steps(training)} at "
                f"{text.number(training.get('images_per_second'), 0)} images/s"
            )
        )
        blocks += recipe_section.diagnosis_blocks(training)
    panels = _panels(facts.curves, training)
    if panels:
        epochs = max(len(points) for series in panels.values() for points in series.values())
        desc = "Per-epoch loss and accuracy on the train split" + (
            ", and the eval split's after training (single point)" if training.get("final_accuracy") else ""
        )
        svg = plots.curves("curves", "Loss and accuracy per epoch", desc + f"; {epochs} epochs.", panels, "epoch")
        blocks.append(Figure(svg, "Train curves per epoch; eval measured once after training."))
    else:
        blocks.append(absent(facts, "Trainer", "TensorBoard scalars"))
    if training:
        blocks.append(
            Facts(
                (
                    ("images/s", text.number(training.get("images_per_second"), 0)),
                    (
                        "step time p50 / p90 / p99",
                        " / ".join(text.number(training.get(f"step_time_ms_p{q}"), 1) for q in (50, 90, 99)) + " ms",
                    ),
                    ("global batch", text.number(training.get("global_batch"), 0)),
                    ("replicas", text.number(training.get("replicas"), 0)),
                    ("fit time", text.seconds(training.get("fit_seconds"))),
                    ("final train loss / accuracy", _pair(training, "final_train_loss", "final_train_accuracy")),
                    ("eval loss / accuracy", _pair(training, "final_loss", "final_accuracy")),
                )
            )
        )
        reasons = training.get("reasons") or {}
        rows = tuple((name, _choice(training.get(name)), str(reasons.get(name, ""))) for name in CHOICES)
        blocks.append(Table("Runtime choices", ("choice", "value", "why"), rows))
        blocks += recipe_section.recipe_blocks(training)
    return Section("training", "Training", blocks)


def _steps(training: dict[str, Any]) -> str:
    """The steps the model has trained: this run's, plus those restored from an interrupted run's backup."""
    steps, restored = training.get("steps"), training.get("steps_restored") or 0
    if not restored or steps is None:
        return f"{text.number(steps, 0)} steps"
    total = int(steps) + int(restored)
    return (
        f"{text.number(total, 0)} steps ({text.number(steps, 0)} this run, {text.number(restored, 0)} restored "
        "from an interrupted run's backup)"
    )


def _choice(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return text.NOT_KNOWN if value is None else str(value)


def _pair(values: dict[str, Any], first: str, second: str) -> str:
    return f"{text.number(values.get(first))} / {text.number(values.get(second))}"


def _panels(
    curves: dict[str, dict[str, list[list[float]]]], training: dict[str, Any]
) -> dict[str, dict[str, list[list[float]]]]:
    """metric → series → [[epoch (1-based), value]]: train (and validation) per epoch, eval after training."""
    panels: dict[str, dict[str, list[list[float]]]] = {}
    last_epoch = 0.0
    for run, series in curves.items():
        for metric in ("loss", "accuracy"):
            points = [[step + 1, value] for step, value in series.get(metric, [])]
            if points:
                panels.setdefault(metric, {})[run] = points
                last_epoch = max(last_epoch, points[-1][0])
    for metric, key in (("loss", "final_loss"), ("accuracy", "final_accuracy")):
        if metric in panels and training.get(key) is not None:
            panels[metric]["eval (after training)"] = [[last_epoch, float(training[key])]]
    return panels


def evaluation_section(facts: RunFacts, min_accuracy: float | None) -> Section:
    """Accuracy against min_accuracy and the baseline, the confusion matrix, per-class precision and recall, the
    most confidently misclassified images."""
    metrics = facts.summary.get("metrics", {})
    accuracy = metrics.get("accuracy")
    if accuracy is None:
        return Section("evaluation", "Evaluation", [absent(facts, "Evaluator", "evaluation")])
    count = metrics.get("example_count")
    blocks: list[Any] = [Lead(f"Eval accuracy {accuracy:.4f} on {text.number(count, 0)} examples")]
    bars = [("this model", float(accuracy))]
    baseline = _baseline_accuracy(facts.summary)
    if baseline is not None:
        bars.append(("baseline", baseline))
    else:
        blocks.append(Paragraph("No baseline yet: there was no earlier model to compare with, only min_accuracy."))
    if min_accuracy is not None:
        desc = f"This model's eval accuracy {accuracy:.4f}" + (
            f" and the baseline's {baseline:.4f}" if baseline is not None else ""
        )
        svg = plots.accuracy_bars(
            "accuracy", "Accuracy against the gate", f"{desc}; min_accuracy {min_accuracy}.", bars, min_accuracy
        )
        blocks.append(Figure(svg, "Eval accuracy; the dashed line is evaluator.min_accuracy."))
    confusion = facts.confusion
    if confusion:
        labels, matrix = confusion["labels"], confusion["matrix"]
        wrong = sum(value for r, row in enumerate(matrix) for c, value in enumerate(row) if r != c)
        svg = plots.heat_map(
            "confusion",
            "Confusion matrix",
            f"{len(labels)} by {len(labels)} grid of eval example counts, true class by row, predicted class by "
            f"column; {wrong} examples off the diagonal.",
            labels,
            matrix,
        )
        blocks.append(Figure(svg, f"TFMA's multi-class confusion matrix: {wrong} eval examples misclassified."))
        rows = tuple(
            (Name(label), text.number(precision, 3), text.number(recall, 3), text.number(support, 0))
            for label, (precision, recall, support) in zip(labels, per_class_rates(matrix), strict=True)
        )
        blocks.append(
            Table("Per-class precision and recall", ("class", "precision", "recall", "examples"), rows, (1, 2, 3))
        )
    else:
        blocks.append(absent(facts, "Evaluator", "confusion matrix"))
    blocks.append(_misclassified(facts))
    return Section("evaluation", "Evaluation", blocks)


def _baseline_accuracy(summary: dict[str, Any]) -> float | None:
    baseline = summary.get("baseline")
    if isinstance(baseline, dict) and baseline.get("accuracy") is not None:
        return float(baseline["accuracy"])
    value = summary.get("metrics", {}).get("baseline_accuracy")
    return float(value) if value is not None else None


def _misclassified(facts: RunFacts) -> Any:
    if "misclassified" in facts.not_available:
        return Missing(facts.not_available["misclassified"])
    if not facts.misclassified_scanned:
        problems = [p for p in facts.problems if "predictions" in p.get("error", "")]
        why = problems[0]["error"] if problems else "the Trainer's model or the eval split is not available"
        return Missing(f"No misclassified images: {why}.")
    if not facts.misclassified:
        return Paragraph(f"No misclassified images among {facts.misclassified_scanned:,} eval examples.")
    images = tuple(
        Thumbnail(
            item["png"],
            f"eval image of class {item['true']}, predicted {item['predicted']} "
            f"with confidence {item['confidence']:.2f}",
            f"true {text.short_name(item['true'])} → {text.short_name(item['predicted'])} ({item['confidence']:.0%})",
        )
        for item in facts.misclassified
    )
    caption = (
        f"The {len(images)} most confidently misclassified of {facts.misclassified_scanned:,} eval examples "
        "(true class → predicted class, confidence)"
    )
    return ImageGrid(caption, images)


def edge_section(facts: RunFacts) -> Section:
    """Size, accuracy and latency of the device model, next to the SavedModel."""
    summary = facts.summary
    enabled = (summary.get("config") or {}).get("edge", {}).get("enabled", True)
    edge = summary.get("edge")
    if not enabled:
        return Section("edge", "Edge", [Missing("No edge model: edge.enabled is false in this run's config.")])
    if not edge:
        return Section("edge", "Edge", [absent(facts, "EdgeExporter", "edge model")])
    metrics = summary.get("metrics", {})
    blocks: list[Any] = [Lead(f"TFLite ({edge.get('mode')}): {edge.get('status', '').replace('_', ' ')}")]
    if edge.get("reason"):
        blocks.append(Paragraph(str(edge["reason"])))
    if edge.get("status") == "skipped" or metrics.get("edge_accuracy") is None:
        blocks.append(Missing("No edge measurements: the EdgeExporter skipped conversion."))
        return Section("edge", "Edge", blocks)
    rows = (
        (
            "SavedModel (served)",
            text.size(facts.saved_model_bytes),
            text.number(metrics.get("edge_saved_model_accuracy")),
            "not measured",
            "not measured",
        ),
        (
            f"TFLite {edge.get('mode')} ({edge.get('io_dtype') or 'float32'} input)",
            text.size(metrics.get("edge_size_bytes")),
            text.number(metrics.get("edge_accuracy")),
            text.number(metrics.get("edge_latency_p50_ms"), 3),
            text.number(metrics.get("edge_latency_p99_ms"), 3),
        ),
    )
    blocks.append(
        Table(
            "Exported models on the eval split (latency: LiteRT on this machine's CPU, one image)",
            ("model", "size", "accuracy", "p50 latency (ms)", "p99 latency (ms)"),
            rows,
            numeric=(1, 2, 3, 4),
        )
    )
    if summary.get("edge_model_path"):
        blocks.append(Facts((("device model", str(summary["edge_model_path"])),)))
    return Section("edge", "Edge", blocks)
