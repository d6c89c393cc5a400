"""The sections about the run as a whole: Decision, Components and History.

Each function takes the run's facts and returns a `Section`; what is missing (a failed run, no ML Metadata, a first
run) is said on the page, never raised.
"""

from __future__ import annotations

import datetime
from typing import Any

import yaml

from components.report import plots, text
from components.report.facts import RunFacts
from components.report.page import Collapsed, Facts, Figure, Lead, Missing, Paragraph, Section, Table
from serving.rollout.state import describe_rollout

STATE_WORDS = {"complete": "ran", "cached": "cached", "failed": "failed"}


DRIFT_STOP = "stopped by the drift check"
"""The summary's decision when the drift checks stopped the run (`components.validation.drift.STOPPED_DECISION`)."""


def decision(facts: RunFacts) -> tuple[str, str]:
    """The run's outcome in words and its tone: (`pushed`, `good`), (`not pushed`, `bad`), (`no new data`,
    `neutral`), (`stopped by the drift check`, `bad`) or (`failed in <component>`, `bad`)."""
    summary = facts.summary
    if summary.get("decision") == DRIFT_STOP:
        return DRIFT_STOP, "bad"
    if summary.get("status") == "failed":
        return f"failed in {summary.get('failed_component') or 'an unknown component'}", "bad"
    outcome = summary.get("decision") or ("pushed" if summary.get("pushed_model_dir") else "not pushed")
    return outcome, {"pushed": "good", "not pushed": "bad"}.get(outcome, "neutral")


def baseline_words(summary: dict[str, Any]) -> str:
    """What the Evaluator compared the model with, in words."""
    baseline = summary.get("baseline")
    if isinstance(baseline, dict):  # the served-model baseline (evaluator.baseline)
        if baseline.get("mode") == "none":
            return "none (evaluator.baseline: none)"
        if not baseline.get("version"):
            return "none yet: nothing was served when the run started"
        if baseline.get("not_compared"):
            return f"nothing: served version {baseline['version']} not compared ({baseline['not_compared']})"
        return f"served version {baseline['version']} (accuracy {text.number(baseline.get('accuracy'))})"
    accuracy = summary.get("metrics", {}).get("baseline_accuracy")
    if accuracy is not None:
        return f"the latest blessed model (accuracy {text.number(accuracy)})"
    if summary.get("blessing_reason") is None:
        return "not known: the Evaluator did not run"
    return "none yet: no earlier model was blessed"


def load_check_words(check: dict[str, Any]) -> str:
    """The load check's outcome in words, e.g. `passed in tfxp local server: 64 eval examples answered as
    in-process`."""
    server = check.get("server") or "the serving process"
    if check.get("passed"):
        return f"passed in {server}: {check.get('examples_compared', 0)} eval examples answered as in-process"
    return f"failed in {server}: {check.get('reason') or 'no reason recorded'}"


def _finished(facts: RunFacts) -> list[str]:
    return [step["component"] for step in facts.timeline if step.get("status") in ("complete", "cached")]


def decision_section(facts: RunFacts) -> Section:
    """Blessed or not, the pushed version, the baseline, the reason, wall time, the config that ran."""
    summary = facts.summary
    outcome, tone = decision(facts)
    blocks: list[Any] = []
    pushed = text.version_of(summary.get("pushed_model_dir"))
    if outcome == DRIFT_STOP:
        blocks += _drift_stop_blocks(summary)
    elif summary.get("status") == "failed":
        blocks.append(Lead(f"The run failed in {summary.get('failed_component') or 'an unknown component'}", tone))
        finished = _finished(facts)
        got = f"It got as far as: {', '.join(finished)}." if finished else "No component finished."
        blocks.append(Paragraph(f"{got} Nothing was pushed; previously pushed models are untouched."))
        blocks.append(Paragraph(f"Why it stopped: {text.first_line(summary.get('error'), 600)}"))
    elif pushed:
        blocks.append(Lead(f"Pushed version {pushed}", tone))
    else:
        blocks.append(Lead(outcome.capitalize() + ": the served version (if any) is unchanged", tone))
    if summary.get("blessing_reason"):
        blocks.append(Paragraph(f"Reason: {summary['blessing_reason']}"))
    items = [
        ("blessed", "yes" if summary.get("blessed") else "no"),
        ("pushed version", pushed or "none this run"),
        ("compared with", baseline_words(summary)),
        ("eval accuracy", text.number(summary.get("metrics", {}).get("accuracy"))),
        ("wall time", text.seconds(summary.get("wall_seconds"))),
    ]
    if summary.get("served_version"):
        items.insert(2, ("served now", str(summary["served_version"])))
    if isinstance(summary.get("load_check"), dict):
        items.insert(1, ("load check", load_check_words(summary["load_check"])))
    if summary.get("pushed_model_dir"):
        items.append(("served model", str(summary["pushed_model_dir"])))
    if summary.get("rollout"):
        items.append(("rollout", describe_rollout(summary["rollout"])))
    blocks.append(Facts(tuple(items)))
    problems = [*summary.get("problems", []), *facts.problems]
    if problems:
        rows = tuple((p.get("component", ""), p.get("error", ""), p.get("path", "")) for p in problems)
        blocks.append(Missing(f"{len(problems)} output(s) could not be read; the sections they feed say so."))
        blocks.append(Table("Outputs that could not be read", ("component", "error", "path"), rows))
    config = summary.get("config")
    if config:
        blocks.append(Collapsed("The config that ran", yaml.safe_dump(config, sort_keys=False, allow_unicode=True)))
    else:
        blocks.append(Missing("The run summary holds no config."))
    return Section("decision", "Decision", blocks)


