"""Runs a TFLite model on a .npy of inputs with pinned kernels; the same script runs on the host and the target.

`edge.arch` starts it twice per check: with the host's Python, and with the aarch64 Python of the emulated ARM64
runtime (qemu-user). It imports only the standard library, numpy and ai_edge_litert, which both sides have.

It writes into OUT_DIR, in this order:
- `probe.json` before LiteRT is imported: the machine, the CPU features the (emulated) kernel reports (HWCAP,
  HWCAP2) and /proc/cpuinfo as this process reads it, so a crash while XNNPACK inspects the CPU can be explained;
- `outputs.npy`: the raw output tensor (quantized integers for an int8 model), all inputs in order;
- `result.json`: the output tensor's type and quantization, how many nodes XNNPACK took, the library versions.

Example (what `edge.arch` runs):
    python arm_guest.py model.tflite inputs.npy out/ --signature serving_preprocessed --input images \
        --output probabilities --kernels xnnpack --threads 1
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

AT_HWCAP = 16  # getauxval keys (linux/auxvec.h)
AT_HWCAP2 = 26
# Kernel choices, by name (edge.verify.KERNELS lists the same names): LiteRT's op resolver for each.
RESOLVERS = {
    "xnnpack": "BUILTIN",  # built-in ops with the XNNPACK delegate applied, as LiteRT runs by default
    "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",  # LiteRT's own optimized kernels, no XNNPACK
    "reference": "BUILTIN_REF",  # LiteRT's reference kernels (slow, simplest code)
}


def probe() -> dict[str, Any]:
    """What this process sees of its CPU: the machine, HWCAP/HWCAP2 and /proc/cpuinfo."""
    try:
        libc = ctypes.CDLL(None)
        libc.getauxval.restype = ctypes.c_ulong
        libc.getauxval.argtypes = [ctypes.c_ulong]
        hwcap, hwcap2 = int(libc.getauxval(AT_HWCAP)), int(libc.getauxval(AT_HWCAP2))
    except (OSError, AttributeError):
        hwcap = hwcap2 = 0
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError as error:
        cpuinfo = f"unreadable: {error}"
    return {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "hwcap": hwcap,
        "hwcap2": hwcap2,
        "cpuinfo": cpuinfo,
    }


def run(
    model: Path, inputs: np.ndarray, signature: str, input_name: str, output_name: str, kernels: str, threads: int
) -> tuple[np.ndarray, dict[str, Any]]:
    """The raw `output_name` tensor for every input (in batches of 32, or of the input's fixed batch size),
    and facts about the run."""
    import ai_edge_litert
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(
        model_path=str(model),
        num_threads=threads,
        experimental_op_resolver_type=OpResolverType[RESOLVERS[kernels]],
    )
    runner = interpreter.get_signature_runner(signature)
    fixed = int(runner.get_input_details()[input_name]["shape_signature"][0])
    size = 32 if fixed == -1 else fixed  # a device model takes one frame [1, H, W, 3]
    batches = [
        runner(**{input_name: inputs[start : start + size]})[output_name] for start in range(0, len(inputs), size)
    ]
    details = runner.get_output_details()[output_name]
    scale, zero_point = details["quantization"]
    facts = {
        "kernels": kernels,
        "threads": threads,
        # A DELEGATE node is XNNPACK's: the only sign, in LiteRT's Python API, that it took part of the graph.
        "delegated_nodes": sum(op["op_name"] == "DELEGATE" for op in interpreter._get_ops_details()),
        "output": {"dtype": np.dtype(details["dtype"]).name, "scale": float(scale), "zero_point": int(zero_point)},
        "versions": {"ai_edge_litert": getattr(ai_edge_litert, "__version__", "unknown"), "numpy": np.__version__},
    }
    return np.concatenate(batches), facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("inputs", type=Path, help=".npy of inputs already in the model's input type")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--signature", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--kernels", choices=sorted(RESOLVERS), default="xnnpack")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "probe.json").write_text(json.dumps(probe()))
    outputs, facts = run(
        args.model, np.load(args.inputs), args.signature, args.input, args.output, args.kernels, args.threads
    )
    np.save(args.out_dir / "outputs.npy", outputs)
    (args.out_dir / "result.json").write_text(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
