"""The ServedBaseline's executor: the served version, checked and copied into a Model artifact."""

from __future__ import annotations

import logging

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components.baseline.served import (
    ServedModel,
    check_served_model,
    copy_model,
    find_served_model,
    not_comparable,
)
from components.baseline.spec import (
    BASE_PATH_KEY,
    BASELINE_MODEL_KEY,
    LABELS_PATH_KEY,
    NOT_COMPARED_PROPERTY,
    SERVED_IDENTITY_PROPERTY,
    SERVED_PATH_PROPERTY,
    SERVED_VERSION_PROPERTY,
)
from components.executor_types import ArtifactDict, ExecProperties

logger = logging.getLogger(__name__)


class Executor(base_executor.BaseExecutor):
    """Finds the served version, checks it and copies it to `<baseline_model>/Format-Serving`."""

    def Do(self, input_dict: ArtifactDict, output_dict: ArtifactDict, exec_properties: ExecProperties) -> None:  # noqa: N802  (TFX's API)
        """Writes the baseline Model artifact; leaves it empty when no version is served yet, or when the served
        version's label map is not the run's (then `not_compared` says how they differ, and the Evaluator decides
        by `evaluator.min_accuracy` alone: a model of other classes is no measure of this one).

        Raises:
            components.baseline.served.ServedModelError: the served version cannot be loaded or lacks the
                Evaluator's signatures (the message names it and the ways out); nothing downstream runs, so
                nothing is pushed.
        """
        self._log_startup(input_dict, output_dict, exec_properties)
        baseline = artifact_utils.get_single_instance(output_dict[BASELINE_MODEL_KEY])
        base = exec_properties[BASE_PATH_KEY]
        served = find_served_model(base)
        if served is None:
            logger.info("served baseline: nothing is served under %s yet; the Evaluator uses min_accuracy alone", base)
            record_served(baseline, None)
            return
        mismatch = not_comparable(served, exec_properties.get(LABELS_PATH_KEY) or "")
        if mismatch:
            logger.warning(
                "served baseline: version %s is not compared: %s; the Evaluator uses min_accuracy alone",
                served.version,
                mismatch,
            )
            record_served(baseline, served, not_compared=mismatch)
            return
        check_served_model(served)
        # Where TFX's Evaluator (and Trainer's base_model) look for a Model artifact's SavedModel.
        copy_model(served.path, path_utils.serving_model_dir(baseline.uri))
        record_served(baseline, served)
        logger.info("served baseline: version %s (%s)", served.version, served.path)


def record_served(artifact: types.Artifact, served: ServedModel | None, not_compared: str = "") -> None:
    """Records which version `artifact` holds (empty strings when nothing was served), and why it was not
    compared ("" when it was)."""
    artifact.set_string_custom_property(SERVED_VERSION_PROPERTY, served.version if served else "")
    artifact.set_string_custom_property(SERVED_PATH_PROPERTY, served.path if served else "")
    artifact.set_string_custom_property(SERVED_IDENTITY_PROPERTY, served.identity if served else "")
    artifact.set_string_custom_property(NOT_COMPARED_PROPERTY, not_compared)
