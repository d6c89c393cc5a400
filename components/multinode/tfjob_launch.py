"""On Kubeflow, the Trainer task's part of multi-worker training: it submits the TFJob that runs the workers.

The compiled spec carries the TFJob template in the Trainer's custom_config (`RunOptions.tfjob`). When the
Trainer task runs, it

1. makes the workers' inputs and outputs reachable from every pod: `gs://` URIs are (TensorFlow opens them
   directly, `components.kfp.entrypoint` keeps them); otherwise the launcher's local copies are staged into
   `kubeflow.workers.shared_dir` on a volume every pod mounts, and the model is copied back afterwards;
2. writes the workers' FnArgs there (`fn_args.json` in the model_run output);
3. binds the template (a job name from the FnArgs URI, the same on a retry; owner reference to its pod; its own
   service account for the workers) and runs the job
   with `components.multinode.tfjob_client.TfJobClient.run`, which streams the replicas' states, fails with the failing
   replica's error and log tail, keeps the deadline, and deletes the job when the task stops (SIGTERM).

Example (what `run_fn` does on Kubeflow with `trainer.workers: 4`):
    run_tfjob(run.tfjob, WorkerFnArgs.from_fn_args(fn_args))
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
from dataclasses import replace

from components.kfp.launcher_paths import opens_directly
from components.multinode.settings import TfJobLaunch
from components.multinode.worker_args import FN_ARGS_FILE, WorkerFnArgs, WorkersError, write_fn_args
from foundation import paths

logger = logging.getLogger(__name__)

STAGED_EXAMPLES = "examples"
STAGED_MODEL = "model"
STAGED_MODEL_RUN = "model_run"


def unreachable_paths(args: WorkerFnArgs) -> list[str]:
    """The FnArgs paths other pods cannot open: the launcher's local copies, anything but a bucket TensorFlow
    reads directly (`components.kfp.launcher_paths`)."""
    every = [*args.train_files, *args.eval_files, args.serving_model_dir, args.model_run_dir]
    return [path for path in every if not (paths.is_remote(path) and opens_directly(path))]


def staging_dir(shared_dir: str, args: WorkerFnArgs) -> str:
    """A folder under `shared_dir` keyed by the FnArgs, so a retried Trainer task stages into the same place and
    its workers resume from the same backup."""
    key = hashlib.sha256(args.to_json().encode()).hexdigest()[:16]
    return paths.join(shared_dir, f"trainer-{key}")


def _stage_files(patterns: list[str], target: str) -> list[str]:
    import tensorflow as tf

    staged = []
    for number, pattern in enumerate(patterns):
        folder = paths.join(target, f"{number:03d}-{posixpath.basename(posixpath.dirname(pattern)) or 'files'}")
        paths.makedirs(folder)
        for source in sorted(tf.io.gfile.glob(pattern)):
            copy = paths.join(folder, posixpath.basename(source))
            # A retried task finds the copies of its first attempt: what is complete is not copied again.
            if not (paths.exists(copy) and tf.io.gfile.stat(copy).length == tf.io.gfile.stat(source).length):
                paths.copy_file(source, copy)
        staged.append(paths.join(folder, "*"))
    return staged


def stage(args: WorkerFnArgs, shared_dir: str) -> tuple[WorkerFnArgs, str]:
    """Copies the Examples into a staging folder under `shared_dir`; returns the FnArgs the workers get (inputs
    and outputs there) and the folder.

    Raises:
        WorkersError: `shared_dir` is empty while some path is only in this pod.
    """
    unreachable = unreachable_paths(args)
    if not shared_dir:
        raise WorkersError(
            "trainer.workers > 1: the workers' pods cannot open " + ", ".join(unreachable[:3]) + " (only this "
            "task's pod has the launcher's copies); use a gs:// pipeline root (kubeflow.pipeline_root) or set "
            "kubeflow.workers.shared_dir to a folder on a kubeflow.volumes mount"
        )
    folder = staging_dir(shared_dir, args)
    logger.info("trainer: staging the Examples for the workers in %s", folder)
    staged = replace(
        args,
        train_files=_stage_files(list(args.train_files), paths.join(folder, STAGED_EXAMPLES, "train")),
        eval_files=_stage_files(list(args.eval_files), paths.join(folder, STAGED_EXAMPLES, "eval")),
        serving_model_dir=paths.join(folder, STAGED_MODEL, posixpath.basename(args.serving_model_dir.rstrip("/"))),
        model_run_dir=paths.join(folder, STAGED_MODEL_RUN),
    )
    return staged, folder


def copy_back(staged: WorkerFnArgs, original: WorkerFnArgs) -> None:
    """Copies the chief's model (and `training_metrics.json` beside it) and its run logs to where the launcher
    uploads the Trainer's outputs from."""
    # The launcher (or TFX) may have made the output folders already: merge into them.
    paths.copy_tree(paths.parent_of(staged.serving_model_dir), paths.parent_of(original.serving_model_dir), merge=True)
    paths.copy_tree(staged.model_run_dir, original.model_run_dir, merge=True)


def run_tfjob(launch: TfJobLaunch, args: WorkerFnArgs) -> None:
    """Runs the workers as the TFJob of `launch` and waits for it (see the module docstring).

    Raises:
        WorkersError: the workers cannot reach the inputs or outputs.
        components.multinode.tfjob_errors.TfJobError: the job could not be created, failed, or missed its deadline.
    """
    from components.multinode.tfjob_binding import bind_tfjob
    from components.multinode.tfjob_client import TfJobClient, in_cluster, task_pod_owner, task_service_account
    from components.multinode.tfjob_names import job_name_for

    api, namespace = in_cluster()  # first: outside a cluster nothing is staged
    identity = task_service_account()
    workers_args, staged_in = (args, "") if not unreachable_paths(args) else stage(args, launch.shared_dir)
    fn_args_uri = write_fn_args(workers_args, paths.join(workers_args.model_run_dir, FN_ARGS_FILE))
    manifest = bind_tfjob(
        launch.manifest,
        # The FnArgs URI is the same on every attempt of this task: KFP's driver runs once and Argo retries only the
        # executor template (kubeflow/pipelines 7b70c7b backend/src/v2/compiler/argocompiler/container.go:587), so
        # the output URIs do not change, and a retried task finds the job of the attempt before it and follows it.
        name=job_name_for(f"tfxp-trainer-{fn_args_uri}"),
        namespace=namespace,
        fn_args_uri=fn_args_uri,
        owner=task_pod_owner(),
        labels={"app.kubernetes.io/component": "trainer-workers"},
        # The workers run as the task does, so they get its storage identity in the namespace they run in.
        service_account=identity[1] if identity else "",
    )
    TfJobClient(api, namespace, log=logger.info).run(
        manifest, timeout_seconds=launch.deadline_seconds, schedule_timeout_seconds=launch.schedule_timeout_seconds
    )
    if staged_in:
        copy_back(workers_args, args)
        paths.remove_tree(staged_in)  # the Examples' copies and the backup: the model is in the artifact now
        logger.info("trainer: copied the model back from %s and removed it", staged_in)
