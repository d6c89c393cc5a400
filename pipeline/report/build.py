"""The run report: facts → page → `OUT/report.html`.

Example:
    written = write_report(Path("tfxp_output"))
    print(written.path, written.size_bytes, written.seconds)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.report import model_sections, run_sections, text
from pipeline.report.facts import RunFacts
from pipeline.report.gather import gather_facts
from pipeline.report.page import Page
from pipeline.report.render import render_page

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
            model_sections.data_section(facts),
            model_sections.training_section(facts),
            model_sections.evaluation_section(facts, minimum),
            model_sections.edge_section(facts),
            run_sections.components_section(facts),
            run_sections.history_section(facts, minimum),
        ],
    )


@dataclass(frozen=True)
class WrittenReport:
    """Where the report went, its size, how long gathering and writing it took, and what it could not read
    ({"component", "path", "error"}, also on the page)."""

    path: Path
    size_bytes: int
    seconds: float
    problems: list[dict[str, str]]


def write_report(out_dir: Path, out_file: Path | None = None, with_model: bool = True) -> WrittenReport:
    """Writes the report of the run in `out_dir`.

    Args:
        out_dir: The run's output directory (`tfxp run --output`).
        out_file: Where to write; default `out_dir/report.html`.
        with_model: Run the SavedModel on the eval split to find the misclassified images.

    Raises:
        ReportError: `out_dir` holds no readable run summary.
        OSError: the report cannot be written.
    """
    started = time.perf_counter()
    facts = gather_facts(out_dir, with_model=with_model)
    document = render_page(build_page(facts))
    path = out_file or out_dir / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(document, encoding="utf-8")
    staged.replace(path)  # a reader never sees half a report
    return WrittenReport(path, path.stat().st_size, time.perf_counter() - started, facts.problems)
