"""ServedBaselineSpec: the ServedBaseline component's parameters and its one output."""

from __future__ import annotations

from typing import ClassVar

from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

BASE_PATH_KEY = "base_path"
LABELS_PATH_KEY = "labels_path"
FINGERPRINT_KEY = "served_fingerprint"
BASELINE_MODEL_KEY = "baseline_model"

# Custom properties of the baseline Model artifact ("" when nothing was served yet).
SERVED_VERSION_PROPERTY = "served_version"
SERVED_PATH_PROPERTY = "served_path"
SERVED_IDENTITY_PROPERTY = "served_identity"
# Why the served version was not compared (its label map is not the run's): "" when it was, or nothing is served.
NOT_COMPARED_PROPERTY = "not_compared"


class ServedBaselineSpec(ComponentSpec):
    """Parameters: `base_path`, the TF Serving model base path (`<serving base>/<model>`); `labels_path`, the run's
    label map (a served model with another one is not compared, `components.baseline.comparable`); `served_fingerprint`,
    set by the local runner's driver to what is served now (see `components.baseline.driver`). Output:
    `baseline_model`, a Model artifact whose `Format-Serving/` holds the served SavedModel, or nothing when no
    version is served yet."""

    PARAMETERS: ClassVar[dict[str, ExecutionParameter]] = {
        BASE_PATH_KEY: ExecutionParameter(type=str),
        LABELS_PATH_KEY: ExecutionParameter(type=str, optional=True),
        FINGERPRINT_KEY: ExecutionParameter(type=str, optional=True),
    }
    INPUTS: ClassVar[dict[str, ChannelParameter]] = {}
    OUTPUTS: ClassVar[dict[str, ChannelParameter]] = {
        BASELINE_MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
    }
