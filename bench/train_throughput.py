"""Training throughput benchmark: images/s of the Trainer's training step under different settings.

Default (the CPU comparison, digits-sized `small_resnet`): one run measures, in rotated order per round,

- `synthetic`: float32, no XLA, one in-memory batch repeated (the model's ceiling);
- `real`: the same model fed by the Trainer's input pipeline from digits TFRecords (`cache` on, the digits
  default) — target ≥ 0.9 × synthetic;
- `real_nocache`: the same, decoding every image every step;
- `xla`: synthetic with `jit_compile=True` (vs `synthetic`);
- `bfloat16`: synthetic with the `mixed_bfloat16` policy (vs `synthetic`; emulated on CPUs without AMX).

Each configuration gets its own compiled model, a persistent iterator and warm-up steps (tracing, XLA
compilation) before rounds of `--steps` timed steps; reported are medians over rounds and the ratios.

GPU mode (one configuration, e.g. on an A100/H100 host):

    .venv/bin/python bench/train_throughput.py --out bench/results \\
        --model resnet50 --synthetic --precision mixed_float16 --xla --batch 256

Anchors for that command: NVIDIA's TF ResNet-50 v1.5 (`resnet50`) reaches 2,375 img/s with AMP+XLA on one A100
40GB (909 img/s TF32+XLA); with several GPUs the strategy is MirroredStrategy and `--batch` is per replica.

Multi-worker scaling (`--workers 1 2`): for each N, one whole Trainer run on digits (or `--data DIR`) with the
same per-replica `--batch` and `--steps` timed steps, `--rounds` times: N = 1 is `run_fn` in one process without
TF_CONFIG (what `trainer.workers: 1` runs), N ≥ 2 goes through `LocalWorkers`, the launcher `trainer.workers: N`
uses locally (bench/_scaling.py). T(N) is the chief's `images_per_second` in `training_metrics.json`: global
images (`batch_size` × every replica of every worker) per second of the chief's step time, so T(N) and T(1)
count the same thing; the scaling efficiency is E(N) = T(N) / (N · T(1)). On one host the N workers share its
cores: E(N) then measures that sharing and a ring all-reduce over loopback, not N nodes with GPUs and NCCL.

Usage:
    .venv/bin/python bench/train_throughput.py --out bench/results [--rounds 3] [--steps 40]
    .venv/bin/python bench/train_throughput.py --out bench/results --workers 1 2 [--rounds 1] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from _common import bench_parser, command_line, machine, write_report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from components.trainer.options import MAX_WORKERS, Precision, TrainerOptions  # noqa: E402  (after the sys.path entry)

WARMUP_STEPS = 5
TARGETS = {"real_over_synthetic": 0.9}


def trainer_options(**changes: Any) -> TrainerOptions:
    """The `trainer` section's digits defaults with explicit float32 and no XLA, plus `changes` (validated)."""
    return TrainerOptions.model_validate({"precision": "float32", "xla": "off", **changes})


@dataclass(frozen=True)
class Setting:
    """One measured configuration.

    Attributes:
        trainer: The trainer section; read are model, image_size, channels, width, batch_size (per replica),
            precision (explicit, not `auto`) and xla (`on` or `off`).
        num_classes: Classes of the model's head.
        data: `synthetic` (one in-memory batch repeated), `real` (digits TFRecords, cached) or `real_nocache`.
    """

    trainer: TrainerOptions = field(default_factory=trainer_options)
    num_classes: int = 10
    data: str = "synthetic"

    def to_json(self) -> dict[str, Any]:
        return {"trainer": self.trainer.model_dump(mode="json"), "num_classes": self.num_classes, "data": self.data}


