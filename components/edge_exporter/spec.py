"""EdgeExporterSpec: the EdgeExporter's inputs, parameters and outputs."""

from __future__ import annotations

from typing import ClassVar

from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components.edge_exporter.artifacts import EdgeBlessing, EdgeModel

MODEL_KEY = "model"
EXAMPLES_KEY = "examples"
MODEL_BLESSING_KEY = "model_blessing"
EDGE_MODEL_KEY = "edge_model"
EDGE_BLESSING_KEY = "edge_blessing"
OPTIONS_KEY = "options"
PUSH_BASE_KEY = "push_base"
LABEL_OFFSET_KEY = "label_offset"
HOLD_FOR_KEY = "hold_for_serving_base"


class EdgeExporterSpec(ComponentSpec):
    """Inputs: the trained Model, the Examples (train for calibration, eval for both accuracies) and optionally
    the Evaluator's ModelBlessing. Parameters: `options`, the `edge` section (`edge.options.EdgeOptions`) as
    JSON; `push_base` (`<edge base>/<model>`); `label_offset` (`data.label_offset`); `hold_for_serving_base`, the
    serving model base under `serving.rollout: canary` (a blessed release is held until its SavedModel is stable
    there, `edge.held`; unset: published at once). Outputs: EdgeModel and EdgeBlessing."""

    PARAMETERS: ClassVar[dict[str, ExecutionParameter]] = {
        OPTIONS_KEY: ExecutionParameter(type=str),
        PUSH_BASE_KEY: ExecutionParameter(type=str),
        LABEL_OFFSET_KEY: ExecutionParameter(type=int),
        HOLD_FOR_KEY: ExecutionParameter(type=str, optional=True),
    }
    INPUTS: ClassVar[dict[str, ChannelParameter]] = {
        MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
        MODEL_BLESSING_KEY: ChannelParameter(type=standard_artifacts.ModelBlessing, optional=True),
    }
    OUTPUTS: ClassVar[dict[str, ChannelParameter]] = {
        EDGE_MODEL_KEY: ChannelParameter(type=EdgeModel),
        EDGE_BLESSING_KEY: ChannelParameter(type=EdgeBlessing),
    }
