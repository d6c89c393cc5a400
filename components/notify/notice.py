"""The run notice: what a pipeline run's exit handler posts to `kubeflow.notify_url` (plain Python, no TFX).

KFP runs the exit handler after the pipeline's DAG, also when a task failed, and hands it the DAG's
final status (`PipelineTaskFinalStatus`: a JSON object on open-source KFP, a JSON string on Vertex AI).
This module turns that status and what the run left behind (the Evaluator's blessing marker, the push
record of the version the Pusher published) into one JSON payload with a Slack-compatible `text`, and
posts it. A notice that cannot be delivered (timeout, non-2xx answer, unreachable host) is reported to
the caller, never raised: a lost notice must not fail the run it reports on.

Example:
    outcome = run_outcome(parse_final_status('{"state": "FAILED", "error": {"message": "task Trainer failed"}}'))
    result = post_notice("https://hooks.example.com/T0/B0", notice_payload("tfxp-digits", outcome), timeout=10)
    if not result.delivered:
        print("notice not delivered:", result.error)
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from foundation.bounded import parse_json
from foundation.deadline import with_deadline
from foundation.errors import TfxpError
from foundation.paths import name_of
from foundation.publish import recorded_source
from foundation.redirects import RedirectRefusedError, open_url

# KFP task states (open-source KFP's task status names; Vertex AI's `PipelineState` short forms).
# Open-source KFP passes the DAG execution's MLMD state (`GetLastKnownState().String()`: NEW, RUNNING, COMPLETE,
# FAILED, CACHED, CANCELED; kubeflow/pipelines backend/src/v2/driver/resolve.go:471-477, at commit 7b70c7b);
# Vertex AI passes PipelineState names (SUCCEEDED, FAILED, CANCELLED, with or without `PIPELINE_STATE_`).
_STATUS_BY_STATE = {
    "COMPLETE": "succeeded",
    "CACHED": "succeeded",
    "SUCCEEDED": "succeeded",
    "SUCCESS": "succeeded",
    "FAILED": "failed",
    "FAILURE": "failed",
    "CANCELED": "cancelled",
    "CANCELLED": "cancelled",
    "CANCELING": "cancelled",
}
# How orchestrators name the failed task in the final status' error message: `tfxp run-spec`
# ("task Trainer failed: ...") and Vertex AI ("... The failed tasks are: [Trainer]."). Open-source KFP
# leaves the error empty, so there the notice cannot name the task.
_FAILED_TASK_PATTERNS = (
    re.compile(r"\btask (?P<task>[\w.-]+) failed"),
    re.compile(r"failed tasks are: \[(?P<task>[^\],]+)"),
)
_ICONS = {"succeeded": ":white_check_mark:", "failed": ":x:", "cancelled": ":no_entry_sign:"}


class FinalStatusError(TfxpError, ValueError):
    """The exit handler's final status is not a `PipelineTaskFinalStatus`."""


@dataclass(frozen=True)
class FinalStatus:
    """The fields of KFP's `PipelineTaskFinalStatus` the notice uses.

    Attributes:
        state: The DAG's final state as the orchestrator spells it, e.g. `FAILED`.
        run_name: `pipelineJobResourceName`: the run's resource name; empty when not given.
        error_message: `error.message`; empty when the orchestrator gives none (open-source KFP).
    """

    state: str
    run_name: str = ""
    error_message: str = ""


@dataclass(frozen=True)
class RunOutcome:
    """What the notice reports.

    Attributes:
        status: `succeeded`, `failed`, `cancelled` or `unknown`.
        state: The orchestrator's own state name.
        failed_task: The task that failed, when the orchestrator says; else None.
        error: The orchestrator's error message; empty when none.
        run_id: The run's id (`{{$.pipeline_job_uuid}}`); empty when unknown.
        run_name: The run's name; empty when unknown.
        blessed: The Evaluator's verdict, None when the run left no blessing.
        pushed_version: The serving version this run published, None when it pushed none (or it is unknown).
        pushed_path: That version's directory.
        decision: What the run decided, in words (`no new data`, `pushed version N`, ...), from its run record
            (`components.notify.run_record`); None when the run left none.
        rollout: Under a guarded rollout, the labels and the last decision after the run, in words
            (`serving.rollout.state.describe_rollout`); None when the serving base has no rollout.
    """

    status: str
    state: str
    failed_task: str | None = None
    error: str = ""
    run_id: str = ""
    run_name: str = ""
    blessed: bool | None = None
    pushed_version: str | None = None
    pushed_path: str | None = None
    decision: str | None = None
    rollout: str | None = None


