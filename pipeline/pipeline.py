"""`create_pipeline(config)`: the tfxp TFX pipeline, a pure factory.

It reads nothing from disk or the environment: every path comes from the config (the runner resolves
them first), so the same call serves LocalDagRunner and KubeflowV2DagRunner. ImportExampleGen reads the
span folders `data.spans` selects (`components.example_gen`).

    ImportExampleGen → StatisticsGen → SchemaGen → ExampleValidator (fails on anomalies)
                     → Trainer → Evaluator (TFMA thresholds, against the ServedBaseline)
                               → LoadCheck (serving.load_check, or rollout: canary) → Pusher
                     → EdgeExporter (edge.enabled) → RunReport (the run report, next to the pushed model)

ServedBaseline hands the Evaluator what TF Serving serves now (`evaluator.baseline: served`), on every
orchestrator: no ML Metadata resolver is involved.
"""

from __future__ import annotations

from typing import Any

from tfx import v1 as tfx

from components.baseline.component import COMPONENT_ID as SERVED_BASELINE_ID
from components.baseline.component import ServedBaseline
from components.baseline.evaluator import BaselineEvaluator
from components.edge_exporter.component import EdgeExporter
from components.example_gen.component import SpanImportExampleGen
from components.load_check.blessing import COMPONENT_ID as LOAD_CHECK_ID
from components.load_check.component import LoadCheck
from components.multinode.settings import TfJobLaunch
from components.pusher.executor import AtomicPusher
from components.report.component import RunReport
from components.report.spec import COMPONENT_ID as RUN_REPORT_ID
from components.rollout_judge.component import COMPONENT_ID as JUDGE_ID
from components.rollout_judge.component import RolloutJudge
from components.trainer.label_map_driver import LabelMapDriver
from components.validation.data_checks import statistics_options
from components.validation.label_map_schema_gen import LabelMapSchemaGen
from components.validation.strict_example_validator import StrictExampleValidator
from pipeline.component_settings import (
    beam_pipeline_args,
    drift_run,
    eval_config,
    example_gen_input_config,
    example_gen_output_config,
    image_check,
    pusher_custom_config,
    report_config_json,
    span_size_check,
    trainer_custom_config,
)
from pipeline.config import TfxpConfig
from pipeline.layout import OutputLayout, output_layout
from serving.options import deployed_serving

TRAINER_RUN_FN = "components.trainer.run_fn.run_fn"


def _schema_component(config: TfxpConfig, statistics: Any) -> Any:
    source = config.data.schema_source
    if source == "infer":
        return tfx.components.SchemaGen(statistics=statistics, infer_feature_shape=True)
    if source == "label_map":
        return LabelMapSchemaGen(
            statistics=statistics, labels_path=config.data.labels_path, label_offset=config.data.first_label
        ).with_id("SchemaGen")
    return tfx.components.ImportSchemaGen(schema_file=source).with_id("SchemaGen")


def create_components(config: TfxpConfig, layout: OutputLayout, tfjob: TfJobLaunch | None = None) -> list[Any]:
    """The pipeline's components in execution order; `tfjob` as in `trainer_custom_config`."""
    example_gen = SpanImportExampleGen(
        input_base=config.data.path,
        input_config=example_gen_input_config(config),
        output_config=example_gen_output_config(config),
        spans=config.data.spans,
    ).with_id("ImportExampleGen")
    statistics_gen = tfx.components.StatisticsGen(
        examples=example_gen.outputs["examples"], stats_options=statistics_options()
    )
    schema_gen = _schema_component(config, statistics_gen.outputs["statistics"])
    example_validator = _example_validator(config, layout, example_gen, statistics_gen, schema_gen)
    trainer = _trainer(config, example_gen, schema_gen, tfjob)
    # Training must not start on data that failed validation: make the order explicit.
    trainer.add_upstream_node(example_validator)
    served_baseline = _served_baseline(config, layout)
    evaluator = BaselineEvaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=served_baseline.outputs["baseline_model"] if served_baseline else None,
        eval_config=eval_config(config),
    ).with_id("Evaluator")
    load_check = _load_check(config, example_gen, trainer)
    pusher = AtomicPusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        infra_blessing=load_check.outputs["blessing"] if load_check else None,
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=layout.serving_base)
        ),
        custom_config=pusher_custom_config(config, layout),
    ).with_id("Pusher")
    components = [
        example_gen,
        statistics_gen,
        schema_gen,
        example_validator,
        trainer,
        *([served_baseline] if served_baseline else []),
        evaluator,
        *([load_check] if load_check else []),
        pusher,
    ]
    if config.edge.enabled:
        components.append(_edge_exporter(config, layout, example_gen, trainer, evaluator, pusher))
    components.append(_run_report(config, components))
    judge = _rollout_judge(config, layout)
    if judge is not None:
        # The canary the last run pushed is judged first: the ServedBaseline and the drift checks see the verdict.
        for first in components[:1] + ([served_baseline] if served_baseline else []):
            first.add_upstream_node(judge)
        components.insert(0, judge)
    return components


def _rollout_judge(config: TfxpConfig, layout: OutputLayout) -> RolloutJudge | None:
    """Under `serving.rollout: canary`, the RolloutJudge (`components.rollout_judge`); None under `direct`."""
    if config.serving.rollout != "canary":
        return None
    return RolloutJudge(
        model_base=layout.serving_base,
        container_base=deployed_serving(config.serving, layout.serving_base).container_base_path,
        model_name=config.serving.model_name,
        canary=config.serving.canary.model_dump_json(),
        edge_base=layout.edge_base if config.edge.enabled else "",
    ).with_id(JUDGE_ID)


