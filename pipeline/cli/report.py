"""`tfxp report OUT`: the self-contained HTML report of the run in OUT (`tfxp run` writes it after every run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from foundation.path_rules import check_not_input
from pipeline.cli.console import UserError, console, warn
from pipeline.cli.options import output_file, path_rule


def report(
    out_dir: Annotated[
        Path,
        typer.Argument(
            parser=path_rule("existing_dir", hint="pass the output dir of `tfxp run` (default ./tfxp_output)"),
            help="The run's output dir (what `tfxp run --output` got).",
        ),
    ],
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out", parser=output_file, metavar="FILE", help="Where to write the report; default OUT/report.html."
        ),
    ] = None,
    no_model: Annotated[
        bool, typer.Option("--no-model", help="Skip running the model on the eval split (no misclassified images).")
    ] = False,
) -> None:
    """Write the run's report: decision, data, training, evaluation, edge, components and history, as one HTML file.

    The file needs nothing else: no network, no other file; open it in any browser.
    """
    from pipeline.report.build import write_report
    from pipeline.report.gather import SUMMARY_FILE

    if not out_dir.is_dir():
        raise UserError(f"{out_dir} is not a directory; pass the output dir of `tfxp run` (default ./tfxp_output)")
    if out_file is not None:  # the report reads the run summary and every folder of the run (pipeline, models)
        read = {f"OUT's {SUMMARY_FILE}": out_dir / SUMMARY_FILE}
        read.update({f"OUT's folder {entry.name}/": entry for entry in out_dir.iterdir() if entry.is_dir()})
        check_not_input(out_file, read, "--out")
    try:
        written = write_report(out_dir, out_file, with_model=not no_model)
    except OSError as error:
        raise UserError(f"cannot write the report to {out_file or out_dir}: {error}") from None
    warn_problems(written.problems)
    console.print(
        f"report: {written.path} ({written.size_bytes / 1024:.0f} KiB, {written.seconds:.1f}s)",
        highlight=False,
        soft_wrap=True,
    )


def warn_problems(problems: list[dict[str, str]]) -> None:
    """One warning line per output the report could not read (the page says the same)."""
    for problem in problems:
        warn(f"report: {problem['component']}: {problem['error']}")
