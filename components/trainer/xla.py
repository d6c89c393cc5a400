"""`trainer.xla` (`auto` | `on` | `off`) → Keras `jit_compile`, with the reason.

`auto` compiles on GPUs, where XLA fuses the many small element-wise ops of mixed-precision training, and not
on CPU: there compilation costs seconds and rarely pays back, and with several replicas on logical CPU devices
MirroredStrategy + XLA fails (an XLA known issue, "Trying to access resource … located in device").

Example:
    resolve_xla("auto", replicas=8, num_gpus=8)  # (True, "auto: on for GPUs ...")
"""

from __future__ import annotations

XLA_SETTINGS = ("auto", "on", "off")


def resolve_xla(requested: str, replicas: int, num_gpus: int) -> tuple[bool, str]:
    """Decides `jit_compile`.

    Args:
        requested: `auto`, `on` or `off`.
        replicas: Replicas in sync of the distribution strategy.
        num_gpus: GPUs visible on this host.

    Raises:
        ValueError: an unknown setting, or `on` with several replicas on CPU devices (which XLA cannot run).
    """
    if requested not in XLA_SETTINGS:
        raise ValueError(f"unknown trainer.xla {requested!r}; valid: {', '.join(XLA_SETTINGS)}")
    if requested == "off":
        return False, "xla: requested off"
    if num_gpus == 0 and replicas > 1:
        if requested == "on":
            raise ValueError(
                f"trainer.xla=on with {replicas} replicas on CPU devices fails in XLA (resources placed on another "
                "device); use trainer.xla=auto or off, or a single replica (trainer.strategy=default)"
            )
        return False, f"xla auto: off ({replicas} replicas on CPU devices cannot use XLA)"
    if requested == "on":
        return True, "xla: requested on"
    if num_gpus:
        return True, f"xla auto: on ({num_gpus} GPU(s))"
    return False, "xla auto: off on CPU (compile time rarely pays back)"
