"""What the report tests share: a digits run's summary and a page's section by id."""

from __future__ import annotations

from typing import Any

from components.report.page import Page, Section


def run_summary(**changes: Any) -> dict[str, Any]:
    """A digits run's summary (run-summary.json) with `changes` applied."""
    summary: dict[str, Any] = {
        "status": "succeeded",
        "blessed": True,
        "blessing_reason": "blessed: eval accuracy 0.9700 ≥ evaluator.min_accuracy 0.9; no blessed baseline yet",
        "pushed_model_dir": "/out/serving/digits/1700000000",
        "edge_model_path": None,
        "metrics": {"accuracy": 0.97, "example_count": 359.0},
        "components": {"ImportExampleGen": {"status": "complete", "seconds": 5.0}},
        "wall_seconds": 40.0,
        "config": {"pipeline": {"name": "tfxp-digits"}, "evaluator": {"min_accuracy": 0.9}, "edge": {"enabled": True}},
        "problems": [],
    }
    summary.update(changes)
    return summary


def section_of(page: Page, section_id: str) -> Section:
    return next(section for section in page.sections if section.id == section_id)
