"""A Kubeflow Pipelines run as tfxp sees it: its status and summary, the errors of submitting and watching it,
and the wait.

`wait_for_run` is the wait state machine on its own (a poll function, a clock, a sleep), so it is tested
without a server; `KfpRunClient.wait` (pipeline.kubeflow.client.submit) feeds it real polls.

Example:
    final = wait_for_run(lambda remaining: client.status(run_id), run_id, timeout=3600)
    print(progress_line(final, 42.0, ["Trainer", "Evaluator"]))
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from foundation.errors import TfxpError

SUCCEEDED = "SUCCEEDED"
UNSPECIFIED = "RUNTIME_STATE_UNSPECIFIED"
# Terminal run states of the v2beta1 API (V2beta1RuntimeState); only SUCCEEDED is a success.
FINAL_STATES = frozenset({SUCCEEDED, "FAILED", "SKIPPED", "CANCELED"})
# Runs that KFP can retry: those that stopped before finishing their work.
RETRYABLE_STATES = frozenset({"FAILED", "CANCELED"})
# HTTP statuses worth polling through: the API gateway or server is restarting.
_TRANSIENT_STATUSES = frozenset({0, 502, 503, 504})


class SubmitError(TfxpError, RuntimeError):
    """Submitting or watching a run failed; the message says what, where and how to fix it."""


class NoAnswerError(SubmitError):
    """The API did not answer within the deadline."""


class UnreadableAnswerError(SubmitError):
    """The API answered with success, but not with what its endpoint returns (a proxy's page, a cut-off body):
    no answer about the run, so a wait asks again, as after a 5xx."""


class RunFailedError(SubmitError):
    """The run ended in a state other than SUCCEEDED."""

    def __init__(self, message: str, status: RunStatus) -> None:
        super().__init__(message)
        self.status = status


class RunTimeoutError(SubmitError):
    """The run did not finish within the wait timeout (it keeps running on the cluster)."""

    def __init__(self, message: str, status: RunStatus | None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SubmittedRun:
    """Attributes:
    run_id: The KFP run id.
    url: The run's page in the KFP UI.
    experiment: The experiment's name.
    tasks: The pipeline's task names, sorted.
    pipeline_root: The pipeline root the run was sent with; "" = none (KFP's fallback).
    warnings: What the user should know (no pipeline root, an unknown server version).
    """

    run_id: str
    url: str
    experiment: str
    tasks: tuple[str, ...] = ()
    pipeline_root: str = ""
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunStatus:
    """One poll of a run.

    Attributes:
        state: The run's state (`PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED`, ...).
        tasks: Task display name → state, as the API reports them.
        error: The run's error message, if any.
    """

    state: str
    tasks: Mapping[str, str] = field(default_factory=dict)
    error: str = ""

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES


@dataclass(frozen=True)
class RunSummary:
    """A run as `tfxp runs list` shows it.

    Attributes:
        run_id: The KFP run id.
        name: The run's display name.
        state: Its state (`RUNNING`, `SUCCEEDED`, ...).
        created: When it was created (UTC), if known.
        finished: When it ended (UTC), if it has.
        experiment_id: Its experiment.
        recurring_run_id: The recurring run that started it, if any.
    """

    run_id: str
    name: str
    state: str
    created: datetime.datetime | None = None
    finished: datetime.datetime | None = None
    experiment_id: str = ""
    recurring_run_id: str = ""


def api_time(value: object) -> datetime.datetime | None:
    """A time from the KFP API as an aware UTC time; None for a missing one (the API writes 1970-01-01)."""
    if not isinstance(value, datetime.datetime) or value.timestamp() <= 0:
        return None
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


def run_summary(run: Any) -> RunSummary:
    """The summary of an API run (`kfp_server_api.V2beta1Run`)."""
    return RunSummary(
        run_id=str(run.run_id),
        name=str(run.display_name or ""),
        state=str(run.state or UNSPECIFIED),
        created=api_time(run.created_at),
        finished=api_time(run.finished_at),
        experiment_id=str(run.experiment_id or ""),
        recurring_run_id=str(getattr(run, "recurring_run_id", "") or ""),
    )


def run_status(run: Any) -> RunStatus:
    """The status of an API run (`kfp_server_api.V2beta1Run`): state, task states and error message."""
    details = getattr(run, "run_details", None)
    tasks = {
        str(task.display_name): str(task.state)
        for task in (getattr(details, "task_details", None) or [])
        if task.display_name
    }
    error = getattr(run, "error", None)
    return RunStatus(state=str(run.state or UNSPECIFIED), tasks=tasks, error=getattr(error, "message", "") or "")


StatusCallback = Callable[[RunStatus, float], None]
"""Called after each poll with the status and the seconds since waiting began."""


def http_status(error: BaseException) -> int | None:
    """The HTTP status of an error from kfp's API client, or None for any other error."""
    from kfp_server_api import ApiException

    return error.status if isinstance(error, ApiException) else None


def is_connection_error(error: BaseException) -> bool:
    """Whether `error` is a transport failure (refused, reset, cut off), not an answer from the server."""
    import urllib3

    return isinstance(error, urllib3.exceptions.HTTPError | ConnectionError)


def wait_for_run(
    poll: Callable[[float], RunStatus],
    run_id: str,
    *,
    timeout: float,
    poll_seconds: float = 10.0,
    on_status: StatusCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> RunStatus:
    """The wait state machine: poll, report, stop on a final state or at the deadline.

    Transient API failures (unreachable, HTTP 502/503/504, no answer, an answer that cannot be read) are polled
    through until the deadline; anything else (e.g. HTTP 401) stops the wait at once.

    Args:
        poll: Returns the run's status; gets the seconds left before the deadline.
        run_id: For messages.
        timeout: Seconds to wait in total.
        poll_seconds: Seconds between polls.
        on_status: Progress callback.
        clock: Monotonic clock (tests pass a fake one).
        sleep: Sleep function (tests pass a fake one).

    Returns:
        The final status, when it is SUCCEEDED.

    Raises:
        RunFailedError: the run ended FAILED, CANCELED or SKIPPED.
        RunTimeoutError: no final state within `timeout`.
        SubmitError: a non-transient API error.
    """
    started = clock()
    last: RunStatus | None = None
    last_problem = ""
    while True:
        remaining = timeout - (clock() - started)
        if remaining <= 0:
            seen = f"last state {last.state}" if last else "no state read"
            problem = f"; the last poll got no usable answer: {last_problem}" if last_problem else ""
            raise RunTimeoutError(
                f"run {run_id} did not finish within {timeout:g} s ({seen}{problem}); it may still be running on the "
                "cluster — wait longer with a larger --timeout or watch it in the KFP UI",
                last,
            )
        try:
            status = poll(remaining)
        except SubmitError as error:
            if not is_transient(error):
                raise
            last_problem = str(error)
        else:
            last, last_problem = status, ""
            if on_status is not None:
                on_status(status, clock() - started)
            if status.finished:
                return _succeeded(status, run_id)
        sleep(max(0.0, min(poll_seconds, timeout - (clock() - started))))


def _succeeded(status: RunStatus, run_id: str) -> RunStatus:
    """A finished run's status when it SUCCEEDED.

    Raises:
        RunFailedError: it ended otherwise; the message names the failed tasks and KFP's error.
    """
    if status.state != SUCCEEDED:
        reason = f": {status.error}" if status.error else ""
        failed = sorted(name for name, state in status.tasks.items() if state == "FAILED")
        where = f" (failed tasks: {', '.join(failed)})" if failed else ""
        raise RunFailedError(f"run {run_id} ended {status.state}{where}{reason}", status)
    return status


def is_transient(error: SubmitError) -> bool:
    """Whether a failed poll is worth repeating: no answer, an unreadable one, unreachable, or HTTP 502/503/504."""
    if isinstance(error, NoAnswerError | UnreadableAnswerError):
        return True
    cause = error.__cause__
    if cause is None:
        return False
    status = http_status(cause)
    return status in _TRANSIENT_STATUSES if status is not None else is_connection_error(cause)


def progress_line(status: RunStatus, elapsed: float, task_names: Sequence[str] = ()) -> str:
    """`[  42s] RUNNING  done 3/7  running: Trainer` — the tasks of the pipeline only (KFP also reports
    driver and DAG tasks)."""
    wanted = {name.lower(): name for name in task_names}
    tasks = {wanted[name.lower()]: state for name, state in status.tasks.items() if name.lower() in wanted}
    line = f"[{elapsed:6.0f}s] {status.state}"
    if task_names:
        done = sum(state in FINAL_STATES for state in tasks.values())
        running = [name for name in task_names if tasks.get(name) == "RUNNING"]
        line += f"  done {done}/{len(task_names)}"
        if running:
            line += f"  running: {', '.join(running)}"
    return line
