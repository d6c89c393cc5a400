"""EdgeExporter: a custom TFX component (ComponentSpec + executor class) after the Evaluator.

Example:
    edge_exporter = EdgeExporter(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        model_blessing=evaluator.outputs["blessing"],
        push_base="tfxp_output/edge/digits",
        options=EdgeOptions(mode="int8"),
    )
"""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec

from components.edge_exporter.artifacts import EdgeBlessing, EdgeModel
from components.edge_exporter.executor import Executor
from components.edge_exporter.spec import HOLD_FOR_KEY, EdgeExporterSpec
from edge.options import EdgeOptions


class EdgeExporter(base_component.BaseComponent):
    """Converts the trained model to TFLite, checks its accuracy against the SavedModel and pushes it when the
    drop is within `options.max_accuracy_drop` (and the Evaluator blessed the model, when `model_blessing` is
    given).

    Args:
        model: Channel of the Trainer's Model (its `Format-Serving/` SavedModel is converted).
        examples: Channel of Examples with `train` (int8 calibration) and `eval` (both accuracies) splits.
        push_base: `<edge base>/<model>`, e.g. `OUT/edge/digits`; versions go to `<push_base>/<version>/`.
        model_blessing: The Evaluator's blessing; when it is not blessed the component records a skip.
        options: The `edge` config section (validated when it was built). Defaults to `EdgeOptions()`.
        label_offset: Subtracted from `image/class/label` (`data.label_offset`). Defaults to 0.
        hold_for_serving_base: Under `serving.rollout: canary`, the serving model base: a blessed release is held
            until its SavedModel is the stable version there (`edge.held`). Defaults to None: published at once.
    """

    SPEC_CLASS = EdgeExporterSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        model: types.BaseChannel,
        examples: types.BaseChannel,
        push_base: str,
        model_blessing: types.BaseChannel | None = None,
        options: EdgeOptions | None = None,
        label_offset: int = 0,
        hold_for_serving_base: str | None = None,
    ) -> None:
        spec = EdgeExporterSpec(
            model=model,
            examples=examples,
            model_blessing=model_blessing,
            options=(options or EdgeOptions()).model_dump_json(),
            push_base=push_base,
            label_offset=label_offset,
            edge_model=types.Channel(type=EdgeModel),
            edge_blessing=types.Channel(type=EdgeBlessing),
            # Only under a guarded rollout: a direct pipeline's spec (and its compiled golden) stays as it was.
            **({HOLD_FOR_KEY: hold_for_serving_base} if hold_for_serving_base else {}),
        )
        super().__init__(spec=spec)
