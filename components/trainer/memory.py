"""GPU memory configuration (`trainer.gpu_memory`): `growth`, `default` or `limit_mb:<N>`.

TensorFlow fixes device configuration when its runtime initializes (the first tensor or op), so this must run
first in the process; called later it raises `GpuMemoryConfigError` instead of TensorFlow's terse RuntimeError.

Example:
    configure_gpu_memory("growth")  # ["GPU:0: memory growth on", ...]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import tensorflow as tf

from foundation.errors import TfxpError

logger = logging.getLogger(__name__)


class GpuMemoryConfigError(TfxpError, RuntimeError):
    """`trainer.gpu_memory` is malformed or was applied after TensorFlow initialized its devices."""


def parse_gpu_memory(setting: str) -> tuple[str, int | None]:
    """`growth` | `default` | `limit_mb:<N>` → (mode, limit in MiB or None).

    Raises:
        GpuMemoryConfigError: any other value.
    """
    mode, _, limit = setting.partition(":")
    if mode in ("growth", "default") and not limit:
        return mode, None
    if mode == "limit_mb" and limit.isdigit() and int(limit) > 0:
        return mode, int(limit)
    raise GpuMemoryConfigError(
        f"trainer.gpu_memory = {setting!r} is not valid; "
        "use `growth`, `default` or `limit_mb:<MiB>` (e.g. limit_mb:30000)"
    )


def runtime_initialized() -> bool:
    """True once TensorFlow's eager runtime exists (after the first tensor/op), when devices are frozen."""
    # TensorFlow has no public query; its own device-configuration setters test this same handle.
    from tensorflow.python.eager import context

    return context.context()._context_handle is not None


def configure_gpu_memory(setting: str, physical_gpus: Sequence[tf.config.PhysicalDevice] | None = None) -> list[str]:
    """Applies `trainer.gpu_memory` to every visible GPU.

    Args:
        setting: `growth` (allocate as needed), `default` (TensorFlow maps nearly all GPU memory) or
            `limit_mb:<N>` (one logical device of N MiB per GPU).
        physical_gpus: The GPUs to configure; None = `tf.config.list_physical_devices("GPU")`.

    Returns:
        One line per configured GPU (also logged); empty when there is nothing to configure.

    Raises:
        GpuMemoryConfigError: a malformed setting, or GPUs to configure after TensorFlow's runtime initialized.
    """
    mode, limit = parse_gpu_memory(setting)
    gpus = list(tf.config.list_physical_devices("GPU") if physical_gpus is None else physical_gpus)
    if mode == "default" or not gpus:
        logger.info("gpu_memory=%s: %s", setting, "TensorFlow's default" if gpus else "no GPU visible, nothing to do")
        return []
    if runtime_initialized():
        if all(_already_applied(gpu, mode, limit) for gpu in gpus):  # e.g. an earlier run in this process
            return [f"{gpu.name}: {setting} already in effect" for gpu in gpus]
        raise _too_late(setting, "TensorFlow's runtime is already initialized in this process")
    configured = []
    try:
        for gpu in gpus:
            if mode == "growth":
                tf.config.experimental.set_memory_growth(gpu, True)
                configured.append(f"{gpu.name}: memory growth on")
            else:
                tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(limit)])
                configured.append(f"{gpu.name}: memory limit {limit} MiB")
    except RuntimeError as error:
        raise _too_late(setting, str(error)) from error
    for line in configured:
        logger.info("gpu_memory=%s: %s", setting, line)
    return configured


def _already_applied(gpu: tf.config.PhysicalDevice, mode: str, limit: int | None) -> bool:
    try:
        if mode == "growth":
            return bool(tf.config.experimental.get_memory_growth(gpu))
        logical = tf.config.get_logical_device_configuration(gpu)
    except ValueError:  # not a device TensorFlow knows
        return False
    return bool(logical) and len(logical) == 1 and logical[0].memory_limit == limit


def _too_late(setting: str, detail: str) -> GpuMemoryConfigError:
    return GpuMemoryConfigError(
        f"trainer.gpu_memory={setting} must be applied before TensorFlow creates its first tensor, but {detail}. "
        "Call configure_gpu_memory() first thing in the process (the Trainer's run_fn does), run the Trainer in "
        "its own process, or set trainer.gpu_memory=default."
    )
