"""Distribution strategy choice: which `tf.distribute` strategy a run trains under, and which task is chief.

`auto` = MultiWorkerMirroredStrategy when TF_CONFIG names more than one worker, MirroredStrategy when more than
one GPU is visible, the default (single-device) strategy otherwise. The choice is a pure function of the
environment (`resolve_strategy`), so it is tested without devices; `create_strategy` builds it.

Example:
    name, reason = resolve_strategy("auto", os.environ.get("TF_CONFIG"), num_gpus=8)  # ("mirrored", "...")
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from foundation.bounded import parse_json

STRATEGIES = ("auto", "default", "mirrored", "multi_worker")


def cluster_workers(tf_config: str | None) -> int:
    """Number of chief + worker tasks TF_CONFIG names (0 when unset or empty).

    Raises:
        ValueError: TF_CONFIG is not JSON with a `cluster` mapping.
    """
    if not tf_config:
        return 0
    try:
        cluster = parse_json(tf_config).get("cluster", {})
        return sum(len(cluster.get(kind, [])) for kind in ("chief", "worker"))
    except (ValueError, AttributeError, TypeError) as error:  # a cluster or task list of odd shape
        raise ValueError(
            f"TF_CONFIG is not a JSON object with a `cluster` mapping of task lists ({type(error).__name__}: "
            f'{error}); expected e.g. {{"cluster": {{"worker": ["host:port", ...]}}, "task": {{"type": "worker", '
            '"index": 0}}'
        ) from None


def worker_index(tf_config: str | None) -> int:
    """This task's position among the chief + worker tasks of TF_CONFIG (chief first), 0 when unset.

    Raises:
        ValueError: TF_CONFIG is not JSON with `cluster` and `task` mappings.
    """
    if not tf_config:
        return 0
    try:
        parsed = parse_json(tf_config)
        cluster, task = parsed.get("cluster", {}), parsed.get("task", {})
        task_type, index = task.get("type", "worker"), int(task.get("index", 0))
        return index if task_type == "chief" else len(cluster.get("chief", [])) + index
    except (AttributeError, TypeError, ValueError) as error:
        raise ValueError(
            f'TF_CONFIG has no usable `task` ({error}); expected e.g. {{"type": "worker", "index": 0}}'
        ) from None


def resolve_strategy(requested: str, tf_config: str | None, num_gpus: int) -> tuple[str, str]:
    """Resolves `trainer.strategy` to one of `default`, `mirrored`, `multi_worker`, with the reason.

    Args:
        requested: `auto`, `default`, `mirrored` or `multi_worker`.
        tf_config: The TF_CONFIG environment variable (None when unset).
        num_gpus: Visible GPUs on this host.

    Raises:
        ValueError: an unknown strategy name, or `multi_worker` without a TF_CONFIG cluster.
    """
    if requested not in STRATEGIES:
        raise ValueError(f"unknown strategy {requested!r} (trainer.strategy); valid: {', '.join(STRATEGIES)}")
    workers = cluster_workers(tf_config)
    if requested == "auto":
        if workers > 1:
            return "multi_worker", f"auto: TF_CONFIG names {workers} workers"
        if num_gpus > 1:
            return "mirrored", f"auto: {num_gpus} GPUs on this host"
        return "default", f"auto: one worker and {num_gpus} GPU(s), so a single device"
    if requested == "multi_worker" and workers < 1:
        raise ValueError(
            "trainer.strategy=multi_worker needs TF_CONFIG naming the cluster and this task "
            "(Kubeflow's TFJob and Vertex set it); unset it or use trainer.strategy=auto|default|mirrored"
        )
    return requested, f"requested {requested}"


def _mirrored() -> tf.distribute.Strategy:
    # On a GPU-less host, mirror over all logical CPU devices (how tests exercise it); MirroredStrategy()
    # alone would pick only /cpu:0 there.
    gpus = tf.config.list_logical_devices("GPU")
    devices = [device.name for device in gpus or tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices=devices)


def _multi_worker(collective_timeout_seconds: float | None) -> tf.distribute.Strategy:
    # NCCL all-reduces between GPUs, ring (gRPC) between CPUs. A collective that waits longer than the timeout
    # fails on every worker instead of blocking them all behind a lost peer. Besides, TF 2.21's strategy starts
    # TensorFlow's coordination service, whose heartbeats detect a lost worker and fail the others (it then turns
    # its Python-level `_check_health` off: tensorflow/python/distribute/collective_all_reduce_strategy.py, in
    # `_initialize_multi_worker`), so the failed workers restart and resume from the backup.
    implementation = (
        tf.distribute.experimental.CommunicationImplementation.NCCL
        if tf.config.list_physical_devices("GPU")
        else tf.distribute.experimental.CommunicationImplementation.RING
    )
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation, timeout_seconds=collective_timeout_seconds
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def create_strategy(name: str, collective_timeout_seconds: float | None = None) -> tf.distribute.Strategy:
    """Builds a resolved strategy (`default`, `mirrored` or `multi_worker`).

    Args:
        name: A name `resolve_strategy` returned.
        collective_timeout_seconds: Multi-worker only: how long one collective may wait for its peers.

    MultiWorkerMirroredStrategy must be created before other TF ops run in the process.
    """
    if name == "multi_worker":
        return _multi_worker(collective_timeout_seconds)
    factories: dict[str, Callable[[], tf.distribute.Strategy]] = {
        "default": tf.distribute.get_strategy,
        "mirrored": _mirrored,
    }
    return factories[name]()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the task that exports (the only task outside multi-worker; the chief or worker 0 inside)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().jobs
    )
