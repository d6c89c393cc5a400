"""The workers' TFJob and its RBAC from the config: `components.multinode.tfjob` and `tfjob_rbac` build the
manifests, this module reads and checks the keys (each malformed entry is one error naming the key) and writes the
review copies beside the compiled spec.

With `trainer.workers` > 1 the Trainer task on Kubeflow submits a Training Operator TFJob whose workers get the
Trainer's resources, accelerator, node selector, tolerations, pull secrets, pod labels and annotations and the
`kubeflow.volumes` mounts, plus the `kubeflow.trainer_*` keys of the job itself.

Example:
    template = tfjob_template(worker_template(config))  # the manifest the compiled spec carries
    write_manifests(config, Path("out/pipeline.yaml"))   # out/pipeline.tfjob.yaml, out/pipeline.rbac.yaml
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from components.multinode.tfjob import (
    DEFAULT_WORKER_ENV,
    FN_ARGS_PLACEHOLDER,
    JOB_NAME_PLACEHOLDER,
    OPERATOR_ENV,
    SHM_PATH,
    TFJOB_KIND,
    WorkerTemplate,
    tfjob_template,
)
from components.multinode.tfjob_rbac import RBAC_RULES, tfjob_rbac
from foundation.errors import TfxpError
from foundation.k8s.names import DNS1123_SUBDOMAIN, MAX_SUBDOMAIN_LENGTH, check_namespace, name_problem
from foundation.k8s.quantity import memory_bytes
from foundation.path_rules import is_under
from pipeline.config import TfxpConfig
from pipeline.kubeflow.compiler import storage
from pipeline.kubeflow.compiler.platform import pod_settings
from pipeline.kubeflow.compiler.pod import parse_env_var, parse_node_label, parse_toleration
from pipeline.kubeflow.compiler.spec import SpecPatchError

T = TypeVar("T")
TFJOB_SUFFIX = ".tfjob.yaml"
RBAC_SUFFIX = ".rbac.yaml"


class WorkersConfigError(TfxpError, ValueError):
    """A config key the workers' TFJob cannot use; the message names the key and the fix."""


def _parsed(key: str, entries: Iterable[str], parse: Callable[[str], T]) -> list[T]:
    try:
        return [parse(entry) for entry in entries]
    except ValueError as error:
        raise WorkersConfigError(f"{key}: {error}") from None


def _env(entries: Sequence[str]) -> dict[str, str]:
    env = dict(DEFAULT_WORKER_ENV)
    seen: set[str] = set()
    for name, value in _parsed("kubeflow.workers.env", entries, parse_env_var):
        if name in OPERATOR_ENV:
            raise WorkersConfigError(
                f"kubeflow.workers.env sets {name}, which the Training Operator sets for every worker; remove it"
            )
        if name in seen:
            raise WorkersConfigError(f"kubeflow.workers.env sets {name} twice; keep one")
        seen.add(name)
        env[name] = value
    return env


def _accelerator(config: TfxpConfig) -> tuple[str, int]:
    wanted = config.kubeflow.trainer_accelerator
    if wanted.count == 0:
        return "", 0
    if "/" not in wanted.type:
        raise WorkersConfigError(
            f"kubeflow.trainer_accelerator.type={wanted.type} is no Kubernetes resource name, and the "
            "workers' pods request the accelerator as one; use e.g. nvidia.com/gpu (pick A100 nodes with "
            "kubeflow.trainer_node_selector)"
        )
    return wanted.type, wanted.count


def _mounts(config: TfxpConfig) -> tuple[storage.VolumeMount, ...]:
    try:
        mounts = storage.volumes(config)
        storage.check_mounts(mounts)
    except (storage.StorageError, SpecPatchError) as error:
        raise WorkersConfigError(str(error)) from None
    for mount in mounts:
        if is_under(mount.path, SHM_PATH) or is_under(SHM_PATH, mount.path):
            raise WorkersConfigError(
                f"kubeflow.volumes mounts {mount.pvc} at {mount.path}, where every worker has its memory-backed "
                f"{SHM_PATH} (kubeflow.workers.shm_size); mount it elsewhere"
            )
    shared = config.kubeflow.workers.shared_dir
    if shared and not storage.on_volume(shared, mounts):
        where = ", ".join(mount.path for mount in mounts) or "none"
        raise WorkersConfigError(
            f"kubeflow.workers.shared_dir={shared} is on no kubeflow.volumes mount (mounted: {where}); the workers see "
            "only those; use a folder under one, e.g. /shared/tfxp with kubeflow.volumes=[shared:/shared]"
        )
    return mounts


def _check_names(config: TfxpConfig) -> None:
    kubeflow = config.kubeflow
    try:
        check_namespace(kubeflow.namespace)
    except ValueError as error:
        raise WorkersConfigError(f"kubeflow.namespace={kubeflow.namespace}: {error}") from None
    problem = name_problem("ServiceAccount", kubeflow.service_account)
    if problem:
        raise WorkersConfigError(f"kubeflow.service_account: {problem}")
    queue = kubeflow.workers.queue
    if queue and not (len(queue) <= MAX_SUBDOMAIN_LENGTH and re.fullmatch(DNS1123_SUBDOMAIN, queue)):
        raise WorkersConfigError(
            f"kubeflow.workers.queue={queue!r} is not a Kubernetes object name (a Volcano Queue): lower-case letters, "
            "digits, '-' and '.', e.g. `training`"
        )
    if queue and not kubeflow.workers.gang_scheduling:
        raise WorkersConfigError(
            f"kubeflow.workers.queue={queue} applies only to gang scheduling, which kubeflow.workers.gang_scheduling="
            "false turns off; turn it on or leave the queue empty"
        )


