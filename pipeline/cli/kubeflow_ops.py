"""`tfxp pipeline`, `tfxp schedule` and `tfxp runs`: operating pipelines on Kubeflow Pipelines.

Versioned pipelines (`pipeline.kubeflow.client.pipelines`), recurring runs
(`pipeline.kubeflow.client.schedules`) and run management (`pipeline.kubeflow.client.submit.KfpRunClient`).
These handlers parse options and print; every bad input and every API error is a `TfxpError`, which the root
prints as one paragraph with exit 2. Each command gets --host, --namespace and --request-timeout from
`kfp_command`. Schedules are checked (cron, interval, window, concurrency, parameters) before any request.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from pipeline.cli.console import console, warn
from pipeline.cli.kubeflow import ExperimentOption, PackageArgument, ParamOption, PipelineRootOption, kfp_command
from pipeline.cli.options import command_group, existing_file
from pipeline.kubeflow.client.cron import ScheduleInputError

if TYPE_CHECKING:
    from pipeline.kubeflow.client.cron import Trigger
    from pipeline.kubeflow.client.schedules import CreatedSchedule
    from pipeline.kubeflow.client.submit import KfpRunClient

pipeline_app = command_group("pipeline", "Pipelines and their versions on Kubeflow Pipelines.")
schedule_app = command_group("schedule", "Recurring runs (cron or interval) on Kubeflow Pipelines.")
runs_app = command_group("runs", "Runs on Kubeflow Pipelines: list, inspect, terminate, retry.")

LimitOption = Annotated[int, typer.Option("--limit", min=1, max=200, help="Show at most this many, newest first.")]
ExperimentFilter = Annotated[str | None, typer.Option("--experiment", help="Only this experiment's.")]
ScheduleId = Annotated[str, typer.Argument(help="Recurring run id (from `tfxp schedule list`).")]
RunId = Annotated[str, typer.Argument(help="Run id (from `tfxp runs list` or `tfxp submit`).")]


def _say(text: str) -> None:
    # Long lines (URLs, ids) stay whole rather than wrapped at the terminal's width.
    console.print(text, highlight=False, soft_wrap=True)


def _when(moment: datetime.datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else ""


def _table(*columns: str) -> Table:
    table = Table(show_edge=False)
    for column in columns:
        table.add_column(column)
    return table


@pipeline_app.command("upload")
@kfp_command
def pipeline_upload(
    package: PackageArgument,
    client: KfpRunClient,
    name: Annotated[str | None, typer.Option("--name", help="Pipeline name; default the spec's name.")] = None,
    version: Annotated[
        str | None, typer.Option("--version", help="Version name; default sha-<12 hex digits of the spec's content>.")
    ] = None,
) -> None:
    """Upload a compiled pipeline as a new version (creating the pipeline when it is new).

    The default version name comes from the spec's content, so uploading an unchanged spec again does nothing.
    """
    from pipeline.kubeflow.client.pipelines import upload

    result = upload(client, package, name=name, version=version)
    if result.uploaded:
        new = " (new pipeline)" if result.created_pipeline else ""
        _say(f"uploaded pipeline {result.pipeline}{new}, version {result.version.name}")
    else:
        _say(f"pipeline {result.pipeline} already has this spec as version {result.version.name}; nothing uploaded")
    _say(f"version id: {result.version.version_id}")
    _say(f"version:    {result.url}")


@pipeline_app.command("list")
@kfp_command
def pipeline_list(client: KfpRunClient, limit: LimitOption = 20) -> None:
    """List the pipelines, newest first."""
    from pipeline.kubeflow.client.pipelines import list_pipelines

    table = _table("pipeline", "id", "created", "description")
    for pipeline in list_pipelines(client, limit):
        table.add_row(pipeline.name, pipeline.pipeline_id, _when(pipeline.created), pipeline.description)
    console.print(table)


@pipeline_app.command("versions")
@kfp_command
def pipeline_versions(
    name: Annotated[str, typer.Argument(help="Pipeline name.")],
    client: KfpRunClient,
    limit: LimitOption = 20,
) -> None:
    """List a pipeline's versions, newest first."""
    from pipeline.kubeflow.client.pipelines import list_pipeline_versions, require_pipeline

    table = _table("version", "id", "created")
    for version in list_pipeline_versions(client, require_pipeline(client, name), limit):
        table.add_row(version.name, version.version_id, _when(version.created))
    console.print(table)


