"""Recipe benchmark: the ImageNet recipes scaled down to digits on CPU, against the setting they replaced.

Each run trains `small_resnet` on the embedded digits (16×16, batch 64, one CPU device, the same steps and seed)
with the Trainer's own phases, and records eval accuracy and loss, train accuracy, the fit time and whether the
Trainer's diagnosis calls the model broken. Scaling down keeps what carries over between batch sizes: the peak
rate per image (the linear scaling rule) and the warmup as a fraction of the run.

- `old_adam_scaled`: what both A100 configs compiled before the recipe was configuration: Adam with Goyal's SGD
  rate, 0.1 per 256 images (at 64: 0.025), warmup 5/90 of the run, cosine.
- `old_adam_6.4`: the same at the multinode config's literal peak, 6.4 (issue 32's experiment).
  Both are refused by the config check now (`recipe.recipe_problems`), so the bench compiles them without it.
- `nvidia_scaled`: configs/imagenet_a100.yaml's recipe, every option on: SGD momentum 0.875, weight decay
  3.05e-5 (not on BatchNorm nor biases), 0.256 per 256 (at 64: 0.064), cosine, 8/90 warmup, label smoothing 0.1,
  random-resized crop 0.08–1 + flip, central eval crop 0.875.
- `nvidia_scaled_no_crops`: the same without the crops, flip and eval crop (they suit photos, not 16-px digits).
- `mlperf_scaled`: configs/imagenet_a100_multinode.yaml's recipe: LARS (η 0.001, momentum 0.9, weight decay
  2e-4), 25 at 16,384 (at 64: 0.098), polynomial power 2 to 1e-4, 5/42 warmup, label smoothing 0.1, no crops.
- `digits_default`: configs/default.yaml's recipe (momentum SGD, 0.1 per 64, 10 % warmup, cosine).

Usage:
    .venv/bin/python bench/recipe.py --out bench/results [--steps 300]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import bench_parser, command_line, machine, write_report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REPORT = "recipe.json"
BATCH = 64
NVIDIA: dict[str, Any] = {
    "optimizer": {"name": "sgd", "momentum": 0.875, "weight_decay": 3.0517578125e-05},
    "schedule": {"name": "cosine", "learning_rate": 0.256, "base_batch_size": 256, "warmup_fraction": 8 / 90},
    "label_smoothing": 0.1,
}
MLPERF: dict[str, Any] = {
    "optimizer": {"name": "lars", "momentum": 0.9, "lars_eta": 0.001, "weight_decay": 2e-4},
    "schedule": {
        **{"name": "polynomial", "power": 2.0, "end_learning_rate": 1e-4},
        **{"learning_rate": 25.0, "base_batch_size": 16384, "warmup_fraction": 5 / 42},
    },
    "label_smoothing": 0.1,
}
OLD_ADAM: dict[str, Any] = {
    "optimizer": {"name": "adam"},
    "schedule": {"name": "cosine", "learning_rate": 0.1, "base_batch_size": 256, "warmup_fraction": 5 / 90},
}
RUNS: dict[str, dict[str, Any]] = {
    "old_adam_scaled": OLD_ADAM,
    "old_adam_6.4": {**OLD_ADAM, "schedule": {**OLD_ADAM["schedule"], "learning_rate": 6.4, "base_batch_size": 64}},
    "nvidia_scaled": {**NVIDIA, "augment": ["crop", "flip"], "eval_crop": 0.875},
    "nvidia_scaled_no_crops": NVIDIA,
    "mlperf_scaled": MLPERF,
    "digits_default": {},
}


def train(name: str, recipe: dict[str, Any], data: Path, workdir: Path, steps: int) -> dict[str, Any]:
    """One training of the Trainer's phases; the check is skipped only for the old settings it refuses."""
    import tf_keras as keras

    from components.trainer import phases
    from components.trainer.options import RunOptions
    from components.trainer.recipe import RecipeError, check_recipe
    from components.trainer.training import TrainerPaths, train_and_export

    trainer: dict[str, Any] = {"train_steps": steps, "steps_per_epoch": steps // 3, "batch_size": BATCH}
    trainer.update(image_size=16, channels=1, width=16, seed=42, precision="float32", xla="off", strategy="default")
    trainer.update(recipe)
    run = RunOptions.model_validate({"trainer": trainer, "labels_path": str(data / "labels.txt")})
    refused = ""
    try:
        check_recipe(run.trainer, BATCH)
    except RecipeError as error:
        refused = str(error)
    keras.backend.clear_session()
    out = workdir / name
    paths = TrainerPaths([str(data / "train/*")], [str(data / "eval/*")], str(out / "model"), str(out / "run"))
    original = phases.check_recipe
    if refused:
        phases.check_recipe = lambda trainer, batch: None  # type: ignore[assignment]  # measure what it refuses
    started = time.perf_counter()
    try:
        metrics = train_and_export(run, paths)
    finally:
        phases.check_recipe = original
    return {
        "refused_by_the_check": refused,
        "recipe": metrics["recipe"]["description"],
        "eval_accuracy": metrics["final_accuracy"],
        "eval_loss": metrics["final_loss"],
        "train_accuracy": metrics["final_train_accuracy"],
        "eval_top_predicted_share": metrics["eval_top_predicted_share"],
        "broken": metrics["diagnosis"]["broken"],
        "fit_seconds": metrics["fit_seconds"],
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = bench_parser(__doc__ or "", REPORT)
    parser.add_argument("--steps", type=int, default=300, help="Training steps of every run (default 300).")
    parser.add_argument("--data", type=Path, help="Digits data dir (default: written into a temp dir).")
    parser.add_argument("--only", nargs="*", choices=sorted(RUNS), help="Only these runs.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfxp-bench-recipe-") as scratch:
        workdir = Path(scratch)
        data = args.data
        if data is None:
            from components.data.digits import write_digits

            data = workdir / "digits"
            write_digits(data)
        runs = {name: train(name, RUNS[name], data, workdir, args.steps) for name in (args.only or RUNS)}
    report = {"command": command_line(), "machine": machine(), "steps": args.steps, "batch": BATCH, "runs": runs}
    path = write_report(args.out, REPORT, report)
    print(f"{'run':<24} {'eval acc':>8} {'eval loss':>9} {'train acc':>9} {'top share':>9} {'broken':>6} {'fit s':>6}")
    for name, run in runs.items():
        print(
            f"{name:<24} {run['eval_accuracy']:8.3f} {run['eval_loss']:9.3f} {run['train_accuracy']:9.3f} "
            f"{run['eval_top_predicted_share']:9.2f} {run['broken']!s:>6} {run['fit_seconds']:6.1f}"
            + ("  (refused by the config check)" if run["refused_by_the_check"] else "")
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
