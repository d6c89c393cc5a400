"""ExampleValidator that stops the pipeline on anomalies, before the Trainer sees bad data.

TFX's ExampleValidator records anomalies and marks its output "not blessed", but nothing downstream
reads that mark, so the Trainer would train on bad data. tfxp fails the component instead, with the
anomalies in words.

Before the schema, it checks what no schema expresses: a span the run read with a split of fewer than
`data.min_span_examples` records (`components.validation.span_sizes`; the statistics merge the spans, so only a
count per span folder shows one that arrived empty), every image the Trainer would stop on, named by span, file and
record (`components.validation.span_images`: the model's format, pixel and scan limits, and its decoder), and
(`components.validation.data_checks`) a split with 0
records, `image/encoded` values that are not images the model accepts, and examples of other classes than the
label map. The second reads TFDV's image statistics and, where they flag values, the split's examples (the
optional `examples` input); the third reads every example's label, synset and text and matches them with the
label map by the synset-or-text rule `data.label_offset: auto` uses
(`foundation.data.class_match.class_problems`), so a span of other classes is refused on LocalDagRunner and
Kubeflow alike.

After the schema, with `data.drift` on (the `drift` execution property, a `DriftRun` as JSON), it judges each
span not yet passed against the spans before it (`components.validation.drift_check`): a finding above its threshold
stops the run with `DriftError` (`action: fail`), or is recorded and the run goes on (`action: warn`). Every
distance measured is written to `drift.json` in the anomalies artifact and its stops and warnings to the
artifact's custom properties `drift_warnings` and `drift_accepted` (the run summary's `data.drift`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
from typing import Any

from tensorflow_metadata.proto.v0 import anomalies_pb2, statistics_pb2
from tfx import types
from tfx.components.example_validator import executor as example_validator_executor
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ExecutionParameter
from tfx.utils import io_utils, json_utils

from components.notify.run_record import RunRecord, run_dir_of, run_key_of, write_run_record
from components.validation.data_checks import (
    RefusedImages,
    class_mismatches,
    count_refused_images,
    data_problems,
    names_classes,
    read_class_evidence,
)
from components.validation.drift import RECORD_PROPERTIES, DriftDecision, stop_decision, stop_message
from components.validation.label_map_schema import CONTRACT_FEATURES
from components.validation.span_images import ImageCheck, check_span_images
from components.validation.span_sizes import SpanSizeCheck, check_span_sizes
from foundation.contract import LABEL_KEY, read_label_map
from foundation.data.spans import INPUT_BASE_PROPERTY, SPANS_PROPERTY, parse_spans
from foundation.errors import TfxpError

logger = logging.getLogger(__name__)
ANOMALIES_FILE = "SchemaDiff.pb"
DRIFT_KEY = "drift"
# The span-size check (`components.validation.span_sizes.SpanSizeCheck` as JSON); empty = off.
SPAN_SIZES_KEY = "span_sizes"
# The image check (`components.validation.span_images.ImageCheck` as JSON); empty = off.
IMAGE_CHECK_KEY = "image_check"
DRIFT_FILE = "drift.json"
# On Kubeflow: where a drift stop files the run record the exit handler reads (`components.notify.run_record`;
# the RunReport, which writes it otherwise, never runs after a stop). Unset locally.
RUN_RECORD_DIR_KEY = "run_record_dir"
COMPONENT_ID = "ExampleValidator"
# A feature in the eval split that the train split (the schema's source) lacks; only the contract's features
# matter, so for any other feature this is not a problem.
_NEW_COLUMN = anomalies_pb2.AnomalyInfo.SCHEMA_NEW_COLUMN
LABELS_PATH_KEY = "labels_path"
LABEL_OFFSET_KEY = "label_offset"
_OUT_OF_RANGE = (anomalies_pb2.AnomalyInfo.INT_TYPE_SMALL_INT, anomalies_pb2.AnomalyInfo.INT_TYPE_BIG_INT)
LABEL_RANGE_HINT = (
    f"labels outside the label map: check data.labels and data.label_offset ({LABEL_KEY} minus the offset must "
    "be a line of the label map, counted from 0; ImageNet's build scripts write 1-based labels, offset 1)"
)


class DataValidationError(TfxpError, RuntimeError):
    """The examples violate the schema, or cannot be trained on; the message lists every problem."""


class DriftError(DataValidationError):
    """The newest span does not look like the spans before it (`data.drift`); the message names the span, the
    feature, the distance, the threshold and its key. `record` is `drift.json`'s content (every distance, the label
    counts), which a failed execution publishes nowhere else: the local run summary keeps it for the report."""

    def __init__(self, message: str, record: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.record = record or {}


def describe_anomalies(split: str, anomalies: anomalies_pb2.Anomalies) -> list[str]:
    """One line a problem: `split 'eval', feature 'image/class/label': <TFDV's description>`.

    A feature outside the data contract that only the eval split has is not a problem (see `_NEW_COLUMN`).
    """
    lines = []
    for feature, info in sorted(anomalies.anomaly_info.items()):
        kept = [reason for reason in info.reason if feature in CONTRACT_FEATURES or reason.type != _NEW_COLUMN]
        if info.reason and not kept:
            continue
        reasons = "; ".join(reason.description or reason.short_description for reason in kept)
        line = f"split '{split}', feature '{feature}': {reasons or info.description}"
        if feature == LABEL_KEY and any(reason.type in _OUT_OF_RANGE for reason in kept):
            line += f" ({LABEL_RANGE_HINT})"
        lines.append(line)
    if anomalies.HasField("dataset_anomaly_info"):
        info = anomalies.dataset_anomaly_info
        reasons = "; ".join(reason.description for reason in info.reason)
        lines.append(f"split '{split}', whole data set: {reasons or info.description}")
    return lines


def _check_before_validation(input_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> list[str]:
    """What makes the examples unusable before TFX's schema validation runs: span sizes, images, the data checks
    and the label map's classes, per split.

    Raises:
        DataValidationError: something is unusable and a span or a split is short of records (the schema
            anomalies those cause would mislead, so they are not reported).
    """
    statistics = artifact_utils.get_single_instance(input_dict[standard_component_specs.STATISTICS_KEY])
    examples = input_dict.get(standard_component_specs.EXAMPLES_KEY) or []
    span_sizes = exec_properties.get(SPAN_SIZES_KEY)
    unusable = (
        check_span_sizes(SpanSizeCheck.from_json(span_sizes), *_spans_read(examples[0]))
        if span_sizes and examples
        else []
    )
    # A span or a split short of records also shows as schema anomalies that would mislead: stop before them.
    too_few = bool(unusable)
    image_check = exec_properties.get(IMAGE_CHECK_KEY)
    if image_check:
        spans_read = _spans_read(examples[0]) if examples else ("", [])
        unusable.extend(check_span_images(ImageCheck.from_json(image_check), *spans_read))
    labels_path = exec_properties.get(LABELS_PATH_KEY) or ""
    names = read_label_map(labels_path) if labels_path and examples else []
    for split in artifact_utils.decode_split_names(statistics.split_names):
        datasets = stats_artifact_utils.load_statistics(statistics, split).proto().datasets
        split_statistics = datasets[0] if datasets else statistics_pb2.DatasetFeatureStatistics()
        too_few = too_few or split_statistics.num_examples == 0
        counter = None
        if image_check:  # it judged every value already, naming each by span, file and record
            counter = functools.partial(RefusedImages, 0)
        elif examples:
            pattern = os.path.join(artifact_utils.get_split_uri(examples, split), "*")
            counter = functools.partial(count_refused_images, pattern)
        unusable.extend(data_problems(split, split_statistics, counter))
        if names and names_classes(split_statistics):
            evidence = read_class_evidence(os.path.join(artifact_utils.get_split_uri(examples, split), "*"))
            offset = int(exec_properties.get(LABEL_OFFSET_KEY) or 0)
            unusable.extend(class_mismatches(split, evidence, names, offset))
    if unusable and too_few:
        raise DataValidationError(
            "the examples cannot be trained on, so training was not started:\n  - " + "\n  - ".join(unusable)
        )
    return unusable


def _schema_problems(anomalies_artifacts: list[types.Artifact]) -> list[str]:
    """TFX's schema anomalies of every split, one line each (`describe_anomalies`)."""
    problems: list[str] = []
    for split in artifact_utils.decode_split_names(anomalies_artifacts[0].split_names):
        path = os.path.join(artifact_utils.get_split_uri(anomalies_artifacts, split), ANOMALIES_FILE)
        anomalies = anomalies_pb2.Anomalies()
        anomalies.ParseFromString(io_utils.read_bytes_file(path))
        problems.extend(describe_anomalies(split, anomalies))
    return problems


