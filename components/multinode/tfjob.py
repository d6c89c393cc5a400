"""The Training Operator `TFJob` (kubeflow.org/v1) that runs the Trainer on several nodes, and the RBAC the task
that submits it needs: plain dicts, no Kubernetes client, no TFX.

The Trainer task on Kubeflow submits one TFJob whose N `Worker` replicas run `python -m components.trainer.worker
--fn-args <uri>` in the tfxp image; the operator gives each one `TF_CONFIG` and a headless Service, and worker 0
is the chief. `tfjob_template` builds the manifest once, at compile time, with two placeholders
(`JOB_NAME_PLACEHOLDER`, `FN_ARGS_PLACEHOLDER`); `bind_tfjob` fills them in at run time with the job's name and
namespace, the FnArgs the task wrote, and an owner reference to the task's pod.

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
- Names: the webhook wants a DNS-1035 job name (`tfjob_webhook.go:74`), and every replica's pod and Service are
  called `<job>-worker-<index>` (`pkg/core/utils.go:30-33`); a Service name is a DNS-1035 label of at most 63
  characters, so the job name must leave room for `-worker-<index>`, which the webhook does not check (a longer
  name is accepted and then never gets its Services).
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
import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from components.multinode.settings import WorkerSettings
from components.multinode.worker_args import WORKER_ENV, WORKER_MODULE
from foundation.errors import TfxpError
from foundation.k8s.names import (
    DNS1035_LABEL,
    MAX_LABEL_LENGTH,
    label_key_problem,
    label_value_problem,
    name_problem,
)

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
# Room in the 63 characters of a Service name `<job>-worker-<index>` (pkg/core/utils.go:30-33) for indices of up to
# five digits, far past trainer.workers' limit; `job_name_for` stays within it.
MAX_INDEX_DIGITS = 5
MAX_JOB_NAME_LENGTH = MAX_LABEL_LENGTH - len(f"-{REPLICA_TYPE.lower()}-") - MAX_INDEX_DIGITS
_HASH_LENGTH = 8
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
ROLE_NAME = "tfxp-trainer-tfjobs"
_NO_LABELS: Mapping[str, str] = MappingProxyType({})


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


@dataclass(frozen=True)
class OwnerReference:
    """The Trainer task's pod as the owner of its TFJob, so that deleting the pod deletes the job (Kubernetes'
    garbage collector; the pod must be in the job's namespace).

    `controller` is False: the pod does not reconcile the job, and a controller reference would tell other
    controllers (e.g. Kueue, which leaves jobs with a controller owner to that owner) that something else manages
    it. `blockOwnerDeletion` is False: with it the creator needs `update` on `pods/finalizers` where the
    OwnerReferencesPermissionEnforcement admission plugin runs (GKE, OpenShift), a right the Trainer task does
    not otherwise need, and the pod's deletion need not wait for the job's.

    Attributes:
        name: The pod's name.
        uid: The pod's UID (`metadata.uid`).
        api_version: `v1`.
        kind: `Pod`.
    """

    name: str
    uid: str
    api_version: str = "v1"
    kind: str = "Pod"

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": False,
            "blockOwnerDeletion": False,
        }


def max_job_name_length(workers: int) -> int:
    """The longest TFJob name whose replicas' Services (`<name>-worker-<workers - 1>`) are valid names."""
    return MAX_LABEL_LENGTH - len(f"-{REPLICA_TYPE.lower()}-{max(workers - 1, 0)}")


def job_name_problem(name: str, workers: int) -> str | None:
    """Why `name` cannot name a TFJob of `workers` workers, or None: the webhook's DNS-1035 label
    (tfjob_webhook.go:74), short enough for the Services `<name>-worker-<index>` (pkg/core/utils.go:30-33)."""
    limit = max_job_name_length(workers)
    if not re.fullmatch(DNS1035_LABEL, name):
        return (
            f"TFJob name {name!r} is not a DNS-1035 label (lower-case letters, digits and '-', starting with a "
            "letter and ending with a letter or digit)"
        )
    if len(name) > limit:
        return (
            f"TFJob name {name!r} has {len(name)} characters; with {workers} workers the operator names Services "
            f"up to {name}-worker-{workers - 1}, which must be at most {MAX_LABEL_LENGTH}, so at most {limit}"
        )
    return None


