"""`tfxp run`: the pipeline, locally, with per-component progress and a run summary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from pipeline.cli.console import console, fail, warn
from pipeline.cli.options import ConfigOption, SetOption, load_cli_config, run_output


def _print_progress(component: str, state: str, seconds: float) -> None:
    if state == "running":
        console.print(f"[cyan]▶[/] {component} …", highlight=False)
    else:
        console.print(f"[green]✓[/] {component} [dim]{seconds:.1f}s[/]", highlight=False)


def _print_notice(line: str) -> None:
    console.print(f"[yellow]![/] {escape(line)}", highlight=False)


def run(
    config_file: ConfigOption = None,
    overrides: SetOption = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", parser=run_output, metavar="DIR", help="Output dir OUT (pipeline.output)."),
    ] = None,
) -> None:
    """Run the pipeline locally (LocalDagRunner) and write OUT/run-summary.json.

    Exits 0 when the pipeline ran, blessed or not (the summary says which), 2 when a component refused the data or
    the setup (schema violations, a drift stop), 1 when a component failed otherwise.
    Either way it writes OUT/report.html (`tfxp report`) and prints its path.
    """
    config = load_cli_config(config_file, overrides, output)
    # The pre-flight imports no TensorFlow or TFX (a missing folder is said in a second, not after 10 s of imports);
    # only the data probe, when `data.label_offset: auto` needs it, reads examples through TensorFlow.
    from pipeline.cli.quiet import is_verbose, use_log_file
    from pipeline.runners.local import resolve_local_paths, run_local

    # Missing or unrecognised data, a bucket output: a TfxpError or OSError (exit 2). Resolved once: `run_local`
    # runs this config as it is.
    config = resolve_local_paths(config)
    if config.serving.rollout == "direct":
        from pipeline.layout import output_layout
        from serving.rollout.state import refuse_direct_push_over_rollout

        refuse_direct_push_over_rollout(output_layout(config).serving_base)
    console.print(f"tfxp run: pipeline [bold]{config.pipeline.name}[/], output {escape(config.pipeline.output)}")
    result = run_local(config, _print_progress, on_log=use_log_file, notify=_print_notice, echo_logs=is_verbose())
    from pipeline.summary import build_summary, write_summary  # imports TFX: after the run, not before the checks

    summary = build_summary(
        result.config,
        result.layout.metadata_path,
        result.wall_seconds,
        result.failure,
        result.failure.component if result.failure else None,
        result.started_at,
    )
    write_summary(summary, Path(result.layout.summary_path))
    _print_summary(summary.to_json_dict(), result.layout.summary_path)
    report = _write_report(Path(result.config.pipeline.output))
    if result.failure is not None:
        # A component that refused the data or the setup (a DataValidationError, say) is a user error, exit 2 as
        # every user error; a component that failed otherwise is a failed run, exit 1.
        raise fail(
            f"{result.failure}\n"
            f"The summary is in {result.layout.summary_path}{report}; previously pushed models are untouched.",
            code=2 if result.failure.user_error else 1,
        )


def _write_report(out_dir: Path) -> str:
    """Writes OUT/report.html and prints its path (last, on success); a report that fails is a warning, never a
    failed run. Returns ", the report in PATH" for the failure message, or ""."""
    from pipeline.cli.report import warn_problems
    from pipeline.report.build import write_report

    try:
        written = write_report(out_dir)
    except Exception as error:  # the run's outcome stands whatever the report does
        warn(f"no report: {type(error).__name__}: {error}")
        return ""
    warn_problems(written.problems)
    console.print(f"report: {escape(str(written.path))}", highlight=False, soft_wrap=True)
    return f", the report in {written.path}"


def _print_summary(summary: dict, summary_path: str) -> None:
    from rich.table import Table

    table = Table(title="components", show_edge=False)
    table.add_column("component")
    table.add_column("status")
    table.add_column("seconds", justify="right")
    for name, record in summary["components"].items():
        seconds = record.get("seconds")
        table.add_row(name, record["status"], "" if seconds is None else f"{seconds:.1f}")
    console.print(table)
    if summary.get("blessing_reason"):
        console.print(summary["blessing_reason"], highlight=False)
    if summary.get("pushed_model_dir"):
        console.print(f"served model: {escape(str(summary['pushed_model_dir']))}", highlight=False)
    elif summary["status"] == "succeeded":
        console.print("nothing pushed this run; the previously pushed version (if any) is unchanged", highlight=False)
    edge = summary.get("edge")
    if edge:
        metrics = summary["metrics"]
        detail = f"edge ({edge['mode']}): {edge['status']}"
        if edge["status"] == "already_published":
            detail = f"edge ({edge['mode']}): already published as version {edge.get('version')}"
        elif metrics.get("edge_accuracy") is not None:
            detail += (
                f", tflite accuracy {metrics['edge_accuracy']:.4f}"
                f" vs SavedModel {metrics['edge_saved_model_accuracy']:.4f}"
                f", {metrics['edge_size_bytes'] / 1024:.0f} KiB, p50 {metrics['edge_latency_p50_ms']:.2f} ms"
            )
        console.print(detail, highlight=False)
        if edge.get("reason"):
            console.print(f"  {escape(str(edge['reason']))}", highlight=False)
        if summary.get("edge_model_path"):
            console.print(f"device model: {escape(str(summary['edge_model_path']))}", highlight=False)
    if summary.get("rollout"):
        from serving.rollout.state import describe_rollout

        console.print(f"rollout: {describe_rollout(summary['rollout'])}", highlight=False, markup=False, soft_wrap=True)
    for problem in summary.get("problems", []):  # outputs the summary could not read: said, never hidden
        warn(f"{problem['component']}: {problem['error']} ({problem['path']})")
    warm = summary.get("warm_start")
    requested = summary.get("config", {}).get("trainer", {}).get("warm_start") == "served"
    if requested and isinstance(warm, dict):  # trainer.warm_start=served: say whether it was used, and why not
        state = "from the served model" if warm.get("applied") else "not applied"
        console.print(f"warm start {state}: {warm.get('reason', '')}", highlight=False, markup=False)
    console.print(f"wall time {summary['wall_seconds']:.1f}s; summary: {summary_path}", highlight=False)
