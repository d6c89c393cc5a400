"""What each component of the pipeline is told, from the config: ImportExampleGen's input and output splits,
TFMA's thresholds, the Trainer's custom config, the ExampleValidator's drift, span-size and image checks, the
Pusher's rollout settings, the run report's config and the Beam args.

Plain functions of a `TfxpConfig` (and its `OutputLayout`), so each is tested without building the pipeline;
`pipeline.pipeline.create_components` wires their results into the components.

Example:
    eval_config(config).metrics_specs[0].metrics[1].threshold  # accuracy ≥ evaluator.min_accuracy, no worse than served
"""

from __future__ import annotations

import json
from typing import Any

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx

from components.baseline.reason import ACCURACY_EPSILON
from components.multinode.settings import TfJobLaunch
from components.trainer.options import RunOptions
from components.validation.drift_check import DriftRun
from components.validation.span_images import ImageCheck
from components.validation.span_sizes import SpanSizeCheck
from components.validation.span_statistics import statistics_cache_dir
from foundation.contract import EVAL_LABEL_KEY, OUTPUT_PROBABILITIES, SIGNATURE_EVAL_LABELS, SIGNATURE_TF_EXAMPLE
from foundation.data.spans import NO_SPANS
from pipeline.config import TfxpConfig
from pipeline.layout import OutputLayout, output_layout, split_patterns
from serving.options import deployed_serving


def example_gen_input_config(config: TfxpConfig) -> tfx.proto.Input:
    """The files ImportExampleGen reads, from the data section (`pipeline.layout.split_patterns`)."""
    return tfx.proto.Input(
        splits=[tfx.proto.Input.Split(name=name, pattern=pattern) for name, pattern in split_patterns(config).items()]
    )


def example_gen_output_config(config: TfxpConfig) -> tfx.proto.Output | None:
    """Hash-bucket split for data without train and eval files (`data.split: hash`); None when the input splits
    (the train and eval patterns) are the output splits."""
    if config.data.split != "hash":
        return None
    return tfx.proto.Output(
        split_config=tfx.proto.SplitConfig(
            splits=[
                tfx.proto.SplitConfig.Split(name="train", hash_buckets=config.data.train_buckets),
                tfx.proto.SplitConfig.Split(name="eval", hash_buckets=config.data.eval_buckets),
            ]
        )
    )


def eval_config(config: TfxpConfig) -> tfma.EvalConfig:
    """TFMA config: accuracy ≥ `evaluator.min_accuracy`, and no worse than the served model by more than
    `evaluator.max_accuracy_drop` (TFX skips the change threshold when there is no baseline: nothing served yet,
    or `evaluator.baseline: none`); and the multi-class confusion matrix for the run report."""
    threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": config.evaluator.min_accuracy}),
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER,
            absolute={"value": -config.evaluator.max_accuracy_drop - ACCURACY_EPSILON},
        ),
    )
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                # TFMA feeds serialized tf.Examples; the model's own signature maps labels to 0-based class ids.
                signature_name=SIGNATURE_TF_EXAMPLE,
                preprocessing_function_names=[SIGNATURE_EVAL_LABELS],
                label_key=EVAL_LABEL_KEY,
                prediction_key=OUTPUT_PROBABILITIES,
            )
        ],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    tfma.MetricConfig(class_name="SparseCategoricalAccuracy", threshold=threshold),
                    # The run report's confusion matrix (components.report.evaluation).
                    tfma.MetricConfig(class_name="MultiClassConfusionMatrixPlot"),
                ]
            )
        ],
    )


def trainer_custom_config(config: TfxpConfig, tfjob: TfJobLaunch | None = None) -> dict[str, Any]:
    """What the Trainer's run_fn receives: `RunOptions` (the trainer section and what it needs from the others)
    as plain JSON data, validated again by the same model in the Trainer.

    With `trainer.warm_start: served` the Trainer reads the serving base path itself, when it starts: the served
    model is not a Trainer input, so a rerun on the same data stays a cache hit instead of retraining from
    every newly pushed version.

    `tfjob` (Kubeflow, `trainer.workers` > 1) is the TFJob the Trainer task submits for its workers; without it
    the workers are local processes."""
    run = RunOptions(
        trainer=config.trainer,
        labels_path=config.data.labels_path,
        label_offset=config.data.first_label,
        warmup_requests=config.serving.warmup_requests,
        serving_base=output_layout(config).serving_base if config.trainer.warm_start == "served" else "",
        tfjob=tfjob,
    )
    options = run.model_dump(mode="json")
    if tfjob is None:
        del options["tfjob"]  # one worker, or local workers: the custom_config (and KFP's cache key) stays as before
    return options


def beam_pipeline_args(config: TfxpConfig) -> list[str]:
    """Beam args: DirectRunner mode and workers, then `beam.extra_args` (which may pick another runner)."""
    args = [f"--direct_running_mode={config.beam.direct_running_mode}"]
    if config.beam.direct_running_mode != "in_memory":  # in_memory runs one worker whatever the setting
        args.append(f"--direct_num_workers={config.beam.direct_num_workers}")
    return [*args, *config.beam.extra_args]


def drift_run(config: TfxpConfig, layout: OutputLayout) -> str:
    """The ExampleValidator's drift checks (`data.drift`) as JSON; "" when they are off (no spans, or
    `data.drift.enabled: false`). The previous spans' statistics come from the cache under `pipeline.output`,
    the same path on every orchestrator."""
    data = config.data
    if not data.drift.is_on(data.spans):
        return ""
    return DriftRun(
        options=data.drift,
        input_base=data.path,
        split_patterns=split_patterns(config),
        spans_policy=str(data.spans),
        cache_dir=statistics_cache_dir(config.pipeline.output),
        serving_base=layout.serving_base,
    ).to_json()


def span_size_check(config: TfxpConfig) -> str:
    """The ExampleValidator's span-size check (`data.min_span_examples`) as JSON; "" when it is off (no spans, or
    a minimum of 0)."""
    data = config.data
    if data.spans == NO_SPANS or data.min_span_examples == 0:
        return ""
    return SpanSizeCheck(min_examples=data.min_span_examples, split_patterns=split_patterns(config)).to_json()


def image_check(config: TfxpConfig) -> str:
    """The ExampleValidator's image check (`trainer.max_image_pixels`, the model's decoder; files that passed are
    remembered beside the drift statistics) as JSON; "" when `data.check_images` is off."""
    if not config.data.check_images:
        return ""
    cache_dir = statistics_cache_dir(config.pipeline.output)
    return ImageCheck(config.trainer.max_image_pixels, split_patterns(config), config.data.path, cache_dir).to_json()


def pusher_custom_config(config: TfxpConfig, layout: OutputLayout) -> dict[str, Any] | None:
    """The Pusher's rollout settings under `serving.rollout: canary` (`components.pusher.executor.rollout_config`);
    None under `direct`, so its spec (and KFP's cache key) stays as it was."""
    if config.serving.rollout != "canary":
        return None
    container_base = deployed_serving(config.serving, layout.serving_base).container_base_path
    return {"rollout": {"model_name": config.serving.model_name, "container_base": container_base}}


def report_config_json(config: TfxpConfig) -> str:
    """The config the run report shows, as JSON: `kubeflow.notify_url` (a webhook, often secret) left out."""
    shown = config.to_dict()
    if shown.get("kubeflow", {}).get("notify_url"):
        shown["kubeflow"]["notify_url"] = "(set; not shown)"
    return json.dumps(shown, sort_keys=True)
