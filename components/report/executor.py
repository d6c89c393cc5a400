"""The RunReport's executor: the input artifacts → `ReportInputs` → the page, written where a reader finds it.

It never fails the run: an input it cannot read is a line on the page (`inputs`), and an error in building the
page becomes a short page that says what went wrong. Writing next to the pushed model is best effort too: the
artifact's `published_path` stays "" and the log says why.
"""

from __future__ import annotations

import html
import logging
import posixpath

import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils

from components.baseline.spec import NOT_COMPARED_PROPERTY, SERVED_PATH_PROPERTY, SERVED_VERSION_PROPERTY
from components.executor_types import ArtifactDict, ExecProperties
from components.load_check.blessing import BLESSED_PROPERTY, REASON_PROPERTY
from components.notify.run_record import RunRecord, run_dir_of, write_run_record
from components.report import spec as keys
from components.report.build import REPORT_FILE, report_html
from components.report.inputs import ReportInputs, facts_from_inputs
from components.report.render import CONTENT_SECURITY_POLICY
from foundation.bounded import parse_json
from foundation.data.spans import SPANS_PROPERTY
from foundation.model_identity import MODEL_IDENTITY_PROPERTY, version_holds

logger = logging.getLogger(__name__)

REPORTS_DIR = "reports"
"""Beside the versions under the serving base path: `<serving base>/reports/<version>.html` (not a version)."""


class Executor(base_executor.BaseExecutor):
    """Writes `report.html` into the `report` artifact and, when a model was pushed, next to it."""

    def Do(self, input_dict: ArtifactDict, output_dict: ArtifactDict, exec_properties: ExecProperties) -> None:  # noqa: N802  (TFX's API)
        """Writes the report; raises nothing the report itself could cause."""
        self._log_startup(input_dict, output_dict, exec_properties)
        report = artifact_utils.get_single_instance(output_dict[keys.REPORT_KEY])
        inputs: ReportInputs | None = None
        problems = 0
        try:
            inputs = report_inputs(input_dict, exec_properties)
            facts = facts_from_inputs(inputs)
            problems = len(facts.problems) + len(facts.summary.get("problems", []))
            document = report_html(facts)
        except Exception as error:  # the run succeeded; the report says why it is short instead of failing it
            logger.exception("run report: cannot build the page")
            problems += 1
            document = error_page(error)
        write_text(f"{report.uri}/{REPORT_FILE}", document)
        published = ""
        if inputs is not None and inputs.pushed_destination:
            target = published_report_path(inputs.pushed_destination)
            try:
                # The run that pushed a version owns its report: a later run that only found the same model
                # already pushed (no new data) leaves it as it is.
                if not tf.io.gfile.exists(target):
                    write_text(target, document)
                published = target
            except Exception as error:  # the artifact has the report; a read-only serving base loses only the copy
                logger.warning("run report: not written next to the pushed model (%s): %s", target, error)
        _write_run_record(input_dict, exec_properties, report.uri)
        report.set_string_custom_property("published_path", published)
        report.set_int_custom_property("problems", problems)
        logger.info("run report: %s/%s%s", report.uri, REPORT_FILE, f" and {published}" if published else "")


def _write_run_record(input_dict: ArtifactDict, exec_properties: ExecProperties, report_uri: str) -> None:
    """On Kubeflow, the run record the exit handler reads (`components.notify.run_record`); best effort."""
    run_id, record_dir = exec_properties.get(keys.RUN_ID_KEY), exec_properties.get(keys.RUN_RECORD_DIR_KEY)
    if not (run_id and record_dir):
        return
    blessing = _single(input_dict, keys.BLESSING_KEY)
    infra_blessing = _single(input_dict, keys.INFRA_BLESSING_KEY)
    pushed = _single(input_dict, keys.PUSHED_MODEL_KEY)
    was_pushed = pushed is not None and bool(pushed.get_int_custom_property("pushed")) and holds_pushed(pushed)
    refusal = None
    if infra_blessing is not None and not infra_blessing.get_int_custom_property(BLESSED_PROPERTY):
        refusal = infra_blessing.get_string_custom_property(REASON_PROPERTY) or "no reason recorded"
    record = RunRecord.of(
        run_dir=run_dir_of(report_uri, keys.COMPONENT_ID),
        run_id=run_id,
        examples_uri=_uri(input_dict, keys.EXAMPLES_KEY),
        model_uri=_uri(input_dict, keys.MODEL_KEY),
        blessed=bool(blessing.get_int_custom_property("blessed")) if blessing is not None else None,
        pushed_uri=pushed.uri if pushed is not None else None,
        pushed_version=pushed.get_string_custom_property("pushed_version") if pushed and was_pushed else None,
        pushed_path=pushed.get_string_custom_property("pushed_destination") if pushed and was_pushed else None,
        published_now=not (pushed and pushed.has_custom_property("published_now"))
        or bool(pushed.get_int_custom_property("published_now")),
        load_check_refusal=refusal,
    )
    try:
        logger.info("run record: %s (%s)", write_run_record(record_dir, record), record.decision)
    except Exception as error:  # the exit handler then says the outcome is unknown; the run itself succeeded
        logger.warning("run record: not written under %s: %s", record_dir, error)


