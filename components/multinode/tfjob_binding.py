"""Binding the compiled TFJob template to one run: its name, namespace, FnArgs URI, owner and run-time labels.

`components.multinode.tfjob.tfjob_template` leaves two placeholders in the manifest at compile time; the Trainer task
fills them in with `bind_tfjob` when it runs, and makes its own pod the job's owner (`OwnerReference`), so that
deleting the pod deletes the job. Plain dicts, no Kubernetes client, no TFX.

Example:
    job = bind_tfjob(template, name=job_name_for(pod_name), namespace="kubeflow",
                     fn_args_uri="gs://bucket/root/Trainer/fn_args.json",
                     owner=OwnerReference(name=pod_name, uid=pod_uid))
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from components.multinode.tfjob import (
    CONTAINER_NAME,
    FN_ARGS_PLACEHOLDER,
    JOB_NAME_PLACEHOLDER,
    REPLICA_TYPE,
    TFJobError,
)
from components.multinode.tfjob_names import job_name_problem
from foundation.k8s.names import label_key_problem, label_value_problem, name_problem

_NO_LABELS: Mapping[str, str] = MappingProxyType({})


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
    """

    name: str
    uid: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": self.name,
            "uid": self.uid,
            "controller": False,
            "blockOwnerDeletion": False,
        }


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
