"""The run report's page from a run's facts: every section of `page.SECTION_IDS`, rendered to one HTML file.

Example:
    html = report_html(facts)  # facts: a `RunFacts` from `pipeline.report.gather` or `components.report.inputs`
"""

from __future__ import annotations

from components.report import data_section, model_sections, run_sections, text
from components.report.facts import RunFacts
from components.report.page import Page
from components.report.render import render_page

REPORT_FILE = "report.html"


def _min_accuracy(facts: RunFacts) -> float | None:
    value = (facts.summary.get("config") or {}).get("evaluator", {}).get("min_accuracy")
    return float(value) if value is not None else None


def build_page(facts: RunFacts) -> Page:
    """The report's page: every section of `page.SECTION_IDS`, in that order."""
    verdict, tone = run_sections.decision(facts)
    minimum = _min_accuracy(facts)
    starts = [step["start"] for step in facts.timeline if step.get("start") is not None]
    when = f"run of {text.clock(min(starts))}" if starts else "run"
    name = (facts.summary.get("config") or {}).get("pipeline", {}).get("name") or "tfxp"
    return Page(
        title=name,
        subtitle=f"{when} · output {facts.out_dir}",
        verdict=verdict,
        tone=tone,
        sections=[
            run_sections.decision_section(facts),
            data_section.data_section(facts),
            model_sections.training_section(facts),
            model_sections.evaluation_section(facts, minimum),
            model_sections.edge_section(facts),
            run_sections.components_section(facts),
            run_sections.history_section(facts, minimum),
        ],
    )


def report_html(facts: RunFacts) -> str:
    """The whole report as one self-contained HTML document."""
    return render_page(build_page(facts))
