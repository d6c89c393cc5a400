"""The Training Operator `TFJob` (kubeflow.org/v1) template that runs the Trainer on several nodes: plain dicts, no
Kubernetes client, no TFX.

The Trainer task on Kubeflow submits one TFJob whose N `Worker` replicas run `python -m components.trainer.worker
--fn-args <uri>` in the tfxp image; the operator gives each one `TF_CONFIG` and a headless Service, and worker 0
is the chief. `tfjob_template` builds the manifest once, at compile time, with two placeholders
(`JOB_NAME_PLACEHOLDER`, `FN_ARGS_PLACEHOLDER`); `components.multinode.tfjob_binding.bind_tfjob` fills them in at
run time with the job's name (`components.multinode.tfjob_names`) and namespace, the FnArgs the task wrote, and an
owner reference to the task's pod. The RBAC the submitting task needs is `components.multinode.tfjob_rbac`'s.

Every choice below follows the operator's source, kubeflow/trainer branch release-1.9 at commit 3a3a1da
(the Training Operator v1.9; paths relative to that repository):

- Replica types: `Worker` only. Without a `Chief` replica worker 0 is the chief (`pkg/controller.v1/tensorflow/
  tfjob_controller.go:598-605`, IsMasterRole), and with the default success policy the job succeeds when worker 0
  has exited 0 (:463-476), which is when tfxp's chief has exported the model.
- The container must be named `tensorflow` (`pkg/webhooks/tensorflow/tfjob_webhook.go:113-120`): the operator
  adds `TF_CONFIG` to that container only (`tfjob_controller.go:574-585`) and takes the port named `tfjob-port`
  from it (`pkg/controller.v1/tensorflow/util.go:24-37`). The port is declared here rather than left to the
  operator's in-memory defaulting (`pkg/apis/kubeflow.org/v1/tensorflow_defaults.go:28-33`), so the reviewed
  manifest is what runs; the per-replica headless Services expose the container's ports (`pkg/core/
  service.go:83-101`, `pkg/controller.v1/common/service.go:229-243`).
- restartPolicy `OnFailure` (see `RESTART_POLICY`), cleanPodPolicy `Running`, the backoff limit scaled by the
  number of workers (see `runpolicy_backoff_limit`), `activeDeadlineSeconds`, `ttlSecondsAfterFinished`, and
  `schedulingPolicy` for gang scheduling.

Example:
    template = tfjob_template(WorkerTemplate(image="registry.example.com/ml/tfxp:0.1.0", workers=4, cpu="80",
                                             memory="560G", accelerator_resource="nvidia.com/gpu",
                                             accelerator_count=8))
    job = bind_tfjob(template, name=job_name_for(pod_name), namespace="kubeflow",
                     fn_args_uri="gs://bucket/root/Trainer/fn_args.json",
                     owner=OwnerReference(name=pod_name, uid=pod_uid))
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from components.multinode.settings import WorkerSettings
from components.multinode.worker_args import WORKER_ENV, WORKER_MODULE
from foundation.errors import TfxpError

TFJOB_GROUP = "kubeflow.org"
TFJOB_VERSION = "v1"
TFJOB_API_VERSION = f"{TFJOB_GROUP}/{TFJOB_VERSION}"
TFJOB_PLURAL = "tfjobs"
TFJOB_KIND = "TFJob"
# pkg/apis/kubeflow.org/v1/tensorflow_types.go:22-28.
CONTAINER_NAME = "tensorflow"
PORT_NAME = "tfjob-port"
PORT = 2222
REPLICA_TYPE = "Worker"
# Filled in by `bind_tfjob`. Neither `{{...}}` (Argo and KFP substitute those in a compiled spec that carries this
# manifest) nor `$(...)` (Kubernetes expands it in container arguments).
JOB_NAME_PLACEHOLDER = "<tfxp-job-name>"
FN_ARGS_PLACEHOLDER = "<tfxp-fn-args-uri>"
# A MultiWorkerMirroredStrategy peer whose collective times out (or whose peer is gone) raises in `fit` and
# exits 1. Under `ExitCode`, codes 1-127 are permanent (pkg/apis/kubeflow.org/v1/common_types.go:183-188,
# pkg/util/train/train_util.go:24-26) and fail the whole job (pkg/controller.v1/common/pod.go:367-373), so the
# first preempted node would end the training instead of restarting it. Under `OnFailure` the kubelet restarts
# the failed container in place (same pod, IP and Service, so TF_CONFIG stays valid) and every worker resumes
# from BackupAndRestore; a pod that fails outright (evicted, node lost) is deleted and recreated by the operator
# (pod.go:349-366). Its restarts are what the backoff limit counts (pkg/core/job.go:95-132); an `ExitCode` job
# recreates pods, whose restart counts stay 0. The price: a deterministic bug restarts until the backoff limit
# or the deadline stops it.
RESTART_POLICY = "OnFailure"
# `Running`: when the job finishes, the operator deletes the pods still running (peers blocked on a failed one, so
# their GPUs are freed) and keeps the succeeded and failed ones with their logs (`All` would delete those too;
# `None`, the default, keeps all): pkg/controller.v1/common/job.go:43-69. The Trainer task deletes the job, and
# with it those pods, once it has read the outcome; if the task died, the failed pods' logs stay for a post-mortem
# until the TTL below.
CLEAN_POD_POLICY = "Running"
# The operator deletes the TFJob this long after it finished (job.go:420-453): the Trainer task deletes it as soon
# as it has read the outcome, so this only removes jobs whose task died; a day leaves them for a post-mortem.
FINISHED_JOB_TTL_SECONDS = 86_400
INT32_MAX = 2**31 - 1
# NCCL's own defaults print nothing on errors; WARN names the failing peer and transport (kubeflow.workers.env
# overrides it).
DEFAULT_WORKER_ENV: Mapping[str, str] = MappingProxyType({"NCCL_DEBUG": "WARN"})
# TF_CONFIG is set by the operator (tfjob_controller.go:574-585); a second one in the template would shadow or
# duplicate it. WORKER_ENV marks the process as a worker (components.multinode.local_workers), set below on every pod.
OPERATOR_ENV = frozenset({"TF_CONFIG", WORKER_ENV})
# The image's user (Dockerfile: useradd --uid 10001), and the restricted Pod Security Standard every other pod of
# the run gets from KFP (kubeflow/pipelines backend/src/v2/compiler/argocompiler/security_context.go): seccomp
# RuntimeDefault, no privilege escalation, no capabilities. fsGroup lets the workers write to the shared volume.
RUN_AS_USER = 10001
POD_SECURITY_CONTEXT: Mapping[str, Any] = MappingProxyType(
    {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER, "fsGroup": RUN_AS_USER,
     "seccompProfile": {"type": "RuntimeDefault"}}
)  # fmt: skip
CONTAINER_SECURITY_CONTEXT: Mapping[str, Any] = MappingProxyType(
    {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
)
# Istio's sidecar never exits, so a worker pod with one never completes, and it intercepts the workers' gRPC; the
# operator's own SDK turns injection off for every job it creates (sdk/python/kubeflow/training/utils/utils.py:259).
DEFAULT_ANNOTATIONS: Mapping[str, str] = MappingProxyType({"sidecar.istio.io/inject": "false"})
PART_OF_LABEL = ("app.kubernetes.io/part-of", "tfxp")
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"


class TFJobError(TfxpError, ValueError):
    """A TFJob manifest, name or binding the API server or the operator would refuse; the message says why."""


@dataclass(frozen=True)
class WorkerTemplate:
    """Everything the workers' pod template and the job's runPolicy need, already checked (`pipeline.kubeflow.
    compiler.workers.worker_template` builds it from the config and names the key of anything malformed).

    Attributes:
        image: The tfxp image (`kubeflow.image`).
        workers: Worker replicas (`trainer.workers`).
        cpu: CPU request and limit of each worker, e.g. `80`.
        memory: Memory request and limit of each worker, e.g. `560G`; `/dev/shm` counts against it.
        accelerator_resource: The accelerator's resource name, e.g. `nvidia.com/gpu`; "" for none.
        accelerator_count: Accelerators per worker; 0 for none.
        node_selector: Node labels every worker requires.
        tolerations: Kubernetes tolerations (dicts with key, operator, effect and value).
        image_pull_secrets: Secrets the kubelet pulls the image with.
        labels: Labels of the TFJob and of every worker pod.
        annotations: Annotations of every worker pod (on top of `DEFAULT_ANNOTATIONS`).
        volumes: (PersistentVolumeClaim, mount path) pairs mounted into every worker.
        settings: The config's `kubeflow.workers` section as it is: `/dev/shm`, gang scheduling and its queue, the
            schedule timeout, the job's deadline and restarts.
        env: Environment of every worker: `DEFAULT_WORKER_ENV` merged with `settings.env`, parsed.
        service_account: The service account of the workers (the one storage credentials are bound to).
        ttl_seconds_after_finished: When the operator deletes a finished job nobody deleted.
    """

    image: str
    workers: int
    cpu: str
    memory: str
    accelerator_resource: str = ""
    accelerator_count: int = 0
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, str], ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    volumes: tuple[tuple[str, str], ...] = ()
    settings: WorkerSettings = field(default_factory=WorkerSettings)
    env: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_WORKER_ENV))
    service_account: str = "pipeline-runner"
    ttl_seconds_after_finished: int = FINISHED_JOB_TTL_SECONDS


def runpolicy_backoff_limit(job_restarts: int, workers: int) -> int:
    """`runPolicy.backoffLimit` that lets the whole job restart `job_restarts` times.

    The operator sums the restart counts of every running pod's containers and fails the job once the sum reaches
    the limit, or at the first restart when the limit is 0 (pkg/core/job.go:95-132). One failure restarts every
    worker once (the failed one, then its peers when their collectives time out), adding `workers` to that sum:
    after k failures the sum is k × workers, so k × workers + 1 lets `job_restarts` failures restart the job and
    fails it at the next. (The config's value passed as it is would fail 4 workers at their first failure.)
    """
    if job_restarts <= 0:
        return 0
    return min(job_restarts * workers + 1, INT32_MAX)


def _resources(worker: WorkerTemplate) -> dict[str, str]:
    amounts = {"cpu": worker.cpu, "memory": worker.memory}
    if worker.accelerator_count > 0 and worker.accelerator_resource:
        amounts[worker.accelerator_resource] = str(worker.accelerator_count)
    return amounts


def _pod_spec(worker: WorkerTemplate) -> dict[str, Any]:
    mounts = [{"name": SHM_VOLUME, "mountPath": SHM_PATH}]
    volumes: list[dict[str, Any]] = [
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": worker.settings.shm_size}}
    ]
    for index, (claim, path) in enumerate(worker.volumes):
        name = f"pvc-{index}"
        mounts.append({"name": name, "mountPath": path})
        volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": worker.image,
        "command": ["python", "-m", WORKER_MODULE],
        "args": ["--fn-args", FN_ARGS_PLACEHOLDER],
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "env": [
            *({"name": name, "value": value} for name, value in worker.env.items()),
            {"name": WORKER_ENV, "value": "1"},
        ],
        "securityContext": copy.deepcopy(dict(CONTAINER_SECURITY_CONTEXT)),
        # Requests equal limits, every resource: Guaranteed QoS, so a busy node neither throttles nor evicts a
        # worker first (which would stall every other worker on its collectives).
        "resources": {"requests": _resources(worker), "limits": _resources(worker)},
        "volumeMounts": mounts,
    }
    spec: dict[str, Any] = {
        "serviceAccountName": worker.service_account,
        # The workers never call the API server; without a token they cannot use the service account's rights to
        # create TFJobs (storage credentials do not need it: GKE Workload Identity answers on the metadata
        # server, EKS and Azure inject their own projected token).
        "automountServiceAccountToken": False,
        "securityContext": copy.deepcopy(dict(POD_SECURITY_CONTEXT)),
        "containers": [container],
        "volumes": volumes,
    }
    if worker.node_selector:
        spec["nodeSelector"] = dict(worker.node_selector)
    if worker.tolerations:
        spec["tolerations"] = [dict(toleration) for toleration in worker.tolerations]
    if worker.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": secret} for secret in worker.image_pull_secrets]
    # No restartPolicy and no schedulerName in the pod spec: the operator sets the first from the replica's
    # (pkg/controller.v1/common/pod.go:428-435) and the second to the gang scheduler's (pod.go:437-447).
    return spec


def _run_policy(worker: WorkerTemplate) -> dict[str, Any]:
    policy: dict[str, Any] = {
        "cleanPodPolicy": CLEAN_POD_POLICY,
        "backoffLimit": runpolicy_backoff_limit(worker.settings.backoff_limit, worker.workers),
        # Counted from the job's start time, scheduling included (tfjob_controller.go:393-403).
        "activeDeadlineSeconds": worker.settings.job_deadline_seconds,
        "ttlSecondsAfterFinished": worker.ttl_seconds_after_finished,
    }
    if worker.settings.gang_scheduling:
        # The PodGroup the operator creates when it runs with a gang scheduler (job.go:250-335; ignored without
        # one): all workers or none, so no A100 node idles holding a share of the job. `queue` is Volcano's,
        # `scheduleTimeoutSeconds` the scheduler-plugins' (job.go:280-312).
        scheduling: dict[str, Any] = {
            "minAvailable": worker.workers,
            "scheduleTimeoutSeconds": worker.settings.schedule_timeout_seconds,
        }
        if worker.settings.queue:
            scheduling["queue"] = worker.settings.queue
        policy["schedulingPolicy"] = scheduling
    return policy


def tfjob_template(worker: WorkerTemplate) -> dict[str, Any]:
    """The workers' TFJob with `JOB_NAME_PLACEHOLDER` as its name and `FN_ARGS_PLACEHOLDER` as the worker's
    `--fn-args`, for `bind_tfjob` to fill in (see the module docstring for the choices).

    Args:
        worker: The checked pod template and run policy values.

    Raises:
        TFJobError: fewer than one worker.
    """
    if worker.workers < 1:
        raise TFJobError(f"a TFJob needs at least one worker (trainer.workers={worker.workers})")
    labels = dict([PART_OF_LABEL, *worker.labels.items()])
    return {
        "apiVersion": TFJOB_API_VERSION,
        "kind": TFJOB_KIND,
        "metadata": {"name": JOB_NAME_PLACEHOLDER, "labels": labels},
        "spec": {
            "runPolicy": _run_policy(worker),
            # No successPolicy: the default ("") ends the job when worker 0, the chief, succeeds
            # (tfjob_controller.go:463-476); `AllWorkers` would restart a worker that failed after the chief
            # exported, which then trains again from scratch (its backup is gone).
            "tfReplicaSpecs": {
                REPLICA_TYPE: {
                    "replicas": worker.workers,
                    "restartPolicy": RESTART_POLICY,
                    "template": {
                        "metadata": {
                            "labels": dict(labels),
                            "annotations": {**DEFAULT_ANNOTATIONS, **worker.annotations},
                        },
                        "spec": _pod_spec(worker),
                    },
                }
            },
        },
    }
