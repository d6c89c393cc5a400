"""The run report's sections from fixture facts: what each shows, and what it says when a piece is missing."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from report_fixtures import run_summary, section_of

from components.report.build import build_page
from components.report.evaluation import per_class_rates
from components.report.facts import RunFacts
from components.report.page import (
    SECTION_IDS,
    Collapsed,
    Figure,
    ImageGrid,
    Lead,
    Missing,
    Name,
    Section,
    Table,
)
from components.report.recipe_section import NOT_RECORDED
from components.report.render import CONTENT_SECURITY_POLICY, render_page

DIGITS_FACTS = Path(__file__).resolve().parents[2] / "golden" / "report_digits_facts.json"
"""The facts `gather_facts` read from a real digits run (two runs in one output: the second compared with the
first), written by `RunFacts.to_json`."""


def _digits() -> RunFacts:
    return RunFacts.from_json(DIGITS_FACTS.read_text())


def _timeline(*steps: tuple[str, str]) -> list[dict[str, Any]]:
    return [
        {"component": name, "status": status, "start": 1_700_000_000.0 + number * 5, "seconds": 4.0}
        for number, (name, status) in enumerate(steps)
    ]


def _texts(section: Section, kind: type) -> list[str]:
    return [block.text for block in section.blocks if isinstance(block, kind)]


def test_the_digits_run_shows_every_section_with_its_plots() -> None:
    page = build_page(_digits())

    assert [section.id for section in page.sections] == list(SECTION_IDS)
    assert page.title == "tfxp-digits"
    assert (page.verdict, page.tone) == ("pushed", "good")
    figures = {section.id: [b for b in section.blocks if isinstance(b, Figure)] for section in page.sections}
    # class bars; curves; accuracy gate and confusion matrix; timeline; history (two runs)
    assert [len(figures[section]) for section in SECTION_IDS] == [0, 1, 1, 2, 0, 1, 1]
    for blocks in figures.values():
        for figure in blocks:
            assert re.search(
                r"<title id=\"[\w-]+-title\">[^<]+</title><desc id=\"[\w-]+-desc\">[^<]+</desc>", figure.svg
            )
    assert _texts(section_of(page, "data"), Lead) == ["1,797 examples: 1,438 train, 359 eval"]
    grid = next(b for b in section_of(page, "evaluation").blocks if isinstance(b, ImageGrid))
    assert grid.images and all(image.alt.startswith("eval image of class") for image in grid.images)
    # The digits run's training_metrics.json is from a Trainer that did not record its recipe yet: said, not hidden.
    missing = [b.text for section in page.sections for b in section.blocks if isinstance(b, Missing)]
    assert missing == [NOT_RECORDED]


def test_decision_names_the_pushed_version_reason_baseline_and_config() -> None:
    facts = RunFacts("/out", run_summary(metrics={"accuracy": 0.97, "baseline_accuracy": 0.95}))

    decision = section_of(build_page(facts), "decision")

    assert _texts(decision, Lead) == ["Pushed version 1700000000"]
    facts_block = dict(next(b for b in decision.blocks if hasattr(b, "items")).items)  # type: ignore[attr-defined]
    assert facts_block["compared with"] == "the latest blessed model (accuracy 0.9500)"
    assert facts_block["wall time"] == "40.0 s"
    config = next(b for b in decision.blocks if isinstance(b, Collapsed))
    assert "name: tfxp-digits" in config.text


def test_decision_reads_the_served_baseline_when_the_summary_has_one() -> None:
    summary = run_summary(baseline={"mode": "served", "version": "1699", "path": "/s/1699", "accuracy": 0.96})
    summary["decision"] = "no new data"
    summary["pushed_model_dir"] = None
    page = build_page(RunFacts("/out", summary))

    assert (page.verdict, page.tone) == ("no new data", "neutral")
    decision = section_of(page, "decision")
    facts_block = dict(next(b for b in decision.blocks if hasattr(b, "items")).items)  # type: ignore[attr-defined]
    assert facts_block["compared with"] == "served version 1699 (accuracy 0.9600)"
    assert facts_block["pushed version"] == "none this run"


def test_a_run_that_failed_in_the_trainer_says_how_far_it_got_and_what_is_missing() -> None:
    summary = run_summary(
        status="failed",
        blessed=False,
        blessing_reason=None,
        pushed_model_dir=None,
        metrics={},
        error="component Trainer failed: ValueError: no GPU\nTraceback ...",
        failed_component="Trainer",
    )
    facts = RunFacts(
        "/out",
        summary,
        timeline=_timeline(("ImportExampleGen", "complete"), ("StatisticsGen", "cached"), ("Trainer", "failed")),
        splits={"train": {"examples": 10, "classes": {"0": 6, "1": 4}}, "eval": {"examples": 4, "classes": {}}},
        splits_source="StatisticsGen",
        anomalies=[],
    )

    page = build_page(facts)

    assert (page.verdict, page.tone) == ("failed in Trainer", "bad")
    decision = section_of(page, "decision")
    assert _texts(decision, Lead) == ["The run failed in Trainer"]
    paragraphs = " ".join(block.text for block in decision.blocks if hasattr(block, "text"))
    assert "It got as far as: ImportExampleGen, StatisticsGen." in paragraphs
    assert "Why it stopped: component Trainer failed: ValueError: no GPU" in paragraphs
    assert _texts(section_of(page, "training"), Missing) == ["No training metrics: Trainer failed in this run."]
    assert _texts(section_of(page, "evaluation"), Missing) == [
        "No evaluation: Evaluator did not run (the run stopped before it)."
    ]
    assert _texts(section_of(page, "edge"), Missing) == [
        "No edge model: EdgeExporter did not run (the run stopped before it)."
    ]
    components = next(b for b in section_of(page, "components").blocks if isinstance(b, Table))
    assert [row[:2] for row in components.rows] == [
        ("ImportExampleGen", "ran"),
        ("StatisticsGen", "cached"),
        ("Trainer", "failed"),
    ]


def test_a_run_that_stopped_in_setup_has_no_components_and_no_data() -> None:
    summary = run_summary(status="failed", components={}, metrics={}, pushed_model_dir=None, failed_component="setup")
    page = build_page(RunFacts("/out", summary))

    assert _texts(section_of(page, "components"), Missing) == ["No component ran: the run stopped during setup."]
    data = _texts(section_of(page, "data"), Missing)
    assert data == [
        "No example counts: StatisticsGen did not run (the run stopped before it).",
        "No validation result: ExampleValidator did not run (the run stopped before it).",
    ]


def test_no_edge_model_is_said_when_edge_export_is_disabled() -> None:
    summary = run_summary()
    summary["config"]["edge"]["enabled"] = False
    edge = section_of(build_page(RunFacts("/out", summary)), "edge")
    assert _texts(edge, Missing) == ["No edge model: edge.enabled is false in this run's config."]


def test_edge_table_puts_the_tflite_model_next_to_the_saved_model() -> None:
    facts = _digits()
    edge = section_of(build_page(facts), "edge")
    table = next(b for b in edge.blocks if isinstance(b, Table))
    assert [row[0] for row in table.rows] == ["SavedModel (served)", "TFLite int8 (int8 input)"]
    assert table.rows[1][1].endswith("KiB") and float(table.rows[1][2]) > 0.9
    assert table.rows[0][3] == "not measured"


def test_no_baseline_yet_is_said_and_only_min_accuracy_is_the_gate() -> None:
    facts = RunFacts("/out", run_summary(), timeline=_timeline(("Trainer", "complete"), ("Evaluator", "complete")))
    evaluation = section_of(build_page(facts), "evaluation")
    assert "No baseline yet: there was no earlier model to compare with, only min_accuracy." in [
        block.text for block in evaluation.blocks if hasattr(block, "text")
    ]
    figure = next(b for b in evaluation.blocks if isinstance(b, Figure))
    assert "baseline" not in figure.svg.split("<desc")[1].split("</desc>")[0]
    assert _texts(evaluation, Missing) == [
        "No confusion matrix: Evaluator wrote none.",
        "No misclassified images: the Trainer's model or the eval split is not available.",
    ]


def test_confusion_matrix_gives_per_class_precision_and_recall() -> None:
    facts = RunFacts("/out", run_summary(), confusion={"labels": ["cat", "dog"], "matrix": [[3, 1], [0, 4]]})
    evaluation = section_of(build_page(facts), "evaluation")
    table = next(b for b in evaluation.blocks if isinstance(b, Table))
    assert table.rows == ((Name("cat"), "1.000", "0.750", "4"), (Name("dog"), "0.800", "1.000", "4"))


def test_per_class_rates_leave_out_classes_never_predicted_or_seen() -> None:
    assert per_class_rates([[0, 2], [0, 0]]) == [(None, 0.0, 2), (0.0, None, 0)]


def test_history_marks_each_decision_and_follows_the_served_version() -> None:
    runs = [
        {
            "run": "a",
            "time": 1_700_000_000,
            "status": "complete",
            "blessed": True,
            "accuracy": 0.95,
            "pushed_version": "1",
        },
        {
            "run": "b",
            "time": 1_700_000_600,
            "status": "complete",
            "blessed": False,
            "accuracy": 0.5,
            "pushed_version": None,
        },
        {
            "run": "c",
            "time": 1_700_001_200,
            "status": "failed",
            "blessed": None,
            "accuracy": None,
            "pushed_version": None,
        },
        {
            "run": "d",
            "time": 1_700_001_800,
            "status": "complete",
            "blessed": True,
            "accuracy": 0.97,
            "pushed_version": "4",
        },
    ]
    history = section_of(build_page(RunFacts("/out", run_summary(), history=runs)), "history")
    table = next(b for b in history.blocks if isinstance(b, Table))
    assert [(row[2], row[3], row[4]) for row in table.rows] == [
        ("pushed", "1", "1"),
        ("not pushed", "", "1"),
        ("failed", "", "1"),
        ("pushed", "4", "4"),
    ]
    figure = next(b for b in history.blocks if isinstance(b, Figure))
    assert "Accuracy of each of 4 runs over time, marked by decision (2 pushed)" in figure.svg


def test_a_first_run_has_no_history_yet() -> None:
    runs = [{"run": "a", "time": 1.0, "status": "complete", "blessed": True, "accuracy": 0.9, "pushed_version": "1"}]
    history = section_of(build_page(RunFacts("/out", run_summary(), history=runs)), "history")
    assert [block.text for block in history.blocks if hasattr(block, "text")] == [
        "This is the only run in this output's ML Metadata; the history appears from the second run on."
    ]


def test_outputs_that_could_not_be_read_are_listed() -> None:
    problem = {"component": "Evaluator", "path": "/out/eval", "error": "cannot read the TFMA metrics: DataLossError"}
    facts = RunFacts("/out", run_summary(problems=[problem]), problems=[{**problem, "component": "Trainer"}])
    decision = section_of(build_page(facts), "decision")
    table = next(b for b in decision.blocks if isinstance(b, Table))
    assert [row[0] for row in table.rows] == ["Evaluator", "Trainer"]


def test_the_page_escapes_what_it_shows_and_allows_no_request() -> None:
    summary = run_summary(blessing_reason='<script>alert("x")</script> & more')
    document = render_page(build_page(RunFacts("/out", summary)))

    assert '<script>alert("x")</script>' not in document
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in document
    assert f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">' in document
    assert "<script" not in document
    assert not re.search(r"(src|href)=\"(https?:)?//", document)


def test_the_digits_report_is_small() -> None:
    document = render_page(build_page(_digits()))
    assert len(document.encode()) < 2 * 1024 * 1024
    assert all(f'<section id="{section}"' in document for section in SECTION_IDS)


def test_facts_survive_json() -> None:
    facts = _digits()
    assert RunFacts.from_json(facts.to_json()) == facts
    changed = copy.deepcopy(facts)
    changed.summary["blessed"] = not facts.summary["blessed"]
    assert RunFacts.from_json(changed.to_json()) != facts


@pytest.mark.parametrize(("value", "expected"), [(None, "—"), (0.97214, "0.9721"), (1438, "1,438"), (True, "yes")])
def test_numbers_are_written_plainly(value: Any, expected: str) -> None:
    from components.report.text import number

    assert number(value) == expected


def test_class_names_in_label_order_sort_numerically_only_when_ascii_digits() -> None:
    from components.report.data_section import _label_order

    assert _label_order(["10", "2", "1"]) == ["1", "2", "10"]
    assert _label_order(["²", "1"]) == ["²", "1"]  # "²".isdigit(), but no number: kept as the label map has it
    assert _label_order(["٣", "1"]) == ["٣", "1"]