SchedulePackageArgument = Annotated[
    Path | None,
    typer.Argument(
        parser=existing_file,
        help="Pipeline YAML from `tfxp compile` (or give --pipeline).",
    ),
]
SchedulePipelineOption = Annotated[str | None, typer.Option("--pipeline", help="An uploaded pipeline, by name.")]
ScheduleVersionOption = Annotated[
    str | None, typer.Option("--version", help="Its version, by name; default the newest.")
]
CronOption = Annotated[
    str | None,
    typer.Option("--cron", help="KFP cron: 'sec min hour dom month dow'; a 5-field crontab line is converted."),
]
EveryOption = Annotated[str | None, typer.Option("--every", help="Interval: 30m, 6h, 1d, 1h30m (at least 1m).")]
MaxConcurrencyOption = Annotated[int, typer.Option("--max-concurrency", help="Runs at once, 1-10.")]
NoCatchupOption = Annotated[
    bool, typer.Option("--no-catchup", help="After a pause, start only the latest missed run, not each.")
]
StartOption = Annotated[
    str | None, typer.Option("--start", help="No run before this ISO 8601 time (UTC unless given).")
]
EndOption = Annotated[str | None, typer.Option("--end", help="No run after this ISO 8601 time.")]
ScheduleNameOption = Annotated[str | None, typer.Option("--name", help="Name; default '<pipeline> (<trigger>)'.")]


@schedule_app.command("create")
@kfp_command
def schedule_create(
    client: KfpRunClient,
    package: SchedulePackageArgument = None,
    pipeline: SchedulePipelineOption = None,
    version: ScheduleVersionOption = None,
    cron: CronOption = None,
    every: EveryOption = None,
    max_concurrency: MaxConcurrencyOption = 1,
    no_catchup: NoCatchupOption = False,
    start: StartOption = None,
    end: EndOption = None,
    params: ParamOption = None,
    experiment: ExperimentOption = None,
    name: ScheduleNameOption = None,
    pipeline_root: PipelineRootOption = None,
) -> None:
    """Create a recurring run of a compiled pipeline file or of an uploaded pipeline version.

    The cron expression, interval, window, concurrency and parameters are checked before any request. Its runs'
    pipeline root is --pipeline-root, else the defaultPipelineRoot of the spec (the file's, or the version's).
    """
    from pipeline.kubeflow.client.cron import Trigger
    from pipeline.kubeflow.client.schedules import check_max_concurrency, create_schedule
    from pipeline.kubeflow.compiler.params import parse_param_entries

    if (package is None) == (pipeline is None):
        raise ScheduleInputError("give a compiled pipeline file (pipeline.yaml) or --pipeline NAME, not both")
    if version is not None and pipeline is None:
        raise ScheduleInputError("--version picks a version of --pipeline NAME; a pipeline file is its own version")
    trigger = Trigger.make(cron=cron, every=every, start=start, end=end)
    check_max_concurrency(max_concurrency)
    raw = parse_param_entries(params or [])
    if trigger.cron is not None and trigger.cron.converted:
        _say(
            f"cron: the crontab line '{trigger.cron.given}' is '{trigger.cron.expression}' in KFP's "
            "six-field form (seconds first)"
        )
    created = create_schedule(
        client,
        trigger,
        package=package,
        pipeline=pipeline,
        version=version,
        params=raw,
        name=name,
        experiment=experiment,
        max_concurrency=max_concurrency,
        catchup=not no_catchup,
        pipeline_root=pipeline_root,
    )
    _print_created(created, trigger, max_concurrency, catchup=not no_catchup)


