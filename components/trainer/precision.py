"""Which Keras mixed-precision policy a run uses, and why.

A pure function of the requested policy and the visible GPUs' compute capabilities, so
`tfxp doctor` and the Trainer agree, and tests need no GPU.

Example:
    resolve_precision("auto", [(8, 0)] * 8)
    # ('mixed_float16', 'auto: all 8 GPUs have compute capability >= 7.0 (lowest 8.0), ...')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import get_args

from components.trainer.options import Precision

ComputeCapability = tuple[int, int]

# float16 matrix maths runs on Tensor Cores from Volta (7.0) on; bfloat16 from Ampere (8.0).
FLOAT16_MIN_CAPABILITY: ComputeCapability = (7, 0)
BFLOAT16_MIN_CAPABILITY: ComputeCapability = (8, 0)


def _format(capability: ComputeCapability) -> str:
    return f"{capability[0]}.{capability[1]}"


def _gpus(capabilities: Sequence[ComputeCapability]) -> str:
    count = len(capabilities)
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def _auto(capabilities: Sequence[ComputeCapability]) -> tuple[str, str]:
    if not capabilities:
        return "float32", "auto: no GPU visible, so float32 (mixed precision only pays off on GPU Tensor Cores)"
    lowest = min(capabilities)
    if lowest >= FLOAT16_MIN_CAPABILITY:
        return "mixed_float16", (
            f"auto: {'the' if len(capabilities) == 1 else 'all'} {_gpus(capabilities)} "
            f"{'has' if len(capabilities) == 1 else 'have'} compute capability >= 7.0 "
            f"(lowest {_format(lowest)}), so mixed_float16 uses their Tensor Cores"
        )
    return "float32", (
        f"auto: a GPU has compute capability {_format(lowest)} < 7.0 (no float16 Tensor Cores), so float32"
    )


def _float32_note(capabilities: Sequence[ComputeCapability]) -> str:
    if capabilities and min(capabilities) >= FLOAT16_MIN_CAPABILITY:
        return "requested float32 (auto would pick mixed_float16 on these GPUs, usually 2-3x faster)"
    return "requested float32"


def _mixed_note(minimum: ComputeCapability, dtype: str) -> Callable[[Sequence[ComputeCapability]], str]:
    def note(capabilities: Sequence[ComputeCapability]) -> str:
        if not capabilities:
            return f"requested mixed_{dtype}; no GPU visible: {dtype} maths on CPU is emulated and slow, prefer float32"
        lowest = min(capabilities)
        if lowest < minimum:
            return (
                f"requested mixed_{dtype}; a GPU has compute capability {_format(lowest)} < {_format(minimum)}, "
                f"which has no {dtype} Tensor Cores: expect no speed-up over float32"
            )
        return f"requested mixed_{dtype}; all GPUs have compute capability >= {_format(minimum)}"

    return note


# The names come from the `trainer.precision` Literal (declared once, in the trainer section).
PRECISIONS: tuple[str, ...] = get_args(Precision)
# Explicit policies pass through; each has a note on how it suits the hardware.
_EXPLICIT: dict[str, Callable[[Sequence[ComputeCapability]], str]] = {
    "float32": _float32_note,
    "mixed_float16": _mixed_note(FLOAT16_MIN_CAPABILITY, "float16"),
    "mixed_bfloat16": _mixed_note(BFLOAT16_MIN_CAPABILITY, "bfloat16"),
}


def resolve_precision(requested: str, gpu_compute_capabilities: Sequence[ComputeCapability]) -> tuple[str, str]:
    """Resolves `trainer.precision` to a Keras mixed-precision policy name.

    Args:
        requested: `auto`, `float32`, `mixed_float16` or `mixed_bfloat16`.
        gpu_compute_capabilities: (major, minor) of each visible GPU; empty = no GPU.

    Returns:
        (policy, reason): the policy for `keras.mixed_precision.set_global_policy` and one
        human sentence saying why (`auto`) or how the explicit choice suits the hardware.

    Raises:
        ValueError: `requested` is not one of the known precisions.

    Example:
        resolve_precision("auto", [])  # ('float32', 'auto: no GPU visible, so float32 ...')
    """
    if requested not in PRECISIONS:
        raise ValueError(f"trainer.precision={requested!r} is not supported; use one of: {', '.join(PRECISIONS)}")
    if requested == "auto":
        return _auto(gpu_compute_capabilities)
    return requested, _EXPLICIT[requested](gpu_compute_capabilities)
