"""MediaPipe's accuracy on frames it resizes itself, for digits models trained with and without scale augmentation.

For each (train steps, augmentation) it trains the digits model as `configs/default.yaml` does
(`components.trainer.training.train_and_export`, only `trainer.train_steps` and `trainer.augment` changed), converts
it to int8 and gates it (`edge.export.export_edge_model`, MediaPipe check on), and records the SavedModel's
accuracy, LiteRT's, and MediaPipe's on the eval images at the model's size, at their own size (8×8) and at
`edge.app_frame_size` (240×240), and whether the device model would be pushed. Needs `.venv-mediapipe`.

Usage:
    .venv/bin/python bench/edge_app_sizes.py --out bench/results [--steps 60 150 300] [--work /tmp/edge-app-sizes]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import bench_parser, command_line, machine, write_report

ROOT = Path(__file__).resolve().parents[1]
# `python bench/edge_app_sizes.py` puts bench/ first on sys.path, where bench/edge.py would shadow `edge`.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
REPORT = "edge_app_sizes.json"


def measure(data: Path, work: Path, steps: int, augment: str) -> dict[str, Any]:
    """Trains one model and gates its int8 device model; the accuracies at every frame size."""
    from components.trainer.options import RunOptions
    from components.trainer.training import TrainerPaths, train_and_export
    from edge.export import export_edge_model
    from edge.options import EdgeOptions
    from pipeline.config import load_config

    overrides = [f"trainer.train_steps={steps}", f"trainer.augment=[{augment}]"]
    config = load_config(ROOT / "configs" / "default.yaml", overrides)
    run = RunOptions.model_validate({"trainer": config.trainer.model_dump(), "labels_path": str(data / "labels.txt")})
    out = work / f"{augment or 'none'}-{steps}"
    paths = TrainerPaths([str(data / "train/*")], [str(data / "eval/*")], str(out / "serving"), str(out / "run"))
    started = time.monotonic()
    train_and_export(run, paths)
    train_s = time.monotonic() - started
    export = export_edge_model(out / "serving", str(data), EdgeOptions(mode="int8"), benchmark_runs=5)
    app, accuracy = export.metadata["app_client"], export.metadata["accuracy"]
    return {
        "train_steps": steps,
        "augment": augment or "none",
        "train_seconds": round(train_s, 1),
        "saved_model": accuracy["saved_model"],
        "tflite": accuracy["tflite"],
        "mediapipe_model_size": app["accuracy"],
        "mediapipe_own_size": app["sizes"]["own"]["accuracy"],
        "mediapipe_camera_size": app["sizes"]["camera"]["accuracy"],
        "camera_size": app["sizes"]["camera"]["frame_size"],
        "pushed": export.gate.blessed,
    }


def main() -> None:
    from components.data.digits import write_digits

    parser = bench_parser(__doc__ or "", REPORT)
    parser.add_argument("--steps", type=int, nargs="+", default=[60, 150, 300])
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="edge-app-sizes-"))
    data = work / "data"
    if not data.exists():
        write_digits(data)
    rows = [measure(data, work, steps, augment) for steps in args.steps for augment in ("", "scale")]
    for row in rows:
        print(
            f"{row['train_steps']:>4} steps, augment {row['augment']:<5}: SavedModel {row['saved_model']:.4f}, "
            f"MediaPipe own size {row['mediapipe_own_size']:.4f}, {row['camera_size']} "
            f"{row['mediapipe_camera_size']:.4f}, pushed {row['pushed']}"
        )
    report = {"command": command_line(), "machine": machine(), "rows": rows}
    print(write_report(args.out, REPORT, report))


if __name__ == "__main__":
    main()