def job_name_for(run_id_or_pod_name: str) -> str:
    """A TFJob name derived from the Trainer task's pod name (or a run id): the same input gives the same name,
    different inputs different names (an 8-digit hash of the whole input ends it), and any input gives a valid one
    of at most `MAX_JOB_NAME_LENGTH` characters.

    Example:
        job_name_for("tfxp-imagenet-resnet50-8x7kq-system-container-impl-2471937312")
        # 'tfxp-imagenet-resnet50-8x7kq-system-conta-c93b3b23'

    Raises:
        TFJobError: an empty input.
    """
    if not run_id_or_pod_name:
        raise TFJobError("cannot derive a TFJob name from an empty pod name")
    digest = hashlib.sha256(run_id_or_pod_name.encode()).hexdigest()[:_HASH_LENGTH]
    readable = re.sub(r"[^a-z0-9]+", "-", run_id_or_pod_name.lower())
    readable = readable.lstrip("-0123456789")[: MAX_JOB_NAME_LENGTH - _HASH_LENGTH - 1].strip("-")
    return f"{readable or 'tfjob'}-{digest}"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _worker_spec(template: Mapping[str, Any]) -> dict[str, Any]:
    try:
        spec = template["spec"]["tfReplicaSpecs"][REPLICA_TYPE]
        [container] = [c for c in spec["template"]["spec"]["containers"] if c["name"] == CONTAINER_NAME]
    except (KeyError, TypeError, ValueError):
        raise TFJobError(
            f"not a tfxp TFJob template: no {REPLICA_TYPE} replica with one container named {CONTAINER_NAME}"
        ) from None
    if (
        template.get("metadata", {}).get("name") != JOB_NAME_PLACEHOLDER
        or container.get("args", []).count(FN_ARGS_PLACEHOLDER) != 1
    ):
        raise TFJobError(
            f"not an unbound TFJob template: it needs metadata.name {JOB_NAME_PLACEHOLDER} and the argument "
            f"{FN_ARGS_PLACEHOLDER} once (bind a fresh copy of tfjob_template's output, not a bound job)"
        )
    return dict(spec)


def bind_tfjob(
    template: Mapping[str, Any],
    *,
    name: str,
    namespace: str,
    fn_args_uri: str,
    owner: OwnerReference | None,
    labels: Mapping[str, str] = _NO_LABELS,
    service_account: str = "",
) -> dict[str, Any]:
    """A deep copy of `template` with the run's values: name, namespace, the FnArgs URI, the owner, and `labels`
    added to the job's and the pods' labels (e.g. the KFP run id, so a retry can find an earlier attempt's job).

    Args:
        template: What `tfjob_template` returned (not modified).
        name: The TFJob's name, e.g. `job_name_for(pod_name)`.
        namespace: The namespace of the job (and of the owner pod).
        fn_args_uri: Where the Trainer task wrote the workers' FnArgs.
        owner: The Trainer task's pod, or None for a job nothing owns.
        labels: Run-time labels.
        service_account: The workers' service account when it differs from the compiled one: the Trainer task's
            own (so the workers get the same storage identity, in the namespace they run in); "" keeps it.

    Raises:
        TFJobError: a template without both placeholders (or already bound), a name the operator cannot use, a bad
            namespace, an empty URI or owner field, or a label Kubernetes refuses.
    """
    workers = int(_worker_spec(template).get("replicas", 1))
    problem = job_name_problem(name, workers) or name_problem("Namespace", namespace)
    if problem:
        raise TFJobError(problem)
    if not fn_args_uri.strip() or any(character.isspace() for character in fn_args_uri):
        raise TFJobError(f"the workers' FnArgs URI {fn_args_uri!r} is empty or holds whitespace")
    if owner is not None and not (owner.name and owner.uid):
        raise TFJobError(f"the owner reference {owner} needs the pod's name and uid")
    for key, value in labels.items():
        label_problem = label_key_problem(key) or label_value_problem(value)
        if label_problem:
            raise TFJobError(f"TFJob label {key}={value}: {label_problem}")
    job = copy.deepcopy(dict(template))
    metadata = job["metadata"]
    metadata.update(name=name, namespace=namespace)
    metadata["labels"] = {**metadata.get("labels", {}), **labels}
    if owner is not None:
        metadata["ownerReferences"] = [owner.to_dict()]
    pod = job["spec"]["tfReplicaSpecs"][REPLICA_TYPE]["template"]
    pod["metadata"]["labels"] = {**pod["metadata"].get("labels", {}), **labels}
    if service_account:
        account_problem = name_problem("ServiceAccount", service_account)
        if account_problem:
            raise TFJobError(account_problem)
        pod["spec"]["serviceAccountName"] = service_account
    for container in pod["spec"]["containers"]:
        if container["name"] == CONTAINER_NAME:
            container["args"] = [fn_args_uri if arg == FN_ARGS_PLACEHOLDER else arg for arg in container["args"]]
    left = {text for text in _strings(job) if JOB_NAME_PLACEHOLDER in text or FN_ARGS_PLACEHOLDER in text}
    if left:
        raise TFJobError(f"the TFJob still holds placeholders after binding: {sorted(left)}")
    return job


