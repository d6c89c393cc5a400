"""ExampleValidator that stops the pipeline on anomalies, before the Trainer sees bad data.

TFX's ExampleValidator records anomalies and marks its output "not blessed", but nothing downstream
reads that mark, so the Trainer would train on bad data. tfxp fails the component instead, with the
anomalies in words.
"""

from __future__ import annotations

import os
from typing import Any

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx import types
from tfx.components.example_validator import executor as example_validator_executor
from tfx.components.example_validator.component import ExampleValidator
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils

from components.contract import LABEL_KEY
from components.validation.label_map_schema import CONTRACT_FEATURES

ANOMALIES_FILE = "SchemaDiff.pb"
# A feature in the eval split that the train split (the schema's source) lacks; only the contract's features
# matter, so for any other feature this is not a problem.
_NEW_COLUMN = anomalies_pb2.AnomalyInfo.SCHEMA_NEW_COLUMN
_OUT_OF_RANGE = (anomalies_pb2.AnomalyInfo.INT_TYPE_SMALL_INT, anomalies_pb2.AnomalyInfo.INT_TYPE_BIG_INT)
LABEL_RANGE_HINT = (
    f"labels outside the label map: check data.labels and data.label_offset ({LABEL_KEY} minus the offset must "
    "be a line of the label map, counted from 0; ImageNet's build scripts write 1-based labels, offset 1)"
)


class DataValidationError(RuntimeError):
    """The examples violate the schema; the message lists every anomaly."""


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


class StrictExampleValidatorExecutor(example_validator_executor.Executor):
    """Runs TFX's validation, then raises DataValidationError if any split has anomalies."""

    def Do(  # noqa: N802  (TFX's executor API)
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> Any:
        result = super().Do(input_dict, output_dict, exec_properties)
        anomalies_artifacts = output_dict[standard_component_specs.ANOMALIES_KEY]
        problems: list[str] = []
        for split in artifact_utils.decode_split_names(anomalies_artifacts[0].split_names):
            path = os.path.join(artifact_utils.get_split_uri(anomalies_artifacts, split), ANOMALIES_FILE)
            anomalies = anomalies_pb2.Anomalies()
            anomalies.ParseFromString(io_utils.read_bytes_file(path))
            problems.extend(describe_anomalies(split, anomalies))
        if problems:
            raise DataValidationError(
                "the examples violate the schema, so training was not started:\n  - "
                + "\n  - ".join(problems)
                + "\nFix the data (see `tfxp data inspect DIR`), or if the data is right, curate the schema "
                "(`data.schema=<path to schema.pbtxt>`)."
            )
        return result


class StrictExampleValidator(ExampleValidator):
    """ExampleValidator whose execution fails when the statistics show anomalies."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(StrictExampleValidatorExecutor)
