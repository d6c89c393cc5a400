"""A TFLite model checked on the architecture it ships to: the emulated ARM64 run compared with the host's.

The pure part: the comparison of two runs (top-1 agreement, largest difference in quantization steps,
accuracy on each). `verify_on_arch` runs both sides through `edge.arch` and compares them (`edge.arch_gate`
does it for the EdgeExporter).

Why a named core: XNNPACK picks its kernels from the CPU features it sees. QEMU's default CPU, `max`, advertises
the SME matrix extension; there XNNPACK's SME int8 kernels gave wrong results (top-1 agreement with x86 as low
as 10 %, outputs off by up to 255 quantization steps) while float models were fine. Whether QEMU's SME
emulation or the kernels are at fault is not known, and `max` is no device: the check runs on a named core.

Example:
    run = verify_on_arch(Path("model.tflite").read_bytes(), data.frames, data.labels, "cortex-a76")
    run.comparison.agreement  # 1.0
    run.comparison.max_steps  # 0 or 1 for an int8 model
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge.cores import Core, check_cpu, check_kernels, cpuinfo_problems, render_cpuinfo
from edge.errors import EdgeError

# What the emulated check does not cover, said wherever its result is shown (docs/edge.md, "Verify on ARM64").
APP_CLIENT_ON_HOST = (
    "MediaPipe's ImageClassifier check (edge.app_client) runs on the host only: the emulated runtime holds LiteRT "
    "and numpy. MediaPipe 1.2.2 does publish a manylinux_2_28_aarch64 wheel, but with its requirements it is 19 "
    "aarch64 wheels (opencv-contrib-python alone 64 MB, which also needs libGL in the Debian guest), not yet "
    "tried under qemu-user. Both checks run the same model bytes: the host one shows an app can load the model, "
    "this one that LiteRT's ARM kernels give the host's outputs."
)


def dequantize(raw: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Real values of an output tensor: scale × (q − zero_point); float outputs as they are."""
    if scale == 0.0:
        return raw.astype(np.float64)
    return (raw.astype(np.float64) - zero_point) * scale


@dataclass(frozen=True)
class Comparison:
    """The same inputs run on the host and on the target, with the same kernels.

    Attributes:
        count: Inputs compared.
        agreement: Fraction whose top-1 class is the same on both.
        max_steps: Largest output difference in quantization steps (the output's scale); None for a float output.
        max_abs_diff: Largest difference of the real (dequantized) outputs.
        host_accuracy: Accuracy on the host.
        target_accuracy: Accuracy on the target.
    """

    count: int
    agreement: float
    max_steps: int | None
    max_abs_diff: float
    host_accuracy: float
    target_accuracy: float

    def to_json(self) -> dict[str, Any]:
        return {
            "examples": self.count,
            "top1_agreement": self.agreement,
            "max_steps": self.max_steps,
            "max_abs_diff": self.max_abs_diff,
            "host_accuracy": self.host_accuracy,
            "target_accuracy": self.target_accuracy,
        }


def compare(host: np.ndarray, target: np.ndarray, labels: np.ndarray, scale: float, zero_point: int) -> Comparison:
    """Compares two runs' raw outputs [N, num_classes] of one output tensor.

    Args:
        host: Raw outputs on the host (quantized integers for a quantized output).
        target: Raw outputs on the target, same inputs in the same order.
        labels: int [N], 0-based.
        scale: The output tensor's quantization scale; 0.0 for a float output.
        zero_point: Its zero point.

    Raises:
        EdgeError: outputs of different shapes, or labels of another length.
    """
    if host.shape != target.shape or len(labels) != len(host):
        raise EdgeError(
            f"cannot compare outputs {list(host.shape)} (host) and {list(target.shape)} (target) for "
            f"{len(labels)} labels; both runs must take the same inputs"
        )
    real_host, real_target = dequantize(host, scale, zero_point), dequantize(target, scale, zero_point)
    difference = float(np.max(np.abs(real_host - real_target))) if host.size else 0.0
    host_top1, target_top1 = np.argmax(host, axis=-1), np.argmax(target, axis=-1)
    count = len(labels)
    return Comparison(
        count=count,
        agreement=float(np.mean(host_top1 == target_top1)) if count else 0.0,
        max_steps=round(difference / scale) if scale else None,
        max_abs_diff=difference,
        host_accuracy=float(np.mean(host_top1 == labels)) if count else 0.0,
        target_accuracy=float(np.mean(target_top1 == labels)) if count else 0.0,
    )


