"""The Trainer's first phase: the process-wide runtime choices, made before any model or data exists.

Each choice comes with the reason it was made (logged, and the strategy, precision and XLA reasons are kept in
`training_metrics.json`). The order is not free:

1. GPU memory: TensorFlow freezes device configuration when its runtime starts (the first tensor or op).
2. Distribution strategy: MultiWorkerMirroredStrategy must be created before other ops run in the process.
3. Precision policy: set globally before the model is built, so every layer picks it up.
4. XLA: whether to compile depends on the replicas the strategy made.
5. Seeds, then op determinism: before weights are initialized and the input pipeline shuffles.

Example:
    runtime = set_up_runtime(TrainerOptions(batch_size=64))
    runtime.replicas, runtime.global_batch, runtime.reasons["precision"]
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import tensorflow as tf
import tf_keras as keras

from components.trainer.memory import configure_gpu_memory
from components.trainer.options import TrainerOptions
from components.trainer.precision import resolve_precision
from components.trainer.strategy import cluster_workers, create_strategy, is_chief, resolve_strategy, worker_index
from components.trainer.xla import resolve_xla

logger = logging.getLogger(__name__)

REPORTED_REASONS = ("strategy", "precision", "xla")
"""The reasons `training_metrics.json` keeps (under `reasons`)."""


@dataclass(frozen=True)
class TrainingRuntime:
    """The runtime one training runs under.

    Attributes:
        strategy: The distribution strategy; build and compile the model in its scope.
        strategy_name: `default`, `mirrored` or `multi_worker`.
        policy: The Keras precision policy set globally (`float32`, `mixed_float16`, `mixed_bfloat16`).
        jit_compile: Whether `model.compile` asks for XLA.
        gpu_memory: One line per configured GPU (empty without GPUs or with `trainer.gpu_memory=default`).
        global_batch: Examples per step over all replicas (`trainer.batch_size` × replicas).
        workers: Input shards: the cluster's workers under MultiWorkerMirroredStrategy, 1 otherwise.
        worker_index: This task's input shard.
        reasons: Why each setting was chosen, in set-up order: `gpu_memory`, `strategy`, `precision`, `xla`,
            `seed`, `determinism`.
    """

    strategy: tf.distribute.Strategy
    strategy_name: str
    policy: str
    jit_compile: bool
    gpu_memory: list[str]
    global_batch: int
    workers: int
    worker_index: int
    reasons: dict[str, str]

    @property
    def replicas(self) -> int:
        """Replicas in sync (devices over all workers)."""
        return int(self.strategy.num_replicas_in_sync)

    @property
    def chief(self) -> bool:
        """Whether this task writes the outputs (always outside multi-worker training)."""
        return is_chief(self.strategy)


def gpu_compute_capabilities() -> list[tuple[int, int]]:
    """The compute capability of each visible GPU that reports one (for the precision choice)."""
    capabilities = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if capability:
            capabilities.append(tuple(capability))
    return capabilities


def set_up_runtime(trainer: TrainerOptions, tf_config: str | None = None) -> TrainingRuntime:
    """Applies the trainer's runtime settings to this process, in the order TensorFlow requires.

    Args:
        trainer: The trainer section (`gpu_memory`, `strategy`, `precision`, `xla`, `seed`, `deterministic`,
            `batch_size`).
        tf_config: The cluster description; None reads the TF_CONFIG environment variable.

    Returns:
        The runtime, with the reason for each choice (also logged).

    Raises:
        GpuMemoryConfigError: GPU memory could not be configured (e.g. TensorFlow initialized too early).
        ValueError: an unknown strategy, precision or XLA setting, or a malformed TF_CONFIG.
    """
    tf_config = os.environ.get("TF_CONFIG") if tf_config is None else tf_config
    memory = configure_gpu_memory(trainer.gpu_memory)
    num_gpus = len(tf.config.list_physical_devices("GPU"))
    strategy_name, strategy_reason = resolve_strategy(trainer.strategy, tf_config, num_gpus)
    strategy = create_strategy(strategy_name, trainer.collective_timeout_seconds)
    policy, precision_reason = resolve_precision(trainer.precision, gpu_compute_capabilities())
    replicas = strategy.num_replicas_in_sync
    jit_compile, xla_reason = resolve_xla(trainer.xla, replicas=replicas, num_gpus=num_gpus)
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(trainer.seed)
    if trainer.deterministic:
        tf.config.experimental.enable_op_determinism()
    workers = cluster_workers(tf_config) if strategy_name == "multi_worker" else 1
    reasons = {
        "gpu_memory": _gpu_memory_reason(trainer.gpu_memory, memory),
        "strategy": strategy_reason,
        "precision": precision_reason,
        "xla": xla_reason,
        "seed": f"seed {trainer.seed} for Python, NumPy and TensorFlow (weights, shuffling, augmentation)",
        "determinism": _determinism_reason(trainer.deterministic),
    }
    for line in reasons.values():
        logger.info("trainer: %s", line)
    return TrainingRuntime(
        strategy=strategy,
        strategy_name=strategy_name,
        policy=policy,
        jit_compile=jit_compile,
        gpu_memory=memory,
        global_batch=trainer.batch_size * replicas,
        workers=workers,
        worker_index=worker_index(tf_config) if workers > 1 else 0,
        reasons=reasons,
    )


def _gpu_memory_reason(setting: str, configured: list[str]) -> str:
    if not configured:
        return f"gpu_memory={setting}: nothing to configure (no GPU visible, or TensorFlow's default)"
    return f"gpu_memory={setting}: " + "; ".join(configured)


def _determinism_reason(deterministic: bool) -> str:
    if deterministic:
        return "op determinism on (trainer.deterministic): repeatable results, some kernels slower"
    return "op determinism off: TensorFlow may pick faster non-deterministic kernels"