def worker_template(config: TfxpConfig) -> WorkerTemplate:
    """The workers' pod template and run policy the config asks for, every key checked.

    Raises:
        WorkersConfigError: a malformed node label, toleration, pull secret, pod label or annotation, volume or
            environment entry, an accelerator without a Kubernetes resource name, a `/dev/shm` no smaller than the
            memory, a bad namespace, service account or queue, or a shared folder on no mount (names the key).
    """
    kubeflow = config.kubeflow
    _check_names(config)
    try:
        settings = pod_settings(kubeflow)
    except SpecPatchError as error:
        raise WorkersConfigError(str(error)) from None
    if memory_bytes(kubeflow.workers.shm_size) >= memory_bytes(kubeflow.trainer_memory):
        raise WorkersConfigError(
            f"kubeflow.workers.shm_size={kubeflow.workers.shm_size} is no smaller than kubeflow.trainer_memory="
            f"{kubeflow.trainer_memory}: /dev/shm is memory and counts against the worker's limit; e.g. a quarter "
            "of the memory"
        )
    resource, count = _accelerator(config)
    return WorkerTemplate(
        image=kubeflow.image,
        workers=config.trainer.workers,
        cpu=kubeflow.trainer_cpu,
        memory=kubeflow.trainer_memory,
        accelerator_resource=resource,
        accelerator_count=count,
        node_selector=dict(_parsed("kubeflow.trainer_node_selector", kubeflow.trainer_node_selector, parse_node_label)),
        tolerations=tuple(
            toleration.to_dict()
            for toleration in _parsed("kubeflow.trainer_tolerations", kubeflow.trainer_tolerations, parse_toleration)
        ),
        image_pull_secrets=settings.image_pull_secrets,
        labels=dict(settings.labels),
        annotations=dict(settings.annotations),
        volumes=tuple((mount.pvc, mount.path) for mount in _mounts(config)),
        settings=kubeflow.workers,
        env=_env(kubeflow.workers.env),
        service_account=kubeflow.service_account,
    )


def rbac(config: TfxpConfig) -> list[dict[str, Any]]:
    """The Role and RoleBinding for `kubeflow.service_account` in `kubeflow.namespace`.

    Raises:
        WorkersConfigError: a bad namespace or service account (names the key).
    """
    _check_names(config)
    return tfjob_rbac(config.kubeflow.service_account, config.kubeflow.namespace)


def render_yaml(docs: Sequence[dict[str, Any]], header: str) -> str:
    """`docs` as a YAML stream (keys in the order built, as a reviewer reads them) after `header`, whose lines
    become comments."""
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comments + yaml.safe_dump_all(list(docs), sort_keys=False, default_flow_style=False)


def manifest_paths(spec_path: Path) -> tuple[Path, Path]:
    """Where the review copies go beside the compiled spec: `pipeline.yaml` → `pipeline.tfjob.yaml`,
    `pipeline.rbac.yaml`."""
    return spec_path.with_name(spec_path.stem + TFJOB_SUFFIX), spec_path.with_name(spec_path.stem + RBAC_SUFFIX)


def tfjob_yaml(config: TfxpConfig, rbac_file: str = "pipeline.rbac.yaml") -> str:
    """The workers' TFJob template as the file a user reviews.

    Raises:
        WorkersConfigError: see `worker_template`.
    """
    namespace = config.kubeflow.namespace
    header = (
        f"The Training Operator {TFJOB_KIND} (kubeflow.org/v1, Training Operator v1.9) the Trainer task submits to\n"
        f"train on trainer.workers={config.trainer.workers} nodes. Written by `tfxp compile` for review; the "
        "compiled spec carries\n"
        "the same manifest. At run time the Trainer task fills in the job's name and the workers' FnArgs\n"
        f"({JOB_NAME_PLACEHOLDER}, {FN_ARGS_PLACEHOLDER}), creates it in its own pod's namespace ({namespace} "
        "when it runs as compiled) with an owner reference to its pod,\n"
        "submits the job, follows it and deletes it when the training ends: do not apply this file yourself.\n"
        f"The cluster needs the Training Operator (CRD tfjobs.kubeflow.org) and the RBAC in {rbac_file}."
    )
    return render_yaml([tfjob_template(worker_template(config))], header)


def rbac_yaml(config: TfxpConfig, rbac_file: str = "pipeline.rbac.yaml") -> str:
    """The Role and RoleBinding as the file a cluster admin applies.

    Raises:
        WorkersConfigError: a bad namespace or service account.
    """
    kubeflow = config.kubeflow
    rights = "".join(f"  {'/'.join(rule['resources'])}: {', '.join(rule['verbs'])}\n" for rule in RBAC_RULES)
    header = (
        f"The rights the pipeline's service account ({kubeflow.service_account} in {kubeflow.namespace}) needs for "
        "the Trainer\n"
        f"task to run the workers' TFJob, and no more:\n{rights}"
        "Apply it once, as someone allowed to grant these rights in the namespace:\n"
        f"  kubectl apply -n {kubeflow.namespace} -f {rbac_file}"
    )
    return render_yaml(rbac(config), header)


def write_manifests(config: TfxpConfig, spec_path: Path) -> tuple[Path, Path]:
    """Writes `tfjob_yaml` and `rbac_yaml` beside the compiled spec (`manifest_paths`) and returns their paths.

    Raises:
        WorkersConfigError: see `worker_template`.
        OSError: the folder is not writable.
    """
    tfjob_path, rbac_path = manifest_paths(spec_path)
    tfjob_text = tfjob_yaml(config, rbac_path.name)
    rbac_text = rbac_yaml(config, rbac_path.name)
    tfjob_path.write_text(tfjob_text)
    rbac_path.write_text(rbac_text)
    return tfjob_path, rbac_path
