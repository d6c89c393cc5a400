"""The LoadCheck's executor: a sample of the eval split, `serving.load_check`, and the InfraBlessing it decides."""

from __future__ import annotations

import logging

from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components.executor_types import ArtifactDict, ExecProperties
from components.load_check.blessing import BLESSING_KEY, record_result
from components.load_check.spec import (
    ATOL_KEY,
    EVAL_SPLIT,
    EXAMPLES_KEY,
    MODEL_KEY,
    MODEL_NAME_KEY,
    SAMPLES_KEY,
    TIMEOUT_KEY,
)
from edge.data import sample_records
from serving.load_check import check_model_serving

logger = logging.getLogger(__name__)


class Executor(base_executor.BaseExecutor):
    """Serves the trained model in a model server process and blesses it when it answers like in-process."""

    def Do(self, input_dict: ArtifactDict, output_dict: ArtifactDict, exec_properties: ExecProperties) -> None:  # noqa: N802  (TFX's API)
        """Writes the InfraBlessing: `blessed` 1 when the model loaded and answered the eval sample like the
        SavedModel in-process, else 0 with the reason; the run goes on either way (the Pusher skips the push).

        Raises:
            edge.errors.EdgeError: the eval split cannot be read (the data is at fault, not the model).
        """
        self._log_startup(input_dict, output_dict, exec_properties)
        model = artifact_utils.get_single_instance(input_dict[MODEL_KEY])
        examples = artifact_utils.get_single_instance(input_dict[EXAMPLES_KEY])
        blessing = artifact_utils.get_single_instance(output_dict[BLESSING_KEY])
        saved_model = path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))
        # The Evaluator's split, sampled with the EdgeExporter's reader (`edge.data`): the same seeded sample
        # every time, so a rerun over the same model checks the same examples.
        records = sample_records(examples.uri, EVAL_SPLIT, int(exec_properties[SAMPLES_KEY]))
        result = check_model_serving(
            saved_model,
            records,
            str(exec_properties[MODEL_NAME_KEY]),
            float(exec_properties[TIMEOUT_KEY]),
            atol=float(exec_properties[ATOL_KEY]),
        )
        record_result(blessing, result)
        if result.passed:
            logger.info("load check passed: %s", result.reason)
        else:
            logger.warning("load check failed, the model will not be pushed: %s", result.reason)
            if result.server_log:
                logger.warning("the server's log ends:\n%s", result.server_log)