def _drift_stop_blocks(summary: dict[str, Any]) -> list[Any]:
    """The decision card of a drift stop: the span, each finding that stopped it, and the ways out."""
    message = str(((summary.get("data") or {}).get("drift") or {}).get("stopped") or summary.get("error") or "")
    lines = [line.strip() for line in message.splitlines()]
    findings = tuple((line[2:],) for line in lines if line.startswith("- "))
    headline = lines[0].split("DriftError: ", 1)[-1] if lines else "a span does not look like the spans before it"
    advice = [line for line in lines[1:] if line and not line.startswith("- ")]
    blocks: list[Any] = [
        Lead(f"Stopped by the drift check: {headline.rstrip(':')}", "bad"),
        Paragraph("Nothing was trained or pushed; the served version (if any) is unchanged (see Data for every "
                  "distance measured)."),
    ]  # fmt: skip
    if findings:
        blocks.append(Table(f"What stopped the run ({len(findings)})", ("finding",), findings))
    if advice:
        blocks.append(Paragraph(" ".join(advice)))
    return blocks


def components_section(facts: RunFacts) -> Section:
    """A timeline of each component's start, duration and state (ran, cached, failed)."""
    steps = facts.timeline
    if "components" in facts.not_available:
        return Section("components", "Components", [Missing(facts.not_available["components"])])
    if not steps:
        return Section("components", "Components", [Missing("No component ran: the run stopped during setup.")])
    starts = [step["start"] for step in steps if step.get("start") is not None]
    origin = min(starts) if starts else None
    blocks: list[Any] = []
    rows = []
    bars = []
    for step in steps:
        state = STATE_WORDS.get(step.get("status") or "", step.get("status") or "unknown")
        offset = step["start"] - origin if origin is not None and step.get("start") is not None else None
        rows.append((step["component"], state, text.seconds(offset), text.seconds(step.get("seconds"))))
        if offset is not None:
            bars.append((step["component"], offset, float(step.get("seconds") or 0.0), step.get("status") or ""))
    if bars:
        counts = {word: sum(1 for row in rows if row[1] == word) for word in ("ran", "cached", "failed")}
        shown = ", ".join(f"{count} {word}" for word, count in counts.items() if count)
        blocks.append(
            Figure(
                plots.timeline(
                    "timeline",
                    "Component timeline",
                    f"Horizontal bars from each component's start to its end, in seconds since the run started; "
                    f"colour shows the state ({shown}).",
                    bars,
                ),
                f"When each component started and how long it took ({shown}).",
            )
        )
    else:
        blocks.append(Missing("No start times: the run's ML Metadata could not be read, so only durations are shown."))
    blocks.append(
        Table("Components in the order they started", ("component", "state", "start", "duration"), tuple(rows))
    )
    return Section("components", "Components", blocks)


def _outcome(run: dict[str, Any]) -> str:
    if run.get("pushed_version"):
        return "pushed"
    if run.get("status") not in ("complete", "cached"):
        return "failed"
    return "not pushed"


def history_section(facts: RunFacts, min_accuracy: float | None) -> Section:
    """Accuracy of each run and of each served version over time, with the decisions marked."""
    runs = facts.history
    if "history" in facts.not_available:
        return Section("history", "History", [Missing(facts.not_available["history"])])
    if len(runs) < 2:
        reason = (
            "This is the only run in this output's ML Metadata; the history appears from the second run on."
            if runs
            else "No run history: this output has no readable ML Metadata."
        )
        return Section("history", "History", [Paragraph(reason)])
    points = []
    served: list[tuple[Any, float]] = []
    rows = []
    current: tuple[str, float] | None = None
    for run in runs:
        when = datetime.datetime.fromtimestamp(run["time"])
        outcome = _outcome(run)
        points.append((when, run.get("accuracy"), outcome))
        if outcome == "pushed" and run.get("accuracy") is not None:
            current = (str(run["pushed_version"]), float(run["accuracy"]))
        if current is not None:
            served.append((when, current[1]))
        rows.append(
            (
                text.clock(run["time"]),
                text.number(run.get("accuracy")),
                outcome,
                str(run.get("pushed_version") or ""),
                current[0] if current else "none",
            )
        )
    pushes = sum(1 for point in points if point[2] == "pushed")
    figure = plots.history_plot(
        "history",
        "Eval accuracy of each run",
        f"Accuracy of each of {len(runs)} runs over time, marked by decision ({pushes} pushed); the step line is "
        "the accuracy of the version served after each run; the dashed line is min_accuracy.",
        points,
        served,
        min_accuracy,
    )
    return Section(
        "history",
        "History",
        [
            Figure(figure, f"{len(runs)} runs in this output, {pushes} of them pushed a new version."),
            Table(
                "Runs, oldest first",
                ("run start", "eval accuracy", "decision", "pushed version", "served after the run"),
                tuple(rows),
                numeric=(1,),
            ),
        ],
    )
