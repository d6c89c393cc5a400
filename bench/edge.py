"""Edge benchmark: size, accuracy and LiteRT latency of every quantization mode, in one run.

Models:
- digits: the digits model as `configs/default.yaml` trains it (trained here with components.trainer unless
  `--saved-model` gives one), evaluated on the eval split against its SavedModel;
- mobilenet_v2 at 224×224×3 with 1,000 classes from the trainer's registry (random init: sizes and latency
  only, accuracy of untrained weights means nothing; int8 calibrates on digits images resized to 224 RGB).

Sizes: of the models as tfxp ships them (tensor debug names stripped, signatures kept; see
`edge.quantize.strip_tensor_names`), with the sizes and ratios of the same models with names beside them.

Latency: batch 1, LiteRT with XNNPACK and `--threads`, interleaved: each round times every mode in turn, so
drifting machine load hits all modes alike. Gates of issue 6 are reported as checks with their limits.

Usage:
    .venv/bin/python bench/edge.py --out bench/results [--saved-model DIR --data DIR] [--skip-mobilenet]
"""

from __future__ import annotations

import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import bench_parser, command_line, write_report

ROOT = Path(__file__).resolve().parents[1]
# `python bench/edge.py` puts bench/ first on sys.path, where this file would shadow the `edge` package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != ROOT / "bench"]

MODES = ("none", "dynamic", "float16", "int8")
# Issue 6, "Done when": sizes relative to the float32 TFLite model, accuracy drop in points.
DIGITS_LIMITS = {"int8_size_ratio": 0.30, "int8_accuracy_drop_points": 1.0, "float16_size_ratio": 0.55}
MOBILENET_LIMITS = {"int8_size_ratio": 0.31, "dynamic_size_ratio": 0.29}


def cpu_info() -> dict[str, Any]:
    """CPU model and the SIMD features that decide int8 speed (VNNI) on x86."""
    info: dict[str, Any] = {"machine": platform.machine(), "cpu": platform.processor()}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            info["cpu"] = value.strip()
        if key.strip() == "flags":
            flags = set(value.split())
            info["simd"] = sorted(flags & {"avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"})
            break
    return info


def make_digits(workdir: Path) -> Path:
    from components.data.digits import write_digits

    data = workdir / "digits"
    write_digits(data)
    return data


def train_digits(data: Path, workdir: Path, overrides: list[str]) -> tuple[Path, dict[str, Any]]:
    """Trains the default config's digits model with the pipeline's own trainer code; returns the SavedModel."""
    from components.trainer.options import parse_custom_config
    from components.trainer.training import TrainerPaths, train_and_export
    from pipeline.component_settings import trainer_custom_config
    from pipeline.config import load_config

    config = load_config(ROOT / "configs" / "default.yaml", [f"data.path={data}", *overrides])
    run = parse_custom_config(trainer_custom_config(config))
    export_dir = workdir / "digits_model"
    paths = TrainerPaths(
        train_files=[str(data / "train" / "*")],
        eval_files=[str(data / "eval" / "*")],
        serving_model_dir=str(export_dir),
        model_run_dir=str(workdir / "digits_run"),
    )
    metrics = train_and_export(run, paths)
    return export_dir, {"trainer": config.trainer.model_dump(mode="json"), "final_accuracy": metrics["final_accuracy"]}


def export_mobilenet(workdir: Path) -> Path:
    from components.trainer.export import export_saved_model
    from components.trainer.models import ModelSpec, build_model, registered_models
    from foundation.preprocessing_spec import PreprocessingSpec

    if "mobilenet_v2" not in registered_models():
        raise LookupError(f"mobilenet_v2 is not in the trainer's model registry ({registered_models()})")
    spec = ModelSpec(image_size=224, channels=3, num_classes=1000, width=32)  # width 32 = alpha 1.0
    export_dir = workdir / "mobilenet_v2"
    labels = [f"class_{index}" for index in range(spec.num_classes)]
    export_saved_model(build_model("mobilenet_v2", spec), str(export_dir), PreprocessingSpec(224, 3), labels)
    return export_dir


