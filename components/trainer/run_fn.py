"""The TFX Trainer entry point (`trainer.run_fn`, referenced by dotted path: `components.trainer.run_fn.run_fn`)."""

from __future__ import annotations

import logging
import posixpath
from typing import Any

from components.trainer.options import parse_custom_config
from components.trainer.training import TrainerPaths, backup_dir_for, train_and_export

logger = logging.getLogger(__name__)


# TFX Trainer calls this.
def run_fn(fn_args: Any) -> None:
    """Trains, evaluates and exports the model of the Trainer's `custom_config`.

    Args:
        fn_args: TFX `FnArgs`; reads `custom_config` (see components/trainer/options.py), `train_steps`
            (TFX's train_args, which overrides the trainer section's), `train_files`, `eval_files`,
            `serving_model_dir` and `model_run_dir`.

    Raises:
        TrainerConfigError: a malformed custom_config.
    """
    run = parse_custom_config(fn_args.custom_config)
    train_steps = getattr(fn_args, "train_steps", None)  # TFX always sets it; hand-made fn_args may not
    if train_steps and train_steps != run.trainer.train_steps:
        # TFX's train_args (num_steps) wins: a Kubeflow run parameter changes it per run (the pipeline compiles
        # both from trainer.train_steps).
        options = run.model_dump(mode="json")
        options["trainer"]["train_steps"] = int(train_steps)
        run = parse_custom_config(options)
    model_run_dir = fn_args.model_run_dir.rstrip("/")
    # The Model artifact dir (parent of Format-Serving/) gets training_metrics.json beside the SavedModel.
    model_artifact_dir = posixpath.dirname(fn_args.serving_model_dir.rstrip("/"))
    # model_run_dir is <root>/Trainer/model_run/<execution id>; its parent outlives a killed execution, so a
    # rerun of the same training finds its backup there and resumes.
    backup_dir = backup_dir_for(posixpath.dirname(model_run_dir), run, [*fn_args.train_files, *fn_args.eval_files])
    paths = TrainerPaths(
        train_files=list(fn_args.train_files),
        eval_files=list(fn_args.eval_files),
        serving_model_dir=fn_args.serving_model_dir,
        model_run_dir=model_run_dir,
        backup_dir=backup_dir,
        metrics_dirs=(model_artifact_dir,),
    )
    metrics = train_and_export(run, paths)
    logger.info(
        "trainer: eval accuracy %.4f, %.0f images/s, %.1f s",
        metrics["final_accuracy"],
        metrics["images_per_second"],
        metrics["total_seconds"],
    )
