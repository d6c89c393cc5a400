"""The sections about the data and the model: Data, Training, Evaluation and Edge.

Each function takes the run's facts and returns a `Section`; what is missing (a component that did not run, an
output that could not be read, no edge model, no baseline yet) is said on the page, never raised.
"""

from __future__ import annotations

from typing import Any

from components.report import plots, recipe_section, text
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

SPLIT_ORDER = {"train": 0, "eval": 1}
MAX_PLOTTED_LABELS = 60
"""Labels up to which the label distribution per span is a bar plot; past it, a table of each span's extremes."""
CHOICES = ("strategy", "precision", "xla")
"""The Trainer's runtime choices, each recorded with its reason in training_metrics.json."""


def _state(facts: RunFacts, component: str) -> str | None:
    """The component's state in this run (`complete`, `cached`, `failed`, ...), None when it did not start."""
    for step in facts.timeline:
        if step["component"] == component:
            return str(step.get("status"))
    return None


def _absent(facts: RunFacts, component: str, what: str) -> Missing:
    """Why `what` is missing, from what happened to `component`."""
    state = _state(facts, component)
    if state == "failed":
        return Missing(f"No {what}: {component} failed in this run.")
    # An output that could not be read says why, whatever the timeline knows (the RunReport component has none).
    problems = [
        problem
        for problem in (*facts.summary.get("problems", []), *facts.problems)
        if problem.get("component") == component
    ]
    if problems:
        return Missing(f"No {what}: {problems[0]['error']} ({problems[0].get('path', '')})")
    if state is None and "components" in facts.not_available:  # no timeline: only the inputs are known
        return Missing(f"No {what}: {component} did not run in this pipeline (the RunReport got no output of it).")
    if state is None:
        return Missing(f"No {what}: {component} did not run (the run stopped before it).")
    return Missing(f"No {what}: {component} wrote none.")


def data_section(facts: RunFacts) -> Section:
    """Examples per split and class, validation anomalies, spans used."""
    blocks: list[Any] = []
    splits = dict(sorted(facts.splits.items(), key=lambda item: (SPLIT_ORDER.get(item[0], len(SPLIT_ORDER)), item[0])))
    if splits:
        total = sum(int(split["examples"]) for split in splits.values())
        blocks.append(
            Lead(f"{total:,} examples: " + ", ".join(f"{s['examples']:,} {name}" for name, s in splits.items()))
        )
        classes = list(next(iter(splits.values())).get("classes", {}))
        for split in splits.values():
            classes += [name for name in split.get("classes", {}) if name not in classes]
        classes = _label_order(classes)
        if classes:
            series = {name: [split["classes"].get(label, 0) for label in classes] for name, split in splits.items()}
            desc = f"Bars per class ({len(classes)} classes) for each split: " + "; ".join(
                f"{name} {min(values):,} to {max(values):,} examples per class" for name, values in series.items()
            )
            svg = plots.grouped_bars("classes", "Examples per class", desc, classes, series, "examples")
            blocks.append(Figure(svg, f"Examples per class and split (from {facts.splits_source})."))
        else:
            blocks.append(Missing("No per-class counts: the examples carry no image/class/text."))
    else:
        blocks.append(_absent(facts, "StatisticsGen", "example counts"))
    if facts.anomalies is None:
        blocks.append(_absent(facts, "ExampleValidator", "validation result"))
    elif facts.anomalies:
        rows = tuple((line,) for line in facts.anomalies)
        blocks.append(Table(f"Validation anomalies ({len(rows)})", ("anomaly",), rows))
    else:
        blocks.append(Paragraph("Validation anomalies: none (ExampleValidator checked every split)."))
    blocks += drift_blocks(facts)
    blocks.append(Facts((("spans used", _spans(facts.summary)), ("data", str(_data_path(facts.summary))))))
    return Section("data", "Data", blocks)


def _drift_record(facts: RunFacts) -> dict[str, Any]:
    """`drift.json` (the ExampleValidator's record), else the summary's `data.drift` (a stopped validator publishes
    nothing; the summary keeps the stop's distances); {} when the checks did not run."""
    data = facts.summary.get("data")
    entry = data.get("drift") if isinstance(data, dict) else None
    record: dict[str, Any] = dict(entry) if isinstance(entry, dict) else {}
    if facts.drift:
        record.update(facts.drift)
    return record


def _drift_verdict(finding: dict[str, Any], stopped: bool, accept: list[Any]) -> str:
    if not finding.get("exceeded"):
        return "within"
    if finding.get("span") in accept or str(finding.get("span")) in [str(span) for span in accept]:
        return "above: accepted (data.drift.accept)"
    return "above: stopped the run" if stopped else "above: recorded (action: warn)"


