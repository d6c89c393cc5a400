"""The report's drift checks between spans: the Data section's label distribution per span and distances against
their thresholds, and the decision card of a drift stop, from the facts a warned and a stopped run leave."""

from __future__ import annotations

import dataclasses
from typing import Any

from report_fixtures import run_summary, section_of

from components.report.build import build_page
from components.report.facts import RunFacts
from components.report.page import Figure, Lead, Name, Table
from components.report.render import render_page
from components.report.run_sections import DRIFT_STOP
from components.validation.drift import (
    DRIFT,
    JENSEN_SHANNON,
    L_INFINITY,
    STOPPED_DECISION,
    Finding,
    decide,
    stop_message,
)

BALANCED = {str(label): 30 for label in range(10)}
REMAPPED = {"0": 30, "4": 30, "5": 30, "6": 30, "7": 120, "8": 30, "9": 30}


def _findings(label_distance: float) -> list[Finding]:
    return [
        Finding(4, DRIFT, "label", L_INFINITY, label_distance, 0.1, "data.drift.label_linf", "against spans 1,2,3"),
        Finding(4, DRIFT, "brightness", JENSEN_SHANNON, 0.02, 0.1, "data.drift.image_js", "against spans 1,2,3"),
    ]  # fmt: skip


def _record(action: str, accept: tuple[int, ...] = ()) -> dict[str, Any]:
    decision = decide(_findings(0.3), action, accept)
    counts = {1: BALANCED, 2: BALANCED, 3: BALANCED, 4: REMAPPED}
    return dataclasses.replace(decision, label_counts=counts).to_dict()


def _table(section: Any, caption_start: str) -> Table:
    return next(b for b in section.blocks if isinstance(b, Table) and b.caption.startswith(caption_start))


def test_a_warned_span_shows_labels_per_span_and_distances_against_thresholds() -> None:
    record = _record("warn")
    summary = run_summary(data={"spans_seen": [1, 2, 3, 4], "drift": {"warnings": record["warnings"]}})
    page = build_page(RunFacts(out_dir="/out", summary=summary, anomalies=[], drift=record))

    assert page.verdict == "pushed"
    data = section_of(page, "data")
    figures = [block for block in data.blocks if isinstance(block, Figure)]
    assert any(">Label distribution per span</title>" in figure.svg for figure in figures)
    assert any(">Drift distances against their thresholds</title>" in figure.svg for figure in figures)
    labels = next(figure for figure in figures if "Label distribution" in figure.svg)
    assert "span 4 0.0% to 40.0% of its train split" in labels.svg  # 120 of its 300 examples are 7s
    table = _table(data, "Drift checks between spans (2 distances)")
    assert table.rows[0] == ("4", "drift", Name("label"), L_INFINITY, "0.300", "0.1", "data.drift.label_linf",
                             "above: recorded (action: warn)")  # fmt: skip
    assert table.rows[1][-1] == "within"


def test_an_accepted_span_reads_as_accepted() -> None:
    summary = run_summary(config={"data": {"drift": {"accept": [4]}}}, data={"spans_seen": [4]})
    page = build_page(RunFacts(out_dir="/out", summary=summary, drift=_record("fail", accept=(4,))))
    assert _table(section_of(page, "data"), "Drift checks").rows[0][-1] == "above: accepted (data.drift.accept)"


def test_a_drift_stop_is_the_decision_and_names_the_span_and_each_finding() -> None:
    decision = decide(_findings(0.301), "fail", ())
    error = f"component ExampleValidator failed: DriftError: {stop_message(decision)}"
    record = dataclasses.replace(decision, label_counts={1: BALANCED, 4: REMAPPED}).to_dict()
    drift = {"stopped": error, "findings": record["findings"], "label_counts": record["label_counts"]}
    summary = run_summary(status="failed", failed_component="ExampleValidator", error=error, decision=STOPPED_DECISION,
                          pushed_model_dir=None, blessed=False, blessing_reason=None,
                          data={"spans_seen": [1, 2, 3, 4], "drift": drift})  # fmt: skip
    # The validator failed: it published no artifact, so the distances come from the summary alone.
    page = build_page(RunFacts(out_dir="/out", summary=summary))

    assert (page.verdict, page.tone) == ("stopped by the drift check", "bad")
    card = section_of(page, "decision")
    [lead] = [block for block in card.blocks if isinstance(block, Lead)]
    assert lead.text == (
        "Stopped by the drift check: span 4 does not look like the spans before it, so training was not started"
    )
    stops = _table(card, "What stopped the run (1)")
    assert stops.rows == ((decision.stops[0].describe(),),)
    assert "L-infinity distance 0.301 above the threshold 0.1 (data.drift.label_linf)" in stops.rows[0][0]
    data = section_of(page, "data")
    assert _table(data, "Drift checks").rows[0][-1] == "above: stopped the run"
    html = render_page(page)
    assert "stopped by the drift check" in html and "--set data.drift.accept=4" in html
    assert DRIFT_STOP == STOPPED_DECISION


def test_feature_names_from_the_record_cannot_reorder_the_page() -> None:
    record = _record("warn")
    record["findings"][0]["feature"] = "label\u202egnp.exe"
    page = build_page(RunFacts(out_dir="/out", summary=run_summary(), drift=record))
    html = render_page(page)
    assert "\u202e" not in html and "label\\u202egnp.exe" in html


def test_no_drift_checks_no_drift_blocks() -> None:
    data = section_of(build_page(RunFacts(out_dir="/out", summary=run_summary(), anomalies=[])), "data")
    assert not any(isinstance(block, Table) and "Drift" in block.caption for block in data.blocks)
    assert not any(isinstance(block, Figure) and "Drift" in block.svg for block in data.blocks)


def test_many_labels_are_a_table_of_each_spans_extremes_not_a_plot() -> None:
    counts = {"1": {str(label): 10 for label in range(100)}, "2": {**{str(label): 10 for label in range(99)}, "99": 0}}
    page = build_page(RunFacts(out_dir="/out", summary=run_summary(), drift={"label_counts": counts, "findings": []}))
    table = _table(section_of(page, "data"), "Label shares per span (100 labels)")
    assert table.rows == (("span 1", "1.00%", "1.00%"), ("span 2", "0.00%", "1.01%"))
