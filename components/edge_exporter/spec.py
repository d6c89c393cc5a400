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
PUSH_BASE_KEY = "push_base"


class EdgeExporterSpec(ComponentSpec):
    """Inputs: the trained Model, the Examples (train for calibration, eval for both accuracies) and optionally
    the Evaluator's ModelBlessing. Parameters: `edge.ExportOptions` fields plus `push_base`
    (`<edge base>/<model>`). Outputs: EdgeModel and EdgeBlessing."""

    PARAMETERS: ClassVar[dict[str, ExecutionParameter]] = {
        "mode": ExecutionParameter(type=str),
        "io_dtype": ExecutionParameter(type=str),
        "representative_samples": ExecutionParameter(type=int),
        "supported_ops": ExecutionParameter(type=str),
        "max_accuracy_drop": ExecutionParameter(type=float),
        "threads": ExecutionParameter(type=int),
        "eval_samples": ExecutionParameter(type=int),
        "label_offset": ExecutionParameter(type=int),
        "benchmark_runs": ExecutionParameter(type=int),
        # 0/1: TFX execution properties have no bool type (its own components use int the same way).
        "keep_tensor_names": ExecutionParameter(type=int),
        PUSH_BASE_KEY: ExecutionParameter(type=str),
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
