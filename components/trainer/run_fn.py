"""The TFX Trainer entry point (`trainer.run_fn`, referenced by dotted path: `components.trainer.run_fn.run_fn`).

One worker (`trainer.workers: 1`) trains in the Trainer's own process. With more, the Trainer's process starts
the workers (`components.multinode.launch.launch_workers`: local processes, or a TFJob on Kubeflow) and waits;
each worker runs `run_fn` again through `components.trainer.worker`, with `TF_CONFIG` set, and trains.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import MutableMapping
from typing import Any

from components.multinode.launch import launch_workers
from components.multinode.worker_args import WORKER_ENV, WorkerFnArgs, WorkersError
from components.trainer.options import RunOptions, parse_custom_config
from components.trainer.strategy import cluster_workers
from components.trainer.training import TrainerPaths, backup_dir_for, train_and_export

logger = logging.getLogger(__name__)


def run_options(fn_args: Any) -> RunOptions:
    """The Trainer's options from `fn_args.custom_config`, with TFX's train_args (num_steps) winning: a Kubeflow
    run parameter changes it per run (the pipeline compiles both from trainer.train_steps).

    Raises:
        TrainerConfigError: a malformed custom_config.
    """
    run = parse_custom_config(fn_args.custom_config)
    train_steps = getattr(fn_args, "train_steps", None)  # TFX always sets it; hand-made fn_args may not
    if train_steps and train_steps != run.trainer.train_steps:
        options = run.model_dump(mode="json")
        options["trainer"]["train_steps"] = int(train_steps)
        run = parse_custom_config(options)
    return run


def drop_stray_tf_config(run: RunOptions, env: MutableMapping[str, str] = os.environ) -> str | None:
    """Removes a `TF_CONFIG` that a one-worker Trainer inherited (a shell, an earlier job's environment); returns
    the warning, or None when there was nothing to drop.

    With `trainer.workers: 1` nobody started a cluster for this run, so a TF_CONFIG naming one would make
    `trainer.strategy: auto` wait for peers that never come. It is kept when this process is a worker tfxp
    started, or when `trainer.strategy: multi_worker` asks for the cluster TF_CONFIG names.
    """
    inherited = env.get("TF_CONFIG")
    if not inherited or run.trainer.workers > 1 or env.get(WORKER_ENV) == "1":
        return None
    if run.trainer.strategy == "multi_worker":
        return None
    del env["TF_CONFIG"]
    try:
        named = f"it names {cluster_workers(inherited)} worker(s)"
    except ValueError:
        named = "it is not even a valid cluster description"
    return (
        f"trainer: ignoring the TF_CONFIG in this process's environment ({named}, "
        "but trainer.workers is 1 and trainer.strategy is not multi_worker); set trainer.workers to "
        "train on several workers, or unset TF_CONFIG"
    )


# TFX Trainer calls this.
def run_fn(fn_args: Any) -> None:
    """Trains, evaluates and exports the model of the Trainer's `custom_config`, here or on its workers.

    Args:
        fn_args: TFX `FnArgs`; reads `custom_config` (see components/trainer/options.py), `train_steps`
            (TFX's train_args, which overrides the trainer section's), `train_files`, `eval_files`,
            `serving_model_dir` and `model_run_dir`.

    Raises:
        TrainerConfigError: a malformed custom_config.
        WorkersError: with several workers, one failed, or TF_CONFIG names another number of workers.
    """
    run = run_options(fn_args)
    stray = drop_stray_tf_config(run)
    if stray:
        logger.warning(stray)
    if run.trainer.workers > 1 and os.environ.get(WORKER_ENV) != "1":
        # The Trainer itself (a TF_CONFIG inherited from a shell does not make it a worker): start the workers.
        launch_workers(run.trainer.workers, run.tfjob, WorkerFnArgs.from_fn_args(fn_args))
        return
    named = cluster_workers(os.environ.get("TF_CONFIG"))
    if run.trainer.workers > 1 and named != run.trainer.workers:
        raise WorkersError(
            f"trainer.workers={run.trainer.workers}, but TF_CONFIG names {named} workers: the cluster this worker "
            "was started in is not the one the pipeline asked for (its TFJob or local launcher is out of date)"
        )
    train_here(run, fn_args)


def train_here(run: RunOptions, fn_args: Any) -> None:
    """Trains in this process (alone, or as one worker of the cluster TF_CONFIG names)."""
    model_run_dir = fn_args.model_run_dir.rstrip("/")
    # The Model artifact dir (parent of Format-Serving/) gets training_metrics.json beside the SavedModel.
    model_artifact_dir = posixpath.dirname(fn_args.serving_model_dir.rstrip("/"))
    # model_run_dir is <root>/Trainer/model_run/<execution id>; its parent outlives a killed execution, so a
    # rerun of the same training finds its backup there and resumes. Every worker computes the same one.
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