def build_step(setting: Setting, data_dir: Path | None, strategy: Any) -> tuple[Callable[[], None], int]:
    """A function running one training step of `setting` (persistent iterator), and the global batch."""
    import tensorflow as tf
    import tf_keras as keras

    from components.trainer.input_pipeline import InputOptions, make_dataset
    from components.trainer.models import ModelSpec, build_model

    trainer = setting.trainer
    global_batch = trainer.batch_size * strategy.num_replicas_in_sync
    keras.mixed_precision.set_global_policy(trainer.precision)
    try:
        with strategy.scope():
            model = build_model(
                trainer.model, ModelSpec(trainer.image_size, trainer.channels, setting.num_classes, trainer.width)
            )
            model.compile(
                optimizer=keras.optimizers.Adam(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(),
                jit_compile=trainer.xla == "on",
            )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    if setting.data == "synthetic":
        shape = (global_batch, trainer.image_size, trainer.image_size, trainer.channels)
        images = tf.random.stateless_uniform(shape, seed=[1, 2])
        labels = tf.random.stateless_uniform([global_batch], seed=[3, 4], maxval=setting.num_classes, dtype=tf.int64)
        dataset = tf.data.Dataset.from_tensors((images, labels)).repeat().prefetch(tf.data.AUTOTUNE)
    else:
        assert data_dir is not None
        options = InputOptions(
            image_size=trainer.image_size,
            channels=trainer.channels,
            batch_size=global_batch,
            cache=setting.data == "real",
        )
        dataset = make_dataset(str(data_dir / "train" / "*"), options)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    train_function = model.make_train_function()

    def step() -> None:
        logs = train_function(iterator)
        float(logs["loss"])  # wait for the step to finish

    return step, global_batch


def measure(settings: dict[str, Setting], data_dir: Path | None, rounds: int, steps: int) -> dict[str, list[float]]:
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    if len(tf.config.list_logical_devices("GPU")) > 1:
        strategy = tf.distribute.MirroredStrategy()
    runners = {}
    for name, setting in settings.items():
        step, global_batch = build_step(setting, data_dir, strategy)
        for _ in range(WARMUP_STEPS):
            step()
        runners[name] = (step, global_batch)
    names = list(settings)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            step, global_batch = runners[name]
            started = time.perf_counter()
            for _ in range(steps):
                step()
            rates[name].append(steps * global_batch / (time.perf_counter() - started))
    return rates


def comparison_settings(batch: int) -> dict[str, Setting]:
    base = trainer_options(batch_size=batch)
    return {
        "synthetic": Setting(base),
        "real": Setting(base, data="real"),
        "real_nocache": Setting(base, data="real_nocache"),
        "xla": Setting(trainer_options(batch_size=batch, xla="on")),
        "bfloat16": Setting(trainer_options(batch_size=batch, precision="mixed_bfloat16")),
    }


def check_workers_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, one: bool) -> None:
    """Exits with a usage error unless `--workers` (and `--data`) can run as given."""
    if args.workers is None:
        parser.error("--data is what the multi-worker run trains on: add --workers, e.g. `--workers 1 2`")
    if one:
        parser.error("--workers trains the digits trainer section: leave out --model, --synthetic, --precision, --xla")
    if 1 not in args.workers:
        parser.error("--workers must include 1: E(N) = T(N) / (N · T(1)) needs T(1) from the same run")
    bad = [count for count in args.workers if not 1 <= count <= MAX_WORKERS]
    if bad:
        parser.error(f"--workers {bad[0]}: a worker count is 1 … {MAX_WORKERS} (trainer.workers)")
    if min(args.rounds, args.steps, args.batch) < 1:
        parser.error("--rounds, --steps and --batch must be at least 1")
    if args.data is not None:
        missing = [name for name in ("train", "eval", "labels.txt") if not (args.data / name).exists()]
        if missing:
            parser.error(f"--data {args.data}: no {', '.join(missing)} there; `tfxp data digits --out DIR` writes one")