# Who uses each right: the Trainer task's TFJob client (components/multinode/tfjob_api.py), which polls (no watch):
# - tfjobs create: submit the job; get: read its status and conditions; delete: when it ended, on SIGTERM
#   (`tfxp runs terminate`, Argo's deadline) and on the task's own deadline.
# - pods list: each replica's phase, restarts and exit code (`-l training.kubeflow.org/job-name=...`).
# - pods/log get: the failing replica's log tail for the error message.
# - events list: why a worker is not scheduled (FailedScheduling, gang timeouts) and the operator's events on the
#   job (restarts, backoff limit, deadline).
# No watch, patch or update (the job is never changed), no services, no secrets; no `*` anywhere.
# tests/test_tfjob_client.py runs the client against an API double that enforces exactly these rules.
RBAC_RULES: tuple[Mapping[str, Any], ...] = (
    MappingProxyType({"apiGroups": (TFJOB_GROUP,), "resources": (TFJOB_PLURAL,), "verbs": ("create", "get", "delete")}),
    MappingProxyType({"apiGroups": ("",), "resources": ("pods",), "verbs": ("list",)}),
    MappingProxyType({"apiGroups": ("",), "resources": ("pods/log",), "verbs": ("get",)}),
    MappingProxyType({"apiGroups": ("",), "resources": ("events",), "verbs": ("list",)}),
)


def _rbac_name(service_account: str) -> str:
    name = f"{ROLE_NAME}-{service_account}"
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(service_account.encode()).hexdigest()[:_HASH_LENGTH]
    return f"{name[: 253 - _HASH_LENGTH - 1].rstrip('-.')}-{digest}"


def tfjob_rbac(service_account: str, namespace: str) -> list[dict[str, Any]]:
    """The Role and RoleBinding that let `service_account` in `namespace` run the workers' TFJobs, and nothing
    more (`RBAC_RULES` says who uses each verb).

    Raises:
        TFJobError: a service account or namespace name the API server refuses.
    """
    problem = name_problem("ServiceAccount", service_account) or name_problem("Namespace", namespace)
    if problem:
        raise TFJobError(problem)
    labels = dict([PART_OF_LABEL, ("app.kubernetes.io/component", "trainer")])
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ROLE_NAME, "namespace": namespace, "labels": labels},
        "rules": [{key: list(value) for key, value in rule.items()} for rule in RBAC_RULES],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": _rbac_name(service_account), "namespace": namespace, "labels": dict(labels)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    }
    return [role, binding]
