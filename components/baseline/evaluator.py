"""TFX's Evaluator, told apart "no baseline yet" from a baseline: an empty baseline artifact is left out.

`ServedBaseline` always writes its Model artifact (a component output cannot be absent), empty when nothing is
served yet. TFX's Evaluator would try to load that empty artifact; without it, it drops the change threshold
(`has_baseline=False`) and judges the candidate by `evaluator.min_accuracy` alone, as on a first run.

The blessing also carries the spans of the Examples the model was trained and evaluated on (custom property
`spans`, as on the Examples): the Pusher writes them into the push record, and the drift checks judge a new span
against the spans the served model was trained on (`components.validation.drift_check.previous_spans`). The
blessing is what the Pusher already reads, so the Pusher takes no Examples (which KFP's launcher would copy).
"""

from __future__ import annotations

from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.components.evaluator.component import Evaluator
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import standard_component_specs
from tfx.utils import path_utils

from components.executor_types import ArtifactDict, ExecProperties
from foundation.contract import SAVED_MODEL_FILE
from foundation.data.spans import SPANS_PROPERTY


def holds_model(artifact: types.Artifact) -> bool:
    """Whether a Model artifact has a SavedModel where the Evaluator loads it (`<uri>/Format-Serving`)."""
    return bool(fileio.exists(f"{path_utils.serving_model_dir(artifact.uri)}/{SAVED_MODEL_FILE}"))


class BaselineEvaluatorExecutor(evaluator_executor.Executor):
    """TFX's Evaluator executor, minus a `baseline_model` input that holds no model."""

    def Do(self, input_dict: ArtifactDict, output_dict: ArtifactDict, exec_properties: ExecProperties) -> None:  # noqa: N802  (TFX's API)
        key = standard_component_specs.BASELINE_MODEL_KEY
        baselines = input_dict.get(key) or []
        if baselines and not all(holds_model(artifact) for artifact in baselines):
            input_dict = {name: artifacts for name, artifacts in input_dict.items() if name != key}
        super().Do(input_dict, output_dict, exec_properties)
        record_spans(input_dict, output_dict)


def record_spans(input_dict: ArtifactDict, output_dict: ArtifactDict) -> None:
    """Copies the Examples' `spans` onto the blessing (nothing for data without spans)."""
    examples = input_dict.get(standard_component_specs.EXAMPLES_KEY) or []
    spans = str(examples[0].get_string_custom_property(SPANS_PROPERTY) or "") if examples else ""
    for blessing in output_dict.get(standard_component_specs.BLESSING_KEY) or []:
        if spans:
            blessing.set_string_custom_property(SPANS_PROPERTY, spans)


class BaselineEvaluator(Evaluator):
    """TFX's Evaluator whose `baseline_model` may be empty (nothing served yet): then no change threshold."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(BaselineEvaluatorExecutor)