@dataclass(frozen=True)
class NoticeResult:
    """Attributes:
    delivered: The receiver answered 2xx.
    status_code: Its HTTP status; None when there was no answer.
    error: Why the notice was not delivered; empty when it was.
    """

    delivered: bool
    status_code: int | None = None
    error: str = ""


def parse_final_status(value: str | Mapping[str, Any]) -> FinalStatus:
    """Reads a `PipelineTaskFinalStatus` given as a JSON string (Vertex AI, TFX's `FinalStatusStr`) or as a
    mapping (open-source KFP passes a struct), camelCase or snake_case keys.

    Raises:
        FinalStatusError: not JSON, not an object, or no `state`.
    """
    status: Any = value
    if isinstance(value, str):
        try:
            status = parse_json(value)
        except ValueError as problem:  # not JSON, or nested too deep to read
            raise FinalStatusError(f"the final status is not JSON ({problem}): {value[:200]!r}") from None
    if not isinstance(status, Mapping):
        raise FinalStatusError(f"the final status is not a JSON object: {status!r}")
    state = status.get("state")
    if not isinstance(state, str) or not state:
        raise FinalStatusError(f"the final status has no state: {dict(status)!r}")
    error = status.get("error")
    message = error.get("message", "") if isinstance(error, Mapping) else ""
    run_name = status.get("pipelineJobResourceName", status.get("pipeline_job_resource_name", ""))
    return FinalStatus(state=state, run_name=str(run_name or ""), error_message=str(message or ""))


def failed_task(error_message: str) -> str | None:
    """The failed task's name when the error message names it (see `_FAILED_TASK_PATTERNS`), else None."""
    for pattern in _FAILED_TASK_PATTERNS:
        match = pattern.search(error_message)
        if match:
            return match.group("task").strip()
    return None


def run_outcome(
    status: FinalStatus,
    run_id: str = "",
    run_name: str = "",
    blessed: bool | None = None,
    pushed_version: str | None = None,
    pushed_path: str | None = None,
    decision: str | None = None,
    stopped_at: str | None = None,
    rollout: str | None = None,
) -> RunOutcome:
    """Combines the final status with what the run's outputs say.

    Args:
        status: From `parse_final_status`.
        run_id: The run's id, when known.
        run_name: The run's name; default the final status' resource name.
        blessed: From `blessing_verdict`.
        pushed_version: From `pushed_version_of`.
        pushed_path: The pushed version's directory.
        decision: The run record's decision.
        stopped_at: The task that stopped the run and wrote its record (`RunRecord.stopped_at`): the failed task
            when the final status does not name one (open-source KFP never does).
        rollout: The rollout in words, under a guarded rollout.
    """
    state = status.state.upper()
    outcome = _STATUS_BY_STATE.get(state.removeprefix("PIPELINE_STATE_"), "unknown")
    return RunOutcome(
        status=outcome,
        state=status.state,
        failed_task=(failed_task(status.error_message) or stopped_at) if outcome == "failed" else None,
        error=status.error_message,
        run_id=run_id,
        run_name=run_name or status.run_name,
        blessed=blessed,
        pushed_version=pushed_version,
        pushed_path=pushed_path,
        decision=decision,
        rollout=rollout,
    )


def blessing_verdict(marker_names: list[str]) -> bool | None:
    """The Evaluator's verdict from the file names in its blessing artifact (`BLESSED` / `NOT_BLESSED`)."""
    names = {name.rstrip("/").rsplit("/", 1)[-1] for name in marker_names}
    if "BLESSED" in names:
        return True
    if "NOT_BLESSED" in names:
        return False
    return None