def measure_model(
    saved_model: Path, data: Path, samples: int, threads: int, rounds: int, runs: int, with_accuracy: bool
) -> dict[str, Any]:
    """Converts every mode, evaluates (optionally) and times them interleaved; returns the per-mode table."""
    from edge.benchmark import LatencyStats, batch_one_input, time_invocations
    from edge.data import load_split
    from edge.evaluate import evaluate, evaluate_saved_model
    from edge.inputs import read_preprocessing
    from edge.quantize import convert, strip_tensor_names
    from edge.runtime import TfliteModel

    spec = read_preprocessing(saved_model)
    calibration = load_split(data, "train", spec, limit=samples, shuffle=True).frames
    results: dict[str, Any] = {"image_size": spec.image_size, "channels": spec.channels, "modes": {}}
    models: dict[str, TfliteModel] = {}
    for mode in MODES:
        started = time.perf_counter()
        named = convert(saved_model, mode, calibration if mode == "int8" else None, keep_tensor_names=True)
        tflite = strip_tensor_names(named)  # what `convert` returns by default and the EdgeExporter ships
        models[mode] = TfliteModel(tflite, threads=threads)
        results["modes"][mode] = {
            "size_bytes": len(tflite),
            "size_bytes_with_tensor_names": len(named),
            "convert_seconds": round(time.perf_counter() - started, 1),
        }
    float_row = results["modes"]["none"]
    for row in results["modes"].values():
        row["size_ratio"] = row["size_bytes"] / float_row["size_bytes"]
        row["size_ratio_with_tensor_names"] = (
            row["size_bytes_with_tensor_names"] / float_row["size_bytes_with_tensor_names"]
        )

    if with_accuracy:
        eval_data = load_split(data, "eval", spec)
        reference = evaluate_saved_model(saved_model, eval_data).accuracy
        results["saved_model_accuracy"] = reference
        results["eval_examples"] = len(eval_data)
        for mode, model in models.items():
            accuracy = evaluate(model, eval_data).accuracy
            results["modes"][mode]["accuracy"] = accuracy
            results["modes"][mode]["accuracy_drop_points"] = (reference - accuracy) * 100

    inputs = {mode: batch_one_input(model) for mode, model in models.items()}
    samples_by_mode: dict[str, list[float]] = {mode: [] for mode in models}
    for mode, model in models.items():  # warm-up: XNNPACK packs weights on the first invocations
        time_invocations(model, inputs[mode], 5)
    for _ in range(rounds):
        for mode, model in models.items():
            samples_by_mode[mode] += time_invocations(model, inputs[mode], runs)
    for mode, durations in samples_by_mode.items():
        stats = LatencyStats.of(durations)
        results["modes"][mode].update(p50_ms=stats.p50_ms, p99_ms=stats.p99_ms, mean_ms=stats.mean_ms, runs=stats.runs)
    return results


def checks(results: dict[str, Any], limits: dict[str, float]) -> dict[str, Any]:
    """Each limit with its measured value and whether it holds."""
    modes = results["modes"]
    measured = {
        "int8_size_ratio": modes["int8"]["size_ratio"],
        "dynamic_size_ratio": modes["dynamic"]["size_ratio"],
        "float16_size_ratio": modes["float16"]["size_ratio"],
        "int8_accuracy_drop_points": modes["int8"].get("accuracy_drop_points"),
    }
    return {
        name: {"value": measured[name], "limit": limit, "pass": measured[name] is not None and measured[name] <= limit}
        for name, limit in limits.items()
    }


