"""The run report of a local run: facts from its output directory → `OUT/report.html`.

Example:
    written = write_report(Path("tfxp_output"))
    print(written.path, written.size_bytes, written.seconds)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from components.report.build import REPORT_FILE, report_html
from pipeline.report.gather import gather_facts


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
    document = report_html(facts)
    path = out_file or out_dir / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(document, encoding="utf-8")
    staged.replace(path)  # a reader never sees half a report
    return WrittenReport(path, path.stat().st_size, time.perf_counter() - started, facts.problems)