def holds_pushed(pushed: types.Artifact) -> bool:
    """Whether the version the Pusher recorded holds the model it pushed, read back from the version's files
    (`foundation.model_identity.version_holds`): what the notice says was published is what is on disk. True
    for a Pusher execution from before tfxp recorded the identity (nothing to check against)."""
    identity = pushed.get_string_custom_property(MODEL_IDENTITY_PROPERTY)
    if not identity:
        return True
    destination = pushed.get_string_custom_property("pushed_destination")
    try:
        return bool(destination) and version_holds(destination, identity)
    except OSError as error:  # an unreadable serving base: the record says nothing was pushed, the log says why
        logger.warning("run record: cannot read the pushed version %s back: %s", destination, error)
        return False


def _single(input_dict: ArtifactDict, key: str) -> types.Artifact | None:
    artifacts = input_dict.get(key) or []
    return artifacts[0] if artifacts else None


def _uri(input_dict: ArtifactDict, key: str) -> str | None:
    artifact = _single(input_dict, key)
    return artifact.uri if artifact is not None else None


def report_inputs(input_dict: ArtifactDict, exec_properties: ExecProperties) -> ReportInputs:
    """What the input artifacts say: their directories and the custom properties the page shows."""
    examples = _single(input_dict, keys.EXAMPLES_KEY)
    blessing = _single(input_dict, keys.BLESSING_KEY)
    baseline = _single(input_dict, keys.BASELINE_MODEL_KEY)
    infra_blessing = _single(input_dict, keys.INFRA_BLESSING_KEY)
    pushed = _single(input_dict, keys.PUSHED_MODEL_KEY)
    pushed_destination = None
    if pushed is not None and pushed.get_int_custom_property("pushed"):
        pushed_destination = pushed.get_string_custom_property("pushed_destination") or None
    return ReportInputs(
        config=parse_json(exec_properties[keys.CONFIG_KEY]),
        labels_path=exec_properties.get(keys.LABELS_PATH_KEY) or "",
        out_dir=exec_properties.get(keys.OUT_DIR_KEY) or "",
        spans=examples.get_string_custom_property(SPANS_PROPERTY) if examples is not None else None,
        statistics_uri=_uri(input_dict, keys.STATISTICS_KEY),
        anomalies_uri=_uri(input_dict, keys.ANOMALIES_KEY),
        model_uri=_uri(input_dict, keys.MODEL_KEY),
        model_run_uri=_uri(input_dict, keys.MODEL_RUN_KEY),
        evaluation_uri=_uri(input_dict, keys.EVALUATION_KEY),
        blessed=bool(blessing.get_int_custom_property("blessed")) if blessing is not None else None,
        baseline=None
        if baseline is None
        else {
            "version": baseline.get_string_custom_property(SERVED_VERSION_PROPERTY),
            "path": baseline.get_string_custom_property(SERVED_PATH_PROPERTY),
            "not_compared": baseline.get_string_custom_property(NOT_COMPARED_PROPERTY),
        },
        load_check=None
        if infra_blessing is None
        else {
            "uri": infra_blessing.uri,
            "blessed": bool(infra_blessing.get_int_custom_property(BLESSED_PROPERTY)),
            "reason": infra_blessing.get_string_custom_property(REASON_PROPERTY),
        },
        pushed_destination=pushed_destination,
        edge_model_uri=_uri(input_dict, keys.EDGE_MODEL_KEY),
    )


def published_report_path(pushed_destination: str) -> str:
    """`<serving base>/reports/<version>.html` for the version directory `<serving base>/<version>`."""
    base, version = posixpath.split(pushed_destination.rstrip("/"))
    return f"{base}/{REPORTS_DIR}/{version}.html"


def write_text(path: str, text: str) -> None:
    """Writes `text` to `path` (local or a bucket); a local reader never sees half a file."""
    tf.io.gfile.makedirs(posixpath.dirname(path))
    staged = f"{posixpath.dirname(path)}/.{posixpath.basename(path)}.tmp"
    with tf.io.gfile.GFile(staged, "w") as handle:
        handle.write(text)
    tf.io.gfile.rename(staged, path, overwrite=True)


def error_page(error: BaseException) -> str:
    """A short self-contained page saying the report could not be built, and why."""
    why = html.escape(f"{type(error).__name__}: {error}")
    return f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">
<title>Run report: could not be built</title></head>
<body><main><h1>Run report: could not be built</h1>
<p role="note">The RunReport component could not read the run's outputs into a report: {why}.
The run itself is not affected; its outputs are in the pipeline root.</p></main></body>
</html>
"""
