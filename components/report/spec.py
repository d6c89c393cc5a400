"""RunReportSpec: the RunReport's inputs (every output it shows, most optional), parameters and output."""

from __future__ import annotations

from typing import ClassVar

from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components.edge_exporter.artifacts import EdgeModel
from components.report.artifacts import HtmlReport

COMPONENT_ID = "RunReport"
"""The component's id, and its task's name on Kubeflow."""
CONFIG_KEY = "config"
LABELS_PATH_KEY = "labels_path"
OUT_DIR_KEY = "out_dir"
RUN_ID_KEY = "run_id"
RUN_RECORD_DIR_KEY = "run_record_dir"
EXAMPLES_KEY = "examples"
STATISTICS_KEY = "statistics"
ANOMALIES_KEY = "anomalies"
MODEL_KEY = "model"
MODEL_RUN_KEY = "model_run"
EVALUATION_KEY = "evaluation"
BLESSING_KEY = "model_blessing"
BASELINE_MODEL_KEY = "baseline_model"
INFRA_BLESSING_KEY = "infra_blessing"
PUSHED_MODEL_KEY = "pushed_model"
EDGE_MODEL_KEY = "edge_model"
REPORT_KEY = "report"


def _optional(artifact_type: type) -> ChannelParameter:
    return ChannelParameter(type=artifact_type, optional=True)


class RunReportSpec(ComponentSpec):
    """Inputs: the Examples (their spans), StatisticsGen's statistics, ExampleValidator's anomalies, the Trainer's
    Model and ModelRun, the Evaluator's evaluation and blessing, the ServedBaseline's Model, the LoadCheck's
    InfraBlessing, the Pusher's PushedModel and the EdgeExporter's EdgeModel; each optional, so a pipeline without
    one still has a report.
    Parameters: `config`, the config that ran as JSON; `labels_path` (`data.labels_path`); `out_dir`, shown as
    the run's output; on Kubeflow `run_id` and `run_record_dir`, where the run record goes. Output: `report`,
    an HtmlReport."""

    PARAMETERS: ClassVar[dict[str, ExecutionParameter]] = {
        CONFIG_KEY: ExecutionParameter(type=str),
        LABELS_PATH_KEY: ExecutionParameter(type=str, optional=True),
        OUT_DIR_KEY: ExecutionParameter(type=str, optional=True),
        # On Kubeflow: the run's id and where its run record goes (components.notify.run_record); unset locally.
        RUN_ID_KEY: ExecutionParameter(type=str, optional=True),
        RUN_RECORD_DIR_KEY: ExecutionParameter(type=str, optional=True),
    }
    INPUTS: ClassVar[dict[str, ChannelParameter]] = {
        EXAMPLES_KEY: _optional(standard_artifacts.Examples),
        STATISTICS_KEY: _optional(standard_artifacts.ExampleStatistics),
        ANOMALIES_KEY: _optional(standard_artifacts.ExampleAnomalies),
        MODEL_KEY: _optional(standard_artifacts.Model),
        MODEL_RUN_KEY: _optional(standard_artifacts.ModelRun),
        EVALUATION_KEY: _optional(standard_artifacts.ModelEvaluation),
        BLESSING_KEY: _optional(standard_artifacts.ModelBlessing),
        BASELINE_MODEL_KEY: _optional(standard_artifacts.Model),
        INFRA_BLESSING_KEY: _optional(standard_artifacts.InfraBlessing),
        PUSHED_MODEL_KEY: _optional(standard_artifacts.PushedModel),
        EDGE_MODEL_KEY: _optional(EdgeModel),
    }
    OUTPUTS: ClassVar[dict[str, ChannelParameter]] = {
        REPORT_KEY: ChannelParameter(type=HtmlReport),
    }