def _load_check(config: TfxpConfig, example_gen: Any, trainer: Any) -> LoadCheck | None:
    """The LoadCheck (`components.load_check`) when `serving.load_check` is on or `serving.rollout` is canary;
    None otherwise, and then the Pusher and its spec are as they were."""
    if not config.serving.load_checked:
        return None
    return LoadCheck(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        model_name=config.serving.model_name,
    ).with_id(LOAD_CHECK_ID)


def _example_validator(
    config: TfxpConfig, layout: OutputLayout, example_gen: Any, statistics_gen: Any, schema_gen: Any
) -> StrictExampleValidator:
    """The ExampleValidator: anomalies against the schema, the label map's classes and the drift checks."""
    return StrictExampleValidator(
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_gen.outputs["schema"],
        examples=example_gen.outputs["examples"],
        labels_path=config.data.labels_path,
        label_offset=config.data.first_label,
        drift=drift_run(config, layout),
        span_sizes=span_size_check(config),
        image_check=image_check(config),
    ).with_id("ExampleValidator")


def _trainer(config: TfxpConfig, example_gen: Any, schema_gen: Any, tfjob: TfJobLaunch | None) -> Any:
    """The Trainer: `TRAINER_RUN_FN` on the examples, with `trainer_custom_config`; its driver keys the local cache
    on the label map's content (`components.trainer.label_map_driver`)."""
    trainer = tfx.components.Trainer(
        run_fn=TRAINER_RUN_FN,
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        train_args=tfx.proto.TrainArgs(num_steps=config.trainer.train_steps),
        eval_args=tfx.proto.EvalArgs(num_steps=config.trainer.eval_steps or None),
        custom_config=trainer_custom_config(config, tfjob),
    )
    # On the instance: the component stays TFX's Trainer (its type, and so ML Metadata's and KFP's view of it).
    trainer.driver_class = LabelMapDriver
    return trainer


def _served_baseline(config: TfxpConfig, layout: OutputLayout) -> ServedBaseline | None:
    """What TF Serving serves is the baseline; `evaluator.baseline: none` compares with nothing (None)."""
    if config.evaluator.baseline != "served":
        return None
    return ServedBaseline(base_path=layout.serving_base, labels_path=config.data.labels_path).with_id(
        SERVED_BASELINE_ID
    )


def _edge_exporter(
    config: TfxpConfig, layout: OutputLayout, example_gen: Any, trainer: Any, evaluator: Any, pusher: Any
) -> EdgeExporter:
    """The EdgeExporter (`edge.enabled`): the blessed model converted for devices, published under the edge base.

    Under `serving.rollout: canary` its release is held until the SavedModel is promoted (`edge.held`); it runs
    after the Pusher then, so the first model of a base, stable at once, is released in the same run."""
    canary = config.serving.rollout == "canary"
    exporter = EdgeExporter(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        model_blessing=evaluator.outputs["blessing"],
        push_base=layout.edge_base,
        options=config.edge,
        label_offset=config.data.first_label,
        hold_for_serving_base=layout.serving_base if canary else None,
    ).with_id("EdgeExporter")
    if canary:
        exporter.add_upstream_node(pusher)
    return exporter


def _run_report(config: TfxpConfig, components: list[Any]) -> RunReport:
    """The run report from the outputs of `components` (by id; the optional ones may be absent)."""
    by_id = {component.id: component for component in components}

    def output(component_id: str, key: str) -> Any:
        component = by_id.get(component_id)
        return component.outputs[key] if component is not None else None

    return RunReport(
        config_json=report_config_json(config),
        labels_path=config.data.labels_path,
        out_dir=config.pipeline.output,
        examples=output("ImportExampleGen", "examples"),
        statistics=output("StatisticsGen", "statistics"),
        anomalies=output("ExampleValidator", "anomalies"),
        model=output("Trainer", "model"),
        model_run=output("Trainer", "model_run"),
        evaluation=output("Evaluator", "evaluation"),
        model_blessing=output("Evaluator", "blessing"),
        baseline_model=output(SERVED_BASELINE_ID, "baseline_model"),
        infra_blessing=output(LOAD_CHECK_ID, "blessing"),
        pushed_model=output("Pusher", "pushed_model"),
        edge_model=output("EdgeExporter", "edge_model"),
    ).with_id(RUN_REPORT_ID)


def create_pipeline(
    config: TfxpConfig,
    metadata_connection_config: Any | None = None,
    pipeline_root: str | None = None,
    tfjob: TfJobLaunch | None = None,
) -> tfx.dsl.Pipeline:
    """Builds the tfxp pipeline from one config.

    Args:
        config: A validated config whose paths the runner has already resolved.
        metadata_connection_config: MLMD connection (LocalDagRunner); None on Kubeflow.
        pipeline_root: Overrides the layout's root (Kubeflow's `kubeflow.pipeline_root`).
        tfjob: On Kubeflow with `trainer.workers` > 1, the TFJob the Trainer task runs its workers as.

    Returns:
        The `tfx.dsl.Pipeline`, ready for a runner.

    Example:
        pipeline = create_pipeline(load_config(Path("configs/default.yaml")))
    """
    layout = output_layout(config)
    return tfx.dsl.Pipeline(
        pipeline_name=config.pipeline.name,
        pipeline_root=pipeline_root or layout.pipeline_root,
        components=create_components(config, layout, tfjob),
        enable_cache=config.pipeline.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=beam_pipeline_args(config),
    )
