"""The Data section of the report: examples per split and class, validation anomalies, the drift checks between
spans and the spans used.

Each function takes the run's facts and returns blocks; what is missing (no statistics, no validation result) is
said on the page, never raised.
"""

from __future__ import annotations

from typing import Any

from components.report import plots, text
from components.report.absence import absent
from components.report.facts import RunFacts
from components.report.page import Facts, Figure, Lead, Missing, Name, Paragraph, Section, Table

SPLIT_ORDER = {"train": 0, "eval": 1}
MAX_PLOTTED_LABELS = 60
"""Labels up to which the label distribution per span is a bar plot; past it, a table of each span's extremes."""


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
        blocks.append(absent(facts, "StatisticsGen", "example counts"))
    if facts.anomalies is None:
        blocks.append(absent(facts, "ExampleValidator", "validation result"))
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
