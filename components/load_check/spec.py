"""LoadCheckSpec: the LoadCheck's inputs, parameters and output (TFX's standard InfraBlessing, written as
`components.load_check.blessing` says)."""

from __future__ import annotations

from typing import ClassVar

from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components.load_check.blessing import BLESSING_KEY

MODEL_KEY = "model"
EXAMPLES_KEY = "examples"
MODEL_NAME_KEY = "model_name"
SAMPLES_KEY = "samples"
TIMEOUT_KEY = "timeout_seconds"
ATOL_KEY = "atol"
EVAL_SPLIT = "eval"


class LoadCheckSpec(ComponentSpec):
    """Inputs: the trained Model and the Examples (a sample of the eval split is sent). Parameters: `model_name`
    (`serving.model_name`), `samples` (eval examples compared), `timeout_seconds` (for the server to load the
    version; each request's timeout too) and `atol` (largest probability difference that agrees). Output:
    `blessing`, an InfraBlessing."""

    PARAMETERS: ClassVar[dict[str, ExecutionParameter]] = {
        MODEL_NAME_KEY: ExecutionParameter(type=str),
        SAMPLES_KEY: ExecutionParameter(type=int),
        TIMEOUT_KEY: ExecutionParameter(type=float),
        ATOL_KEY: ExecutionParameter(type=float),
    }
    INPUTS: ClassVar[dict[str, ChannelParameter]] = {
        MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
    }
    OUTPUTS: ClassVar[dict[str, ChannelParameter]] = {
        BLESSING_KEY: ChannelParameter(type=standard_artifacts.InfraBlessing),
    }
