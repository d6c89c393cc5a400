"""TFX's Evaluator, told apart "no baseline yet" from a baseline: an empty baseline artifact is left out.

`ServedBaseline` always writes its Model artifact (a component output cannot be absent), empty when nothing is
served yet. TFX's Evaluator would try to load that empty artifact; without it, it drops the change threshold
(`has_baseline=False`) and judges the candidate by `evaluator.min_accuracy` alone, as on a first run.
"""

from __future__ import annotations

from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.components.evaluator.component import Evaluator
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import standard_component_specs
from tfx.utils import path_utils

from components.contract import SAVED_MODEL_FILE
from components.executor_types import ArtifactDict, ExecProperties


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


class BaselineEvaluator(Evaluator):
    """TFX's Evaluator whose `baseline_model` may be empty (nothing served yet): then no change threshold."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(BaselineEvaluatorExecutor)
