"""ServedBaseline: a custom TFX component that hands the served model to the Evaluator as its baseline.

It replaces TFX's latest-blessed-model Resolver, which needs ML Metadata and which open-source Kubeflow
Pipelines cannot run: what TF Serving serves is the baseline on every orchestrator.

Example:
    served_baseline = ServedBaseline(base_path="tfxp_output/serving/digits")
    evaluator = BaselineEvaluator(..., baseline_model=served_baseline.outputs["baseline_model"])
"""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts

from components.baseline.driver import ServedModelDriver
from components.baseline.executor import Executor
from components.baseline.spec import ServedBaselineSpec

# The component id in the pipeline (and the Kubeflow task name, which is always uncached).
COMPONENT_ID = "ServedBaseline"


class ServedBaseline(base_component.BaseComponent):
    """The newest complete version under `base_path`, checked (loads, has the eval signatures) and copied into a
    Model artifact; an empty artifact when nothing is served yet.

    Args:
        base_path: The TF Serving model base path, `<serving base>/<model>` (local or a bucket).
        labels_path: The run's label map (`data.labels_path`): a served version with another label map is not
            compared (the artifact stays empty, `not_compared` says why). "" = compare whatever is served.
    """

    SPEC_CLASS = ServedBaselineSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
    DRIVER_CLASS = ServedModelDriver

    def __init__(self, base_path: str, labels_path: str = "") -> None:
        spec = ServedBaselineSpec(
            base_path=base_path,
            labels_path=labels_path,
            served_fingerprint="",
            baseline_model=types.Channel(type=standard_artifacts.Model),
        )
        super().__init__(spec=spec)
