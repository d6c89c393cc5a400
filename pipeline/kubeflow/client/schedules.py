"""Recurring runs on Kubeflow Pipelines: create one from a compiled file or an uploaded pipeline version, list,
pause, resume and delete them.

Everything that can be checked without the server is checked before the first request: the trigger
(`pipeline.kubeflow.client.cron.Trigger`), the concurrency, and the run parameters against the spec's declared ones.
For an uploaded pipeline the spec is the version's, read from the API.

Example:
    trigger = Trigger.make(cron="0 2 * * *")                       # 02:00 daily → "0 0 2 * * *"
    created = create_schedule(client, trigger, package=Path("pipeline.yaml"), params={"train_steps": "500"})
    pause(client, schedule.schedule_id)
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.bounded import parse_json
from pipeline.kubeflow.client.answers import require_id
from pipeline.kubeflow.client.cron import ScheduleInputError, Trigger, format_seconds
from pipeline.kubeflow.client.pipelines import doc_from_api, get_version
from pipeline.kubeflow.client.runs import api_time
from pipeline.kubeflow.client.submit import KfpRunClient, read_package
from pipeline.kubeflow.compiler.params import pipeline_parameters, typed_arguments

# KFP's API server refuses other values ("Max concurrency of a recurring run must be at least 1 and at most 10").
MAX_CONCURRENCY = 10


@dataclass(frozen=True)
class Schedule:
    """A recurring run as `tfxp schedule list` shows it.

    Attributes:
        schedule_id: The recurring run's id.
        name: Its display name.
        enabled: Whether it starts runs (False: paused).
        trigger: `cron 0 0 2 * * *` or `every 6h`.
        max_concurrency: Runs it may have going at once.
        catchup: Whether it starts the runs it missed while paused.
        experiment_id: The experiment its runs go to.
        created: When it was created (UTC), if known.
        parameters: The run parameters it passes.
    """

    schedule_id: str
    name: str
    enabled: bool
    trigger: str
    max_concurrency: int = 1
    catchup: bool = True
    experiment_id: str = ""
    created: datetime.datetime | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)


def _trigger_text(trigger: Any) -> str:
    cron = getattr(getattr(trigger, "cron_schedule", None), "cron", None)
    if cron:
        return f"cron {cron}"
    interval = getattr(getattr(trigger, "periodic_schedule", None), "interval_second", None)
    return f"every {format_seconds(int(interval))}" if interval else "?"


def _schedule(recurring: Any) -> Schedule:
    status = str(recurring.status or recurring.mode or "")
    config = recurring.runtime_config
    return Schedule(
        schedule_id=str(recurring.recurring_run_id),
        name=str(recurring.display_name or ""),
        enabled=status in ("ENABLED", "ENABLE"),
        trigger=_trigger_text(recurring.trigger),
        max_concurrency=int(recurring.max_concurrency or 1),
        catchup=not recurring.no_catchup,
        experiment_id=str(recurring.experiment_id or ""),
        created=api_time(recurring.created_at),
        parameters=dict(getattr(config, "parameters", None) or {}),
    )


@dataclass(frozen=True)
class CreatedSchedule:
    """Attributes:
    schedule: The new recurring run.
    source: What it runs: the file, or `pipeline P, version V`.
    warnings: What the user should know (e.g. parameters that could not be checked, no pipeline root).
    pipeline_root: The pipeline root its runs are sent with; "" = none (KFP's fallback).
    """

    schedule: Schedule
    source: str
    warnings: tuple[str, ...] = ()
    pipeline_root: str = ""


def check_max_concurrency(value: int) -> int:
    """`value` when KFP accepts it (1 to 10).

    Raises:
        ScheduleInputError: outside 1-10.
    """
    if not 1 <= value <= MAX_CONCURRENCY:
        raise ScheduleInputError(
            f"--max-concurrency {value}: KFP allows 1 to {MAX_CONCURRENCY} runs of a recurring run at once"
        )
    return value


def _loose(text: str) -> Any:
    # Without the spec, a value that reads as JSON (500, 0.5, true) is sent as that, anything else as text.
    try:
        return parse_json(text)
    except ValueError:
        return text


def create_schedule(
    client: KfpRunClient,
    trigger: Trigger,
    *,
    package: Path | None = None,
    pipeline: str | None = None,
    version: str | None = None,
    params: Mapping[str, str] | None = None,
    name: str | None = None,
    experiment: str | None = None,
    max_concurrency: int = 1,
    catchup: bool = True,
    pipeline_root: str | None = None,
) -> CreatedSchedule:
    """Creates an enabled recurring run of a compiled file (its spec travels with the recurring run) or of an
    uploaded pipeline version.

    Args:
        client: The client.
        trigger: When runs start (`Trigger.make`).
        package: A `.yaml` from `tfxp compile`; or give `pipeline`.
        pipeline: The name of an uploaded pipeline.
        version: Its version's name; default the newest.
        params: Run parameters as `name → text`, checked and typed against the spec.
        name: The recurring run's name; default `<pipeline> (<trigger>)`.
        experiment: Its experiment; default the pipeline's name (created when missing).
        max_concurrency: Runs it may have going at once, 1-10.
        catchup: Start the runs missed while paused or behind (KFP's default); False = only the latest.
        pipeline_root: Its runs' pipeline root (a bucket URL); None = the `defaultPipelineRoot` of the file's spec,
            or of the version's spec as the API returns it. KFP's driver reads only the run's root, not the
            spec's (see `pipeline.kubeflow.client.preflight`).

    Returns:
        The recurring run, what it runs, its pipeline root, and warnings.

    Raises:
        ScheduleInputError: a concurrency KFP refuses.
        ParamError: an undeclared parameter or a value of the wrong type.
        SubmitError: a bad file, an unknown pipeline or version, a local pipeline root, a server too old for
            the spec's exit handler, or as `KfpRunClient.call`.
    """
    if (package is None) == (pipeline is None):
        raise ScheduleInputError("give either a compiled pipeline file or --pipeline NAME, not both or neither")
    check_max_concurrency(max_concurrency)
    raw = dict(params or {})
    warnings: list[str] = trigger.warnings(catchup=catchup)
    if package is not None:
        chosen = _file_source(client, package, raw, pipeline_root)
    else:
        chosen = _version_source(client, str(pipeline), version, raw, pipeline_root)
    warnings.extend(chosen.notes)
    created = _create_recurring_run(
        client, chosen, trigger, name=name, experiment=experiment, max_concurrency=max_concurrency, catchup=catchup
    )
    return CreatedSchedule(_schedule(created), chosen.described, tuple(warnings), chosen.root or "")


@dataclass(frozen=True)
class _ScheduleSource:
    """What a recurring run runs, checked before it is created.

    Attributes:
        pipeline_name: The pipeline's name.
        arguments: The run parameters, typed against the spec when there is one.
        source: The spec's part of the request (`pipeline_package_path`, or `pipeline_id` and `version_id`).
        described: The source for messages.
        root: The runs' pipeline root; None: none.
        notes: Warnings, in the order they arose.
    """

    pipeline_name: str
    arguments: dict[str, Any]
    source: dict[str, Any]
    described: str
    root: str | None
    notes: list[str]


def _create_recurring_run(
    client: KfpRunClient,
    chosen: _ScheduleSource,
    trigger: Trigger,
    *,
    name: str | None,
    experiment: str | None,
    max_concurrency: int,
    catchup: bool,
) -> Any:
    """The API's answer to creating the recurring run, in its experiment (created when missing).

    Raises:
        SubmitError: as `KfpRunClient.call`, or an answer without a recurring run id.
    """
    experiment_id = client.experiment_id(experiment or chosen.pipeline_name, create=True)
    api = client.api()
    created = client.call(
        "creating the recurring run",
        lambda: api.create_recurring_run(
            experiment_id=experiment_id,
            job_name=name or f"{chosen.pipeline_name} ({trigger.describe()})",
            start_time=trigger.start,
            end_time=trigger.end,
            interval_second=trigger.interval_seconds,
            cron_expression=trigger.cron.expression if trigger.cron else None,
            max_concurrency=max_concurrency,
            no_catchup=not catchup,
            params=chosen.arguments,
            enabled=True,
            pipeline_root=chosen.root,
            **chosen.source,
        ),
    )
    require_id(created.recurring_run_id, "recurring_run_id", "POST /apis/v2beta1/recurringruns", client.host)
    return created


def _file_source(
    client: KfpRunClient, package: Path, raw: Mapping[str, str], pipeline_root: str | None
) -> _ScheduleSource:
    """A compiled file's spec, its parameters typed and its root checked (`KfpRunClient.preflight`)."""
    doc = read_package(package)
    pipeline_name = doc.pipeline_spec.pipeline_info.name
    arguments = typed_arguments(raw, pipeline_parameters(doc.to_dicts()[0]), f"pipeline {pipeline_name}")
    root, notes = client.preflight(doc.pipeline_spec, str(package), pipeline_root)
    return _ScheduleSource(pipeline_name, arguments, {"pipeline_package_path": str(package)}, str(package), root, notes)


def _version_source(
    client: KfpRunClient, pipeline_name: str, version: str | None, raw: Mapping[str, str], pipeline_root: str | None
) -> _ScheduleSource:
    """An uploaded version's spec as the API returns it; without one, the parameters go unchecked (a warning)."""
    chosen = get_version(client, pipeline_name, version)
    notes: list[str] = []
    if chosen.spec:
        arguments = typed_arguments(raw, pipeline_parameters(chosen.spec), f"pipeline {pipeline_name}")
    else:
        arguments = {key: _loose(value) for key, value in raw.items()}
        if raw:
            notes.append(f"the API returned no spec for version {chosen.name}, so --param values were not checked")
    described = f"pipeline {pipeline_name}, version {chosen.name}"
    stored = doc_from_api(chosen.spec)
    root, preflight_notes = client.preflight(stored.pipeline_spec if stored else None, described, pipeline_root)
    source = {"pipeline_id": chosen.pipeline_id, "version_id": chosen.version_id}
    return _ScheduleSource(pipeline_name, arguments, source, described, root, [*notes, *preflight_notes])


def list_schedules(client: KfpRunClient, *, experiment: str | None = None, limit: int = 20) -> list[Schedule]:
    """The newest recurring runs, newest first; only one experiment's when given.

    Raises:
        SubmitError: no such experiment, or as `KfpRunClient.call`.
    """
    listing = client.api().list_recurring_runs
    response = client.list_newest("listing recurring runs", listing, experiment=experiment, limit=limit)
    return [_schedule(recurring) for recurring in response.recurring_runs or []]


def _missing(client: KfpRunClient, schedule_id: str) -> str:
    return f"no recurring run {schedule_id} at {client.host}; list them with `tfxp schedule list --host {client.host}`"


def _change(client: KfpRunClient, schedule_id: str, doing: str, method: str) -> None:
    api = client.api()
    client.call(
        f"{doing} recurring run {schedule_id}",
        lambda: getattr(api, method)(schedule_id),
        missing=_missing(client, schedule_id),
    )


def pause(client: KfpRunClient, schedule_id: str) -> None:
    """Stops a recurring run from starting runs (runs already going continue).

    Raises:
        SubmitError: no such recurring run, or as `KfpRunClient.call`.
    """
    _change(client, schedule_id, "pausing", "disable_recurring_run")


def resume(client: KfpRunClient, schedule_id: str) -> None:
    """Lets a paused recurring run start runs again (with catch-up unless it was created with --no-catchup).

    Raises:
        SubmitError: no such recurring run, or as `KfpRunClient.call`.
    """
    _change(client, schedule_id, "resuming", "enable_recurring_run")


def delete(client: KfpRunClient, schedule_id: str) -> None:
    """Deletes a recurring run (the runs it started stay).

    Raises:
        SubmitError: no such recurring run, or as `KfpRunClient.call`.
    """
    _change(client, schedule_id, "deleting", "delete_recurring_run")