def pushed_version_of(records: Mapping[str, Mapping[str, Any]], run_id: str) -> tuple[str, str] | None:
    """The version this run published, from the serving base's push records.

    Args:
        records: Version directory → its push record, newest first (`foundation.publish.push_records`: the
            record names the SavedModel the Pusher published, `recorded_source`, which lies under the run's
            outputs).
        run_id: The run's id; a record whose source path has it as a path segment is this run's.

    Returns:
        (version, version directory), or None when no record is this run's.
    """
    if not run_id:
        return None
    for directory, record in records.items():
        if run_id in recorded_source(record).split("/"):
            return str(record.get("version", name_of(directory))), directory
    return None


def notice_text(pipeline: str, outcome: RunOutcome) -> str:
    """The one-line, Slack-compatible summary, e.g. `:x: tfxp-digits run r-1 failed at Trainer`."""
    run = f" run {outcome.run_name or outcome.run_id}" if (outcome.run_name or outcome.run_id) else ""
    line = f"{_ICONS.get(outcome.status, ':grey_question:')} {pipeline}{run} {outcome.status}"
    if outcome.status == "unknown":
        line += f" (state {outcome.state})"
    if outcome.failed_task:
        line += f" at {outcome.failed_task}"
    details = []
    if outcome.decision and not outcome.pushed_version:
        details.append(outcome.decision)
    if outcome.blessed is not None and not outcome.decision:
        details.append("model blessed" if outcome.blessed else "model not blessed")
    if outcome.pushed_version:
        details.append(f"pushed version {outcome.pushed_version}")
    elif outcome.status == "succeeded" and outcome.blessed and not outcome.decision:
        details.append("no pushed version found")
    if outcome.error and not outcome.failed_task:
        details.append(outcome.error[:300])
    if outcome.status == "failed" and not outcome.failed_task and not outcome.error:
        # Open-source KFP's final status names neither (driver/resolve.go:475).
        details.append("the orchestrator does not say which task failed: see the run's graph and task logs")
    if outcome.rollout:
        details.append(f"rollout: {outcome.rollout}")
    return f"{line}: {'; '.join(details)}" if details else line


def notice_payload(pipeline: str, outcome: RunOutcome) -> dict[str, Any]:
    """The JSON the exit handler posts: `text` (Slack's incoming-webhook field), `pipeline` and every field of
    `outcome`."""
    return {"text": notice_text(pipeline, outcome), "pipeline": pipeline, **asdict(outcome)}


def post_notice(url: str, payload: Mapping[str, Any], timeout: float = 10.0) -> NoticeResult:
    """POSTs `payload` as JSON to `url`; never raises.

    Args:
        url: An http(s) URL.
        payload: From `notice_payload`.
        timeout: Seconds for the whole call (connecting, sending, the answer), however slowly the receiver answers.

    Returns:
        Whether the receiver answered 2xx, and otherwise why not.
    """
    if not url.startswith(("http://", "https://")):
        return NoticeResult(delivered=False, error=f"{url!r} is not an http(s) URL")
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "tfxp-notice"},
        method="POST",
    )

    def send() -> int:
        with open_url(request, timeout) as response:  # a redirect to another origin is not followed
            return int(response.status)

    try:
        # `timeout` bounds the whole call: a receiver that trickles its answer byte by byte trips no socket timeout.
        code = with_deadline(send, timeout, TimeoutError(f"no answer within {timeout:g} s"))
    except RedirectRefusedError as error:
        return NoticeResult(delivered=False, status_code=error.status, error=str(error))
    except urllib.error.HTTPError as error:
        return NoticeResult(delivered=False, status_code=error.code, error=f"{url} answered HTTP {error.code}")
    except (urllib.error.URLError, OSError) as error:  # unreachable, refused, timed out
        reason = getattr(error, "reason", error)
        return NoticeResult(delivered=False, error=f"{url} could not be reached: {reason}")
    if not 200 <= code < 300:
        return NoticeResult(delivered=False, status_code=code, error=f"{url} answered HTTP {code}")
    return NoticeResult(delivered=True, status_code=code)