def print_table(name: str, results: dict[str, Any]) -> None:
    print(f"\n{name} ({results['image_size']}×{results['image_size']}×{results['channels']})", end="")
    if "saved_model_accuracy" in results:
        print(f", SavedModel accuracy {results['saved_model_accuracy']:.4f} on {results['eval_examples']} eval")
    else:
        print(", untrained: accuracy not measured")
    print(
        f"  {'mode':<8} {'size KiB':>10} {'× float32':>10} {'(named)':>8} {'accuracy':>9} {'drop pts':>9} "
        f"{'p50 ms':>8} {'p99 ms':>8}"
    )
    for mode, row in results["modes"].items():
        accuracy = f"{row['accuracy']:.4f}" if "accuracy" in row else "—"
        drop = f"{row['accuracy_drop_points']:+.2f}" if "accuracy_drop_points" in row else "—"
        print(
            f"  {mode:<8} {row['size_bytes'] / 1024:>10.1f} {row['size_ratio']:>10.3f} "
            f"{row['size_ratio_with_tensor_names']:>8.3f} {accuracy:>9} {drop:>9} "
            f"{row['p50_ms']:>8.3f} {row['p99_ms']:>8.3f}"
        )
    for check, verdict in results.get("checks", {}).items():
        value = "n/a" if verdict["value"] is None else f"{verdict['value']:.3f}"
        print(f"  check {check}: {value} ≤ {verdict['limit']} → {'PASS' if verdict['pass'] else 'FAIL'}")


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__, "edge.json")
    parser.add_argument("--saved-model", type=Path, help="A digits SavedModel (default: train one now).")
    parser.add_argument("--data", type=Path, help="Digits data dir (default: `tfxp data digits` into a temp dir).")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="Config override for training.")
    parser.add_argument("--threads", type=int, default=2, help="LiteRT threads (XNNPACK).")
    parser.add_argument("--samples", type=int, default=200, help="int8 representative samples.")
    parser.add_argument("--rounds", type=int, default=5, help="Interleaved latency rounds.")
    parser.add_argument("--runs", type=int, default=40, help="Timed invocations per mode per round.")
    parser.add_argument("--skip-mobilenet", action="store_true", help="Digits only (faster).")
    parser.add_argument("--workdir", type=Path, help="Keep data and models here (default: a temp dir).")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    report: dict[str, Any] = {
        "command": command_line(argv),
        "machine": cpu_info(),
        "threads": args.threads,
        "latency": f"batch 1, {args.rounds} interleaved rounds × {args.runs} runs per mode, after 5 warm-up runs",
    }
    with tempfile.TemporaryDirectory(prefix="tfxp-bench-edge-") as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        data = args.data or make_digits(workdir)
        if args.saved_model:
            digits_model, training = args.saved_model, {"saved_model": str(args.saved_model)}
        else:
            digits_model, training = train_digits(data, workdir, args.overrides)
        digits = measure_model(digits_model, data, args.samples, args.threads, args.rounds, args.runs, True)
        digits["training"] = training
        digits["checks"] = checks(digits, DIGITS_LIMITS)
        report["digits"] = digits
        print_table("digits", digits)

        if args.skip_mobilenet:
            report["mobilenet_v2"] = {"skipped": "--skip-mobilenet"}
        else:
            try:
                mobilenet_model = export_mobilenet(workdir)
            except LookupError as error:
                report["mobilenet_v2"] = {"skipped": str(error)}
            else:
                mobilenet = measure_model(
                    mobilenet_model, data, args.samples, args.threads, args.rounds, args.runs, False
                )
                mobilenet["checks"] = checks(mobilenet, MOBILENET_LIMITS)
                report["mobilenet_v2"] = mobilenet
                print_table("mobilenet_v2", mobilenet)
        if "skipped" in report["mobilenet_v2"]:
            print(f"\nmobilenet_v2: skipped ({report['mobilenet_v2']['skipped']})")

    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    all_checks = [
        verdict for section in ("digits", "mobilenet_v2") for verdict in report[section].get("checks", {}).values()
    ]
    report["all_checks_pass"] = all(verdict["pass"] for verdict in all_checks)
    path = write_report(args.out, "edge.json", report)
    print(f"\n→ {path} ({report['wall_seconds']} s); all checks pass: {report['all_checks_pass']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