def workers_main(args: argparse.Namespace) -> None:
    """`--workers N1 N2 ...`: the multi-worker scaling run (bench/_scaling.py), its report and summary."""
    from _scaling import measure_workers, scaling_report, scaling_trainer

    counts = list(dict.fromkeys(args.workers))
    base = trainer_options(batch_size=args.batch)
    # The workers import components from this checkout, and none may join a cluster named in the shell.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.pop("TF_CONFIG", None)
    with tempfile.TemporaryDirectory(prefix="tfxp-bench-workers-") as work:
        if args.data is not None:
            data_dir, data = args.data.resolve(), str(args.data)
        else:
            from components.data.digits import write_digits

            data_dir = Path(work) / "digits"
            write_digits(data_dir)
            data = "digits (components.data.digits.write_digits, into a temp dir)"
        runs = measure_workers(counts, data_dir, base, args.steps, args.rounds, Path(work))
    report = scaling_report(runs, scaling_trainer(base, args.steps, 1), args.steps, args.rounds, data)
    path = write_report(args.out, "train_throughput.json", report)
    print(f"{'workers':>7s} {'replicas':>8s} {'img/s (global)':>14s} {'seconds':>8s} {'E(N)':>5s}")
    for count in counts:
        images, seconds = report["median_images_per_second"][str(count)], report["median_seconds"][str(count)]
        replicas, efficiency = runs[count][0]["replicas"], report["scaling_efficiency"][str(count)]
        print(f"{count:7d} {replicas:8d} {images:14.0f} {seconds:8.1f} {efficiency:5.2f}")
    print(f"E(N) = T(N) / (N · T(1)), T = global img/s (medians over {args.rounds} round(s)); {report['note']}.")
    print(f"wrote {path} (load average at the end: {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = bench_parser(__doc__.split("\n\n")[0], "train_throughput.json")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions (medians are reported)")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per configuration and round")
    parser.add_argument("--batch", type=int, default=64, help="batch size per replica")
    single = parser.add_argument_group("one configuration instead of the CPU comparison (e.g. the GPU mode)")
    single.add_argument("--model", help="registry name, e.g. resnet50 (224×224×3, 1,000 classes)")
    single.add_argument("--synthetic", action="store_true", help="in-memory batches instead of digits TFRecords")
    single.add_argument("--precision", choices=[name for name in get_args(Precision) if name != "auto"])
    single.add_argument("--xla", action="store_true", help="jit_compile=True")
    scaling = parser.add_argument_group("multi-worker scaling instead of the CPU comparison")
    scaling.add_argument("--workers", type=int, nargs="+", metavar="N", help="worker counts, 1 among them: `1 2`")
    scaling.add_argument("--data", type=Path, help="DIR with train/, eval/, labels.txt (default: digits, written)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    one = args.model is not None or args.synthetic or args.precision is not None or args.xla
    if args.workers is not None or args.data is not None:
        check_workers_arguments(parser, args, one)
        workers_main(args)
        return
    if one:
        model = args.model or "small_resnet"
        big = model != "small_resnet"
        trainer = trainer_options(
            model=model,
            image_size=224 if big else 16,
            channels=3 if big else 1,
            width=32 if model == "mobilenet_v2" else 16,
            batch_size=args.batch,
            precision=args.precision or "float32",
            xla="on" if args.xla else "off",
        )
        setting = Setting(trainer, num_classes=1000 if big else 10, data="synthetic" if args.synthetic else "real")
        settings = {"single": setting}
    else:
        settings = comparison_settings(args.batch)

    with tempfile.TemporaryDirectory(prefix="tfxp-bench-train-") as work:
        data_dir = None
        if any(setting.data != "synthetic" for setting in settings.values()):
            from components.data.digits import write_digits

            data_dir = Path(work) / "digits"
            write_digits(data_dir)
        rates = measure(settings, data_dir, args.rounds, args.steps)

    medians = {name: statistics.median(values) for name, values in rates.items()}
    ratios = {}
    if not one:
        ratios = {
            "real_over_synthetic": medians["real"] / medians["synthetic"],
            "real_nocache_over_synthetic": medians["real_nocache"] / medians["synthetic"],
            "xla_over_no_xla": medians["xla"] / medians["synthetic"],
            "bfloat16_over_float32": medians["bfloat16"] / medians["synthetic"],
        }
    report = {
        "benchmark": "train_throughput",
        "command": command_line(),
        "machine": machine(),
        "settings": {name: setting.to_json() for name, setting in settings.items()},
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "images_per_second": rates,
        "median_images_per_second": medians,
        "ratios": ratios,
        "targets": TARGETS if not one else {"anchor_a100_40gb_resnet50_amp_xla": 2375},
    }
    path = write_report(args.out, "train_throughput.json", report)
    for name, value in medians.items():
        print(f"{name:14s} {value:9.0f} img/s  (rounds: {', '.join(f'{rate:.0f}' for rate in rates[name])})")
    for name, value in ratios.items():
        target = TARGETS.get(name)
        print(f"{name:28s} {value:5.2f}" + (f"  (target ≥ {target})" if target else ""))
    print(f"wrote {path} (load average at the end: {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