def judge(
    comparison: Comparison,
    min_agreement: float,
    reference_accuracy: float | None = None,
    max_drop: float = 0.0,
    target: str = "aarch64",
) -> tuple[bool, str]:
    """Passes when agreement ≥ `min_agreement` and, given a reference, the target's accuracy is within `max_drop`.

    Returns:
        (passed, one sentence with the figures and the limits).
    """
    agreed = round(comparison.agreement * comparison.count)
    steps = "float output" if comparison.max_steps is None else f"max {comparison.max_steps} quantization steps"
    parts = [
        f"top-1 agreement {agreed}/{comparison.count} ({comparison.agreement:.4f}, min {min_agreement:.4f})",
        steps,
        f"accuracy {comparison.target_accuracy:.4f} on {target}, {comparison.host_accuracy:.4f} on the host",
    ]
    passed = comparison.agreement + 1e-9 >= min_agreement
    if reference_accuracy is not None:
        drop = reference_accuracy - comparison.target_accuracy
        within = drop <= max_drop + 1e-9
        passed = passed and within
        verdict = "within" if within else "exceeds"
        parts.append(f"drop vs SavedModel {drop * 100:.2f} points {verdict} {max_drop * 100:.2f}")
    return passed, "; ".join(parts)


@dataclass(frozen=True)
class ArchRun:
    """Both runs of one model and their comparison.

    Attributes:
        core: The emulated core.
        kernels: The kernels both sides ran (`KERNELS`).
        comparison: The comparison.
        host: The host run's facts (`result.json` of `edge.arm_guest`, and its `machine`).
        target: The target run's facts.
        runtime: The emulated runtime's versions, cache dir, setup time and disk.
    """

    core: Core
    kernels: str
    comparison: Comparison
    host: dict[str, Any] = field(repr=False)
    target: dict[str, Any] = field(repr=False)
    runtime: dict[str, Any] = field(repr=False)


def verify_on_arch(
    model: bytes,
    images: np.ndarray,
    labels: np.ndarray,
    cpu: str,
    *,
    kernels: str = "xnnpack",
    threads: int = 1,
    report: Callable[[str], None] = print,
) -> ArchRun:
    """Runs `model` on the host and on the emulated ARM64 `cpu` with the same kernels and compares the outputs.

    Args:
        model: TFLite flatbuffer.
        images: The model's real inputs, for a device model frames [N, H, W, 3] with pixels 0..255
            (`LabeledImages.frames`); quantized once here, so both sides get the same input bytes.
        labels: int [N], 0-based.
        cpu: A core of `CORES` (`max` is refused, see `check_cpu`).
        kernels: `xnnpack` (LiteRT's default), `builtin` or `reference`, pinned on both sides.
        threads: Interpreter threads on both sides. Defaults to 1.
        report: Receives progress lines (the runtime's one-time preparation). Defaults to print.

    Raises:
        edge.arch.RuntimeUnavailableError: the emulated runtime cannot be prepared (no qemu/mmdebstrap, offline).
        edge.arch.TargetFailedError: the model did not run on the target, or not on the core/kernels asked for.
        EdgeError: a bad cpu/kernels value or a model LiteRT cannot load on the host.
    """
    from edge import arch
    from edge.runtime import TfliteModel

    core = check_cpu(cpu)
    check_kernels(kernels)
    host_model = TfliteModel(model, threads=threads, where="the model to verify")
    runtime = arch.prepare_runtime(report)
    with tempfile.TemporaryDirectory(prefix="tfxp-arm-") as work:
        job = arch.RunnerJob.write(
            Path(work), model, host_model.quantize_input(images), host_model, kernels=kernels, threads=threads
        )
        host = arch.run_on_host(job, Path(work) / "host")
        try:
            target = arch.run_on_target(runtime, core, render_cpuinfo(core, arch.processors()), job, Path(work) / "arm")
        except arch.TargetFailedError as error:
            seen = error.probe
            problems = cpuinfo_problems(seen["cpuinfo"], core, seen["hwcap"], seen["hwcap2"]) if seen else []
            raise arch.TargetFailedError("; ".join([str(error), *problems]), seen) from None
    problems = cpuinfo_problems(target.probe["cpuinfo"], core, target.probe["hwcap"], target.probe["hwcap2"])
    for side, facts in (("host", host.facts), (f"emulated {core.name}", target.facts)):
        if kernels == "xnnpack" and not facts["delegated_nodes"]:
            problems.append(f"XNNPACK took no op on the {side}, so the two runs would not use the same kernels")
    if problems:
        raise arch.TargetFailedError(f"the {core.name} run does not stand for that core: {'; '.join(problems)}")
    output = host.facts["output"]
    comparison = compare(host.outputs, target.outputs, labels, output["scale"], output["zero_point"])
    host_facts, target_facts = ({**run.facts, "machine": run.probe["machine"]} for run in (host, target))
    return ArchRun(core, kernels, comparison, host_facts, target_facts, runtime.to_json())
