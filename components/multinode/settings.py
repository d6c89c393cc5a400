"""The multi-node settings: the config's `kubeflow.workers` section, and how the Trainer task on Kubeflow starts
its TFJob.

Plain pydantic data (no TensorFlow, no Kubernetes client). `WorkerSettings` is declared here, beside the manifest
it shapes (`components.multinode.tfjob.WorkerTemplate` holds it whole); `TfJobLaunch` is what `tfxp compile` writes
into the Trainer's custom_config (`components.trainer.options.RunOptions.tfjob`) and
`components.multinode.tfjob_launch` reads.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from foundation.config_section import MAX_DURATION_SECONDS, ConfigSection
from foundation.k8s.quantity import INT32_MAX, MemoryQuantity

# The workers' keys that were flat `kubeflow.trainer_*` keys: refused there, naming these (pipeline.config).
WORKER_KEYS_MOVED = {
    "trainer_job_deadline_seconds": "workers.job_deadline_seconds",
    "trainer_schedule_timeout_seconds": "workers.schedule_timeout_seconds",
    "trainer_gang_scheduling": "workers.gang_scheduling",
    "trainer_queue": "workers.queue",
    "trainer_backoff_limit": "workers.backoff_limit",
    "trainer_shm_size": "workers.shm_size",
    "trainer_env": "workers.env",
    "trainer_shared_dir": "workers.shared_dir",
}


class WorkerSettings(ConfigSection):
    """`kubeflow.workers`: what only the workers' TFJob has (`trainer.workers` > 1). Each worker is sized like the
    one-pod Trainer: `kubeflow.trainer_cpu`, `trainer_memory`, `trainer_accelerator`, `trainer_node_selector` and
    `trainer_tolerations` apply to both.

    Attributes:
    job_deadline_seconds: The longest the workers' TFJob may run, scheduling included (its
      `runPolicy.activeDeadlineSeconds`; the Trainer task gives up then too and deletes it).
    schedule_timeout_seconds: How long every worker may wait to be scheduled before the run fails naming the
      Kubernetes reason (gang scheduling's `scheduleTimeoutSeconds` too).
    gang_scheduling: Schedule the workers all together or not at all (`runPolicy.schedulingPolicy`, honoured when
      the Training Operator runs with `--gang-scheduler-name`, e.g. volcano), so no node idles.
    queue: The gang scheduler's queue (volcano), empty = its default.
    backoff_limit: How many times the workers' TFJob restarts after a worker fails; one failure restarts every
      worker, so the job's `runPolicy.backoffLimit` (which counts every pod's restarts) is this × workers + 1.
    shm_size: `/dev/shm` of every worker (a memory-backed volume; NCCL and tf.data use it).
    env: Further environment of every worker, `KEY=VALUE`, e.g. `NCCL_SOCKET_IFNAME=eth0`.
    shared_dir: With a pipeline root other than `gs://`: a folder on a `kubeflow.volumes` mount where the Trainer
      task stages the Examples for the workers and the chief writes the model, backups and logs; the claim must be
      ReadWriteMany (the task and every worker mount it at once, on different nodes). The task removes its
      staging folder once the model is copied back.
    """

    job_deadline_seconds: int = Field(172_800, ge=60, le=MAX_DURATION_SECONDS)
    schedule_timeout_seconds: int = Field(1_800, ge=10, le=INT32_MAX)
    gang_scheduling: bool = True
    queue: str = ""
    backoff_limit: int = Field(3, ge=0, le=INT32_MAX)
    shm_size: MemoryQuantity = "16Gi"
    env: tuple[str, ...] = ()
    shared_dir: str = ""


class TfJobLaunch(ConfigSection):
    """How the Trainer task on Kubeflow starts its workers (`trainer.workers` > 1): a Training Operator TFJob.

    Written by `tfxp compile` into the Trainer's custom_config, so the manifest travels inside the compiled spec.

    Attributes:
        manifest: The TFJob with placeholders for its name and the workers' FnArgs
            (`components.multinode.tfjob.tfjob_template`); the Trainer task binds them when it runs.
        deadline_seconds: The longest the job may take; the task deletes it then and fails.
        schedule_timeout_seconds: The longest the workers may wait to be scheduled.
        shared_dir: Where the task stages the Examples and the workers write the model when the artifacts are
            not on `gs://` (a folder on a volume every pod mounts); "" = the artifacts' own URIs.
    """

    manifest: dict[str, Any]
    deadline_seconds: int = Field(172_800, ge=1)
    schedule_timeout_seconds: int = Field(1_800, ge=1)
    shared_dir: str = ""
