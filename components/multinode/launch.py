"""The Trainer task's side of multi-node training: start `trainer.workers` workers and wait for the chief's model.

On Kubeflow (the compiled pipeline carries a TFJob template, `TfJobLaunch`) the workers are a TFJob's pods
(`components.multinode.tfjob_launch`); elsewhere they are local processes (`components.multinode.local_workers`).
"""

from __future__ import annotations

import logging

from components.multinode.local_workers import LocalWorkers
from components.multinode.settings import TfJobLaunch
from components.multinode.tfjob_launch import run_tfjob
from components.multinode.worker_args import FN_ARGS_FILE, WorkerFnArgs, WorkersError, write_fn_args
from foundation import paths
from foundation.contract import SAVED_MODEL_FILE

logger = logging.getLogger(__name__)


def launch_workers(workers: int, tfjob: TfJobLaunch | None, args: WorkerFnArgs) -> None:
    """Starts `workers` workers on `args` and waits for them: a TFJob when the compiled pipeline carries one
    (`tfjob`, on Kubeflow), local processes otherwise.

    Raises:
        WorkersError: a worker failed, or they ended without the chief's SavedModel.
        components.multinode.tfjob_errors.TfJobError: on Kubeflow, the job could not be submitted or failed.
    """
    if tfjob is not None:
        run_tfjob(tfjob, args)
    else:
        fn_args_uri = write_fn_args(args, paths.join(args.model_run_dir, FN_ARGS_FILE))
        model_run = args.model_run_dir
        log_dir = paths.join(model_run, "workers") if not paths.is_remote(model_run) else _local_log_dir()
        seconds = LocalWorkers(workers, log_dir).run(fn_args_uri)
        logger.info("trainer: %d local workers trained in %.1f s", workers, seconds)
    check_exported(args.serving_model_dir, workers)


def check_exported(serving_model_dir: str, workers: int) -> None:
    """Raises WorkersError unless the chief wrote the SavedModel where the Trainer's model artifact expects it."""
    if not paths.exists(paths.join(serving_model_dir, SAVED_MODEL_FILE)):
        raise WorkersError(
            f"trainer: the {workers} workers ended, but there is no {SAVED_MODEL_FILE} in {serving_model_dir}: "
            "the chief (worker 0) exports it there; its log says why it did not"
        )


def _local_log_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="tfxp-workers-")
