"""RunReport: the pipeline's last component, the run report as an artifact and next to the pushed model.

The KFP v2 UI renders only `system.HTML` artifacts, which a TFX component cannot produce (`artifacts`), so on
Kubeflow the page is found in the RunReport task's `report` artifact (`report.html`) and, when a model was pushed,
at `<serving base>/reports/<version>.html`. TF Serving, `foundation.publish.list_versions` and `tfxp serve` take only
numeric directories as versions, so `reports/` is never served.

Example:
    report = RunReport(
        config_json=json.dumps(config.to_dict()),
        model=trainer.outputs["model"],
        pushed_model=pusher.outputs["pushed_model"],
        ...
    )
"""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec

from components.report.artifacts import HtmlReport
from components.report.executor import Executor
from components.report.spec import RunReportSpec


class RunReport(base_component.BaseComponent):
    """Writes the run report from the outputs of the components before it; never fails the run.

    Args:
        config_json: The config that ran (`TfxpConfig.to_dict()`) as JSON, without secrets.
        labels_path: The label map (`data.labels_path`), for the confusion matrix's class names.
        out_dir: Shown as the run's output (`pipeline.output`).
        examples, statistics, anomalies, model, model_run, evaluation, model_blessing, baseline_model,
            infra_blessing, pushed_model, edge_model: Channels of the outputs the page shows; each may be None.
    """

    SPEC_CLASS = RunReportSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        config_json: str,
        labels_path: str = "",
        out_dir: str = "",
        examples: types.BaseChannel | None = None,
        statistics: types.BaseChannel | None = None,
        anomalies: types.BaseChannel | None = None,
        model: types.BaseChannel | None = None,
        model_run: types.BaseChannel | None = None,
        evaluation: types.BaseChannel | None = None,
        model_blessing: types.BaseChannel | None = None,
        baseline_model: types.BaseChannel | None = None,
        infra_blessing: types.BaseChannel | None = None,
        pushed_model: types.BaseChannel | None = None,
        edge_model: types.BaseChannel | None = None,
    ) -> None:
        spec = RunReportSpec(
            config=config_json,
            labels_path=labels_path,
            out_dir=out_dir,
            examples=examples,
            statistics=statistics,
            anomalies=anomalies,
            model=model,
            model_run=model_run,
            evaluation=evaluation,
            model_blessing=model_blessing,
            baseline_model=baseline_model,
            infra_blessing=infra_blessing,
            pushed_model=pushed_model,
            edge_model=edge_model,
            report=types.Channel(type=HtmlReport),
        )
        super().__init__(spec=spec)
