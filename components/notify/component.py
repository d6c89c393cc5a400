"""`RunNotice`: the Kubeflow exit handler that posts the run's outcome (TFX glue over `components.notify.notice`).

`pipeline.kubeflow.compiler.compile` hands it to `KubeflowV2DagRunner.set_exit_handler` when `kubeflow.notify_url`
is set; KFP runs it after the pipeline's DAG, also when a task failed. Its `final_status` parameter is
bound to TFX's `FinalStatusStr`, which the compiler turns into KFP's `taskFinalStatus` input. Whatever
goes wrong while reading the run's outputs or posting is logged; the component itself always succeeds.
"""

# No `from __future__ import annotations`: TFX reads the component function's annotations as real types.
import logging
import posixpath
from dataclasses import replace
from typing import Any

from tfx.dsl.component.experimental.annotations import Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio

from components.kfp.launcher_paths import opens_directly
from components.notify.notice import (
    FinalStatus,
    FinalStatusError,
    RunOutcome,
    blessing_verdict,
    notice_payload,
    parse_final_status,
    post_notice,
    pushed_version_of,
    run_outcome,
)
from components.notify.run_record import RUN_RECORDS_DIR, RunRecord, read_run_record
from foundation.contract import SAVED_MODEL_FILE
from foundation.publish import push_records
from serving.rollout.state import describe_rollout, rollout_summary

logger = logging.getLogger(__name__)
# The task whose blessing the notice reports, and its output key (TFX's Evaluator).
EVALUATOR_TASK = "Evaluator"
BLESSING_KEY = "blessing"


def _as_json_value(final_status: Any) -> Any:
    # Open-source KFP passes a struct, which TFX's entrypoint hands over as a protobuf Struct.
    if hasattr(final_status, "DESCRIPTOR"):
        from google.protobuf import json_format

        return json_format.MessageToDict(final_status)
    return final_status


def run_outputs_dir(pipeline_root: str, pipeline_name: str, run_id: str) -> str:
    """Where KFP (and `tfxp run-spec`) put a run's artifacts: `<root>/<pipeline>/<run id>/<task>/<output>`."""
    return posixpath.join(pipeline_root.rstrip("/"), pipeline_name, run_id)


def _blessed(pipeline_root: str, pipeline_name: str, run_id: str) -> bool | None:
    if not (pipeline_root and run_id) or not opens_directly(pipeline_root):
        return None  # minio:// and s3:// roots are the launcher's; this task has no copies of them
    # KFP: <run dir>/<task>/<uuid>/<output> (backend/src/v2/driver/driver.go:767-778); run-spec --backend vertex
    # and older layouts without the uuid level.
    run_dir = run_outputs_dir(pipeline_root, pipeline_name, run_id)
    markers = [
        str(path)
        for pattern in (
            f"{run_dir}/{EVALUATOR_TASK}/*/{BLESSING_KEY}/*",
            f"{run_dir}/{EVALUATOR_TASK}/{BLESSING_KEY}/*",
        )
        for path in fileio.glob(pattern)
    ]
    return blessing_verdict(markers)


def _final_status(final_status: Any) -> FinalStatus:
    """The DAG's final status; an UNKNOWN one (logged) when KFP's value cannot be read."""
    try:
        return parse_final_status(_as_json_value(final_status))
    except FinalStatusError as error:
        logger.warning("run notice: %s", error)
        return FinalStatus(state="UNKNOWN", error_message=str(error))


def _find_run_record(serving_base: str, run_id: str, run_name: str) -> tuple[RunRecord | None, str]:
    """(the run's record, why it could not be read: "" when it could or there is none)."""
    record = None
    unreadable = ""
    records = posixpath.join(serving_base, RUN_RECORDS_DIR) if serving_base else ""
    # The RunReport files the record under the run id; a task that stopped the run (a drift stop) under the run's
    # folder name, which is the job's name on Vertex AI (`run_record.run_key_of`).
    for key in dict.fromkeys(key for key in (run_id, run_name) if key and records):
        try:
            record = read_run_record(records, key)
        except Exception as error:  # a truncated or foreign file: say so in the notice, not only in this log
            unreadable = f"run record {records}/{key}.json unreadable ({error})"
            logger.warning("run notice: %s", unreadable)
            break
        if record is not None:
            break
    return record, unreadable