def drift_blocks(facts: RunFacts) -> list[Any]:
    """The drift checks between spans (`data.drift`): the label distribution per span, and every distance measured
    against its threshold, as a plot and a table; nothing when the checks did not run."""
    record = _drift_record(facts)
    if not record:
        return []
    blocks: list[Any] = []
    stopped = bool(record.get("stopped"))
    counts = {str(span): dict(labels) for span, labels in (record.get("label_counts") or {}).items()}
    if counts:
        labels: list[str] = []
        for per_span in counts.values():
            labels += [label for label in per_span if label not in labels]
        labels = _label_order(labels)
        series = {
            f"span {span}": [per_span.get(label, 0) / max(sum(per_span.values()), 1) for label in labels]
            for span, per_span in counts.items()
        }
        if len(labels) <= MAX_PLOTTED_LABELS:
            desc = f"Bars per label ({len(labels)} labels) for each span: " + "; ".join(
                f"{name} {min(shares):.1%} to {max(shares):.1%} of its train split" for name, shares in series.items()
            )
            svg = plots.grouped_bars("span-labels", "Label distribution per span", desc, labels, series, "share")
            blocks.append(Figure(svg, "Share of each label (image/class/label) in each span's train split."))
        else:
            share_rows = tuple((name, f"{min(shares):.2%}", f"{max(shares):.2%}") for name, shares in series.items())
            blocks.append(Table(f"Label shares per span ({len(labels)} labels)", ("span", "least", "most"), share_rows,
                                numeric=(1, 2)))  # fmt: skip
    findings = [finding for finding in record.get("findings") or [] if isinstance(finding, dict)]
    accept = list(((facts.summary.get("config") or {}).get("data", {}).get("drift") or {}).get("accept") or [])
    if findings:
        bars = [
            (f"span {f.get('span')} {f.get('feature')} ({f.get('check')})", float(f["distance"]), float(f["threshold"]))
            for f in findings
        ]
        over = sum(1 for finding in findings if finding.get("exceeded"))
        desc = f"{len(findings)} distances, {over} above their threshold: " + "; ".join(
            f"{name} {distance:.3f} against {threshold:g}" for name, distance, threshold in bars
        )
        svg = plots.threshold_bars("drift", "Drift distances against their thresholds", desc, bars)
        blocks.append(Figure(svg, "Each distance as a fraction of its threshold (data.drift.*); past 1 it fires."))
        rows = tuple(
            (str(f.get("span")), str(f.get("check")), Name(str(f.get("feature"))), str(f.get("measure")),
             text.number(f.get("distance"), 3), f"{f.get('threshold'):g}", str(f.get("key")),
             _drift_verdict(f, stopped, accept))
            for f in findings
        )  # fmt: skip
        headers = ("span", "check", "feature", "measure", "distance", "threshold", "key", "verdict")
        blocks.append(Table(f"Drift checks between spans ({len(rows)} distances)", headers, rows, numeric=(4, 5)))
    elif stopped or record.get("warnings"):
        blocks.append(Missing("The drift checks' distances were not recorded; their lines are below."))
    for name, words in (("warnings", "Drift recorded, not stopped"), ("accepted", "Drift accepted")):
        lines = record.get(name) or []
        if lines and not findings:
            blocks.append(Table(f"{words} ({len(lines)})", ("finding",), tuple((str(line),) for line in lines)))
    if not findings and not counts and not stopped and not record.get("warnings") and not record.get("accepted"):
        return []
    return blocks


def _label_order(classes: list[str]) -> list[str]:
    # ASCII digits only: "²".isdigit() is True, but int("²") raises.
    numeric = all(name.isascii() and name.isdigit() for name in classes)
    return sorted(classes, key=int) if numeric else classes


def _spans(summary: dict[str, Any]) -> str:
    data = summary.get("data")
    if not isinstance(data, dict):
        return "not known: ImportExampleGen did not finish"
    spans = data.get("spans_seen")
    return "none (data without span folders)" if not spans else ", ".join(str(span) for span in spans)


def _data_path(summary: dict[str, Any]) -> str:
    return str((summary.get("config") or {}).get("data", {}).get("path", text.NOT_KNOWN))


def training_section(facts: RunFacts) -> Section:
    """Loss and accuracy per epoch, images/s and step-time percentiles, the precision/XLA/strategy choices, the
    recipe with its learning-rate schedule, and the Trainer's alert when it says the model is broken."""
    training = facts.summary.get("metrics", {}).get("training") or {}
    blocks: list[Any] = []
    if not training and not facts.curves:
        return Section("training", "Training", [_absent(facts, "Trainer", "training metrics")])
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
        blocks.append(_absent(facts, "Trainer", "TensorBoard scalars"))
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
        return Section("evaluation", "Evaluation", [_absent(facts, "Evaluator", "evaluation")])
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
        blocks.append(_absent(facts, "Evaluator", "confusion matrix"))
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
        return Section("edge", "Edge", [_absent(facts, "EdgeExporter", "edge model")])
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
