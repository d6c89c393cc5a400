"""The TFJob's name: which names the operator can use for a job of N workers, and the one tfxp derives for a task.

The Training Operator's webhook wants a DNS-1035 job name (`pkg/webhooks/tensorflow/tfjob_webhook.go:74`, kubeflow/
trainer release-1.9 at 3a3a1da), and every replica's pod and Service are called `<job>-worker-<index>`
(`pkg/core/utils.go:30-33`); a Service name is a DNS-1035 label of at most 63 characters, so the job name must leave
room for `-worker-<index>`, which the webhook does not check (a longer name is accepted and then never gets its
Services).

Example:
    name = job_name_for(pod_name)  # 'tfxp-imagenet-resnet50-8x7kq-system-conta-c93b3b23'
    assert job_name_problem(name, workers=8) is None
"""

from __future__ import annotations

import hashlib
import re

from components.multinode.tfjob import REPLICA_TYPE, TFJobError
from foundation.k8s.names import DNS1035_LABEL, MAX_LABEL_LENGTH

# Room in the 63 characters of a Service name `<job>-worker-<index>` (pkg/core/utils.go:30-33) for indices of up to
# five digits, far past trainer.workers' limit; `job_name_for` stays within it.
MAX_INDEX_DIGITS = 5
MAX_JOB_NAME_LENGTH = MAX_LABEL_LENGTH - len(f"-{REPLICA_TYPE.lower()}-") - MAX_INDEX_DIGITS
# Hex digits of the sha256 that ends a derived name (here and in `components.multinode.tfjob_rbac`).
HASH_LENGTH = 8


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
    digest = hashlib.sha256(run_id_or_pod_name.encode()).hexdigest()[:HASH_LENGTH]
    readable = re.sub(r"[^a-z0-9]+", "-", run_id_or_pod_name.lower())
    readable = readable.lstrip("-0123456789")[: MAX_JOB_NAME_LENGTH - HASH_LENGTH - 1].strip("-")
    return f"{readable or 'tfjob'}-{digest}"