def _outcome_from_outputs(
    status: FinalStatus,
    pipeline_root: str,
    pipeline_name: str,
    serving_base: str,
    run_id: str,
    run_name: str,
    unreadable: str,
) -> RunOutcome:
    """The outcome of a run without a run record, from the blessing and the pushed version it left."""
    blessed = None
    pushed = None
    try:
        blessed = _blessed(pipeline_root, pipeline_name, run_id)
        pushed = pushed_version_of(push_records(serving_base, SAVED_MODEL_FILE) if serving_base else {}, run_id)
    except Exception as error:
        logger.warning("run notice: could not read the run's outputs: %s", error)
    return run_outcome(
        status,
        run_id=run_id,
        run_name=run_name,
        blessed=True if pushed else blessed,
        pushed_version=pushed[0] if pushed else None,
        pushed_path=pushed[1] if pushed else None,
        decision=unreadable or None,
    )


def notice_rollout(serving_base: str) -> str | None:
    """The rollout after the run in words, when the serving base has one (`serving.rollout: canary`)."""
    if not serving_base:
        return None
    try:
        summary = rollout_summary(serving_base)
    except Exception as error:  # a notice never fails on what it reports
        logger.warning("run notice: could not read the rollout state under %s: %s", serving_base, error)
        return None
    if not summary.get("error") and summary["stable"] is None and summary["last_decision"] is None:
        return None  # no rollout state: `serving.rollout: direct`
    return describe_rollout(summary)


# KFP runs this after the pipeline's DAG (exit handler); the parameter names are the spec's input names.
@component
def RunNotice(  # noqa: N802  (TFX names the component, and its task, after the function)
    final_status: Parameter[str],
    notify_url: Parameter[str],
    pipeline_name: Parameter[str],
    pipeline_root: Parameter[str] = "",
    serving_base: Parameter[str] = "",
    run_id: Parameter[str] = "",
    run_name: Parameter[str] = "",
    timeout_seconds: Parameter[float] = 10.0,
) -> None:
    """Posts the run's outcome as JSON to `notify_url`; logs, never raises, when that fails.

    Args:
        final_status: KFP's `PipelineTaskFinalStatus` of the pipeline's DAG.
        notify_url: The receiver (`kubeflow.notify_url`), e.g. a Slack incoming webhook.
        pipeline_name: The pipeline's name, for the text and the run's output directory.
        pipeline_root: The compiled pipeline root; where the Evaluator's blessing is looked up.
        serving_base: TF Serving's model base path; where this run's pushed version is looked up.
        run_id: The run's id (`{{$.pipeline_job_uuid}}`, filled in by KFP).
        run_name: The run's name (`{{$.pipeline_job_name}}`, filled in by KFP).
        timeout_seconds: How long the post may take.
    """
    status = _final_status(final_status)
    record, unreadable = _find_run_record(serving_base, run_id, run_name)
    if record is not None:
        outcome = run_outcome(
            status,
            run_id=run_id,
            run_name=run_name,
            blessed=record.blessed,
            pushed_version=record.pushed_version,
            pushed_path=record.pushed_path,
            decision=record.decision,
            stopped_at=record.stopped_at,
        )
    else:  # the run failed before its last task: look for what it left
        outcome = _outcome_from_outputs(
            status, pipeline_root, pipeline_name, serving_base, run_id, run_name, unreadable
        )
    outcome = replace(outcome, rollout=notice_rollout(serving_base))
    payload = notice_payload(pipeline_name, outcome)
    result = post_notice(notify_url, payload, timeout=timeout_seconds)
    if result.delivered:
        logger.info("run notice delivered (HTTP %s): %s", result.status_code, payload["text"])
    else:
        logger.warning("run notice NOT delivered (%s); it said: %s", result.error, payload["text"])