class StrictExampleValidatorExecutor(example_validator_executor.Executor):
    """Runs TFX's validation, then raises DataValidationError if any split has anomalies."""

    def Do(  # noqa: N802  (TFX's executor API)
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> Any:
        examples = input_dict.get(standard_component_specs.EXAMPLES_KEY) or []
        unusable = _check_before_validation(input_dict, exec_properties)
        result = super().Do(input_dict, output_dict, exec_properties)
        anomalies_artifacts = output_dict[standard_component_specs.ANOMALIES_KEY]
        problems = _schema_problems(anomalies_artifacts)
        if unusable or problems:  # both kinds, so one fix of the data settles every problem found
            message = "the examples cannot be trained on, so training was not started:\n  - " + "\n  - ".join(
                [*unusable, *problems]
            )
            if problems:
                message += (
                    "\nFix the data (see `tfxp data inspect DIR`), or if the data is right, curate the schema "
                    "(`data.schema=<path to schema.pbtxt>`)."
                )
            raise DataValidationError(message)
        if exec_properties.get(DRIFT_KEY):
            self._check_drift(
                exec_properties[DRIFT_KEY],
                anomalies_artifacts[0],
                examples[0] if examples else None,
                exec_properties.get(RUN_RECORD_DIR_KEY) or "",
            )
            if result is not None:  # TFX publishes the ExecutorOutput's copy of the artifact: refresh it
                published = result.output_artifacts[standard_component_specs.ANOMALIES_KEY].artifacts
                del published[:]
                published.append(anomalies_artifacts[0].mlmd_artifact)
        return result

    def _check_drift(
        self, drift_json: str, anomalies: types.Artifact, examples: types.Artifact | None, record_dir: str
    ) -> None:
        """Runs the drift checks, records every distance in the anomalies artifact, and stops on `fail`.

        The spans are those the ExampleGen read (its artifact's `input_base` and `spans`), so Kubeflow's run
        parameters `data_path` and `spans` are honoured."""
        from components.validation.drift_check import DriftRun, check_drift

        run = DriftRun.from_json(drift_json)
        input_base, spans = _spans_read(examples) if examples is not None else ("", [])
        decision = check_drift(run, input_base, spans or None)
        record = {**decision.to_dict(), "timings": run.timings}
        io_utils.write_string_file(os.path.join(anomalies.uri, DRIFT_FILE), json.dumps(record, indent=2))
        for name in RECORD_PROPERTIES:
            anomalies.set_string_custom_property(name, json.dumps(record[name.removeprefix("drift_")]))
        for finding in decision.findings:
            logger.info("drift: %s", finding.describe())
        for finding in (*decision.warnings, *decision.accepted):
            logger.warning("drift (%s): %s", "accepted" if finding in decision.accepted else "warn", finding.describe())
        if decision.stops:
            if record_dir:
                record_drift_stop(record_dir, anomalies.uri, decision)
            raise DriftError(stop_message(decision), record)


def _spans_read(examples: types.Artifact) -> tuple[str, list[int]]:
    """Where the ExampleGen read its spans (`data.path`, or Kubeflow's `data_path` run parameter) and which it read
    (its Examples artifact's custom properties); ("", []) without spans."""
    input_base = str(examples.get_string_custom_property(INPUT_BASE_PROPERTY) or "")
    return input_base, parse_spans(str(examples.get_string_custom_property(SPANS_PROPERTY) or ""))


def record_drift_stop(record_dir: str, anomalies_uri: str, decision: DriftDecision) -> str:
    """Files a drift stop's run record under `record_dir`, named after the run's folder (found from this task's
    output, `run_dir_of`), so the exit handler's notice says which span and why; best effort. Returns its path,
    "" when it was not written."""
    run_dir = run_dir_of(anomalies_uri, COMPONENT_ID)
    if not run_dir:
        logger.warning("drift stop: no run folder in %s: no run record for the notice", anomalies_uri)
        return ""
    record = RunRecord.stopped(run_key_of(run_dir), COMPONENT_ID, stop_decision(decision))
    try:
        path = write_run_record(record_dir, record)
    except Exception as error:  # the notice then says less; the stop itself stands
        logger.warning("drift stop: run record not written under %s: %s", record_dir, error)
        return ""
    logger.info("drift stop: run record %s", path)
    return path


class StrictExampleValidatorSpec(standard_component_specs.ExampleValidatorSpec):
    """ExampleValidator's spec plus the examples (their images judged where the statistics flag them, their
    classes matched with the label map, their spans counted), the label map with its offset, and the settings of
    the span-size check (`SpanSizeCheck` as JSON) and the drift checks (`DriftRun` as JSON); empty = off."""

    PARAMETERS = {  # noqa: RUF012  (TFX's ComponentSpec API)
        **standard_component_specs.ExampleValidatorSpec.PARAMETERS,
        LABELS_PATH_KEY: ExecutionParameter(type=str, optional=True),
        LABEL_OFFSET_KEY: ExecutionParameter(type=int, optional=True),
        DRIFT_KEY: ExecutionParameter(type=str, optional=True),
        SPAN_SIZES_KEY: ExecutionParameter(type=str, optional=True),
        IMAGE_CHECK_KEY: ExecutionParameter(type=str, optional=True),
        RUN_RECORD_DIR_KEY: ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {  # noqa: RUF012  (TFX's ComponentSpec API)
        **standard_component_specs.ExampleValidatorSpec.INPUTS,
        standard_component_specs.EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples, optional=True),
    }


class StrictExampleValidator(ExampleValidator):
    """ExampleValidator whose execution fails when the statistics show anomalies or unusable splits.

    Args:
        statistics: StatisticsGen's output, computed with `data_checks.statistics_options()`.
        schema: The schema to validate against.
        examples: ExampleGen's output; lets the check tell images the model accepts that TFDV does not know
            (WebP) from values that are not images. Without it, TFDV's verdict stands.
        exclude_splits: Splits not to validate.
        labels_path: The label map (`data.labels_path`); with `examples`, examples of other classes are refused.
            Empty = their classes are not checked.
        label_offset: The first label (`data.label_offset`, resolved).
        drift: `components.validation.drift_check.DriftRun` as JSON; empty = no drift checks.
        span_sizes: `components.validation.span_sizes.SpanSizeCheck` as JSON (`data.min_span_examples`); empty =
            the spans are not counted.
        image_check: `components.validation.span_images.ImageCheck` as JSON (`trainer.max_image_pixels`); empty =
            the images are not read.
    """

    SPEC_CLASS = StrictExampleValidatorSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(StrictExampleValidatorExecutor)

    def __init__(
        self,
        statistics: types.BaseChannel,
        schema: types.BaseChannel,
        examples: types.BaseChannel | None = None,
        exclude_splits: list[str] | None = None,
        labels_path: str = "",
        label_offset: int = 0,
        drift: str = "",
        span_sizes: str = "",
        image_check: str = "",
    ) -> None:
        spec = StrictExampleValidatorSpec(
            statistics=statistics,
            schema=schema,
            examples=examples,
            exclude_splits=json_utils.dumps(exclude_splits or []),
            labels_path=labels_path,
            label_offset=label_offset,
            drift=drift or None,
            span_sizes=span_sizes or None,
            image_check=image_check or None,
            anomalies=types.Channel(type=standard_artifacts.ExampleAnomalies),
        )
        base_component.BaseComponent.__init__(self, spec=spec)  # ExampleValidator's would build its own spec