def _print_created(created: CreatedSchedule, trigger: Trigger, max_concurrency: int, *, catchup: bool) -> None:
    """What `tfxp schedule create` made: its warnings, id, source, name, trigger, root and run options."""
    for warning in created.warnings:
        warn(warning)
    schedule = created.schedule
    _say(f"recurring run id: {schedule.schedule_id}")
    _say(f"runs:    {created.source}")
    _say(f"name:    {schedule.name}")
    _say(f"trigger: {trigger.describe()}")
    _say(f"pipeline root: {created.pipeline_root or '(none sent: the KFP server default)'}")
    _say(
        f"max concurrency {max_concurrency}, catch-up {'on' if catchup else 'off'}, "
        f"{'enabled' if schedule.enabled else 'paused'}"
    )


@schedule_app.command("list")
@kfp_command
def schedule_list(client: KfpRunClient, experiment: ExperimentFilter = None, limit: LimitOption = 20) -> None:
    """List the recurring runs, newest first."""
    from pipeline.kubeflow.client.schedules import list_schedules

    table = _table("name", "id", "status", "trigger", "max", "catch-up", "created")
    for schedule in list_schedules(client, experiment=experiment, limit=limit):
        table.add_row(
            schedule.name,
            schedule.schedule_id,
            "enabled" if schedule.enabled else "paused",
            schedule.trigger,
            str(schedule.max_concurrency),
            "on" if schedule.catchup else "off",
            _when(schedule.created),
        )
    console.print(table)


def _schedule_change(action: str, done: str, doc: str) -> None:
    """Registers `tfxp schedule ACTION ID`: `pipeline.kubeflow.client.schedules.<action>`, then
    `<done> recurring run ID`."""

    def change(schedule_id: ScheduleId, client: KfpRunClient) -> None:
        from pipeline.kubeflow.client import schedules

        getattr(schedules, action)(client, schedule_id)
        _say(f"{done} recurring run {schedule_id}")

    change.__name__ = change.__qualname__ = f"schedule_{action}"
    change.__doc__ = doc
    schedule_app.command(action)(kfp_command(change))


_schedule_change("pause", "paused", "Pause a recurring run (runs already going continue).")
_schedule_change("resume", "resumed", "Resume a paused recurring run.")
_schedule_change("delete", "deleted", "Delete a recurring run (the runs it started stay).")


@runs_app.command("list")
@kfp_command
def runs_list(client: KfpRunClient, experiment: ExperimentFilter = None, limit: LimitOption = 20) -> None:
    """List the runs, newest first."""
    table = _table("name", "id", "state", "created", "finished")
    for run in client.list_runs(experiment=experiment, limit=limit):
        table.add_row(run.name, run.run_id, run.state, _when(run.created), _when(run.finished))
    console.print(table)


@runs_app.command("get")
@kfp_command
def runs_get(run_id: RunId, client: KfpRunClient) -> None:
    """Show a run: state, times, task states and error."""
    from pipeline.kubeflow.client.auth import run_url

    summary, status = client.describe(run_id)
    _say(f"run:      {summary.run_id}  {summary.name}")
    _say(f"state:    {summary.state}")
    _say(f"created:  {_when(summary.created)}")
    if summary.finished:
        _say(f"finished: {_when(summary.finished)}")
    if summary.recurring_run_id:
        _say(f"started by recurring run {summary.recurring_run_id}")
    _say(f"url:      {run_url(client.host, summary.run_id)}")
    if status.tasks:
        table = _table("task", "state")
        for task, state in sorted(status.tasks.items()):
            table.add_row(task, state)
        console.print(table)
    if status.error:
        _say(f"error: {status.error}")


@runs_app.command("terminate")
@kfp_command
def runs_terminate(run_id: RunId, client: KfpRunClient) -> None:
    """Stop a run that has not ended (e.g. one left going by Ctrl-C or a --wait timeout)."""
    summary = client.terminate(run_id)
    _say(f"terminating run {run_id} (was {summary.state}); it ends CANCELED")


@runs_app.command("retry")
@kfp_command
def runs_retry(run_id: RunId, client: KfpRunClient) -> None:
    """Rerun the unfinished tasks of a FAILED or CANCELED run, in place (same run id)."""
    summary = client.retry(run_id)
    _say(f"retrying run {run_id} (was {summary.state}); follow it with `tfxp runs get {run_id} --host {client.host}`")
