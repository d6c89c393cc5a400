"""Drift distances between clean digits spans and damaged ones: the numbers `data.drift`'s defaults come from.

Writes the digits as `--spans` seeded spans, then measures (`components.validation.drift_check.check_drift`, with
the thresholds at their highest so every distance is reported; with `--serving`, the served model's agreement):
- each clean span k ≥ 2 against the spans before it (what a clean night measures);
- the last span damaged (`components.data.span_damage`): labels remapped many-to-one (1, 2, 3 → 7), every label
  shifted class to class (c → c+1 mod 10: balanced), brightened by 0.2 and 0.1 of full scale, resized 2× and 0.5×,
  15 % of the images replaced by noise;
  each against the clean spans before it.
It prints, per case, the largest distance of each check and feature, and the time the per-span statistics took
(cold: every span read and decoded; cached: the per-span values read back from the cache; each
`clean span k` case reads spans 1..k cold, through links of their own). The served-model agreement needs a
served model trained on the clean spans before the last (`--serving`).

Usage:
    PYTHONPATH=. .venv/bin/python bench/drift_distances.py [--work /tmp/drift-bench] [--spans 4] [--serving DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = {
    "many-to-one 1,2,3->7": {"relabel": {1: 7, 2: 7, 3: 7}},
    "class->class c+1": {"relabel": {c: (c + 1) % 10 for c in range(10)}},
    "brightened +0.2": {"brighten": 0.2},
    "brightened +0.1": {"brighten": 0.1},
    "resized x2": {"scale": 2.0},
    "resized x0.5": {"scale": 0.5},
    "15 % noise images": {"noise": 0.15},
}


def main() -> None:
    from components.data.span_damage import rewrite_span
    from components.validation.drift_check import DriftRun, check_drift
    from components.validation.drift_options import DriftOptions

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/drift-bench"))
    parser.add_argument("--spans", type=int, default=4)
    parser.add_argument("--serving", default="", help="A serving base whose model was trained on spans 1..N-1 "
                        "(e.g. OUT/serving/digits of `tfxp run` on them): adds the agreement check.")  # fmt: skip
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    clean = args.work / "clean"
    tfxp = str(Path(sys.executable).with_name("tfxp"))
    for span in range(1, args.spans + 1):
        subprocess.run([tfxp, "data", "digits", "--out", str(clean), "--spans", str(args.spans), "--span", str(span)],
                       check=True, capture_output=True)  # fmt: skip
    # At their highest, so every distance is reported; agreement_drop below 1, or the check is off.
    options = DriftOptions(label_linf=1, image_js=1, skew_label_linf=1, skew_image_js=1, agreement_drop=0.999)
    patterns = {"train": "span-*/train/*", "eval": "span-*/eval/*"}

    def measure(data: Path, newest: int, label: str) -> None:
        run = DriftRun(options, str(data), patterns, "latest", str(args.work / "statistics"), args.serving)
        assert newest == max(int(p.name.split("-")[1]) for p in data.glob("span-*"))
        started = time.monotonic()
        decision = check_drift(run)
        took = time.monotonic() - started
        worst: dict[str, float] = {}
        for finding in decision.findings:
            key = f"{finding.check}:{finding.feature}"
            worst[key] = max(worst.get(key, 0.0), finding.distance)
        text = ", ".join(f"{key}={value:.3f}" for key, value in sorted(worst.items()))
        print(f"{label:<28} {took:5.1f} s (statistics {run.timings['statistics_s']:.1f} s)  {text}", flush=True)

    for newest in range(1, args.spans + 1):
        data = args.work / f"clean-1-{newest}"
        data.mkdir(parents=True)
        for span in range(1, newest + 1):
            (data / f"span-{span}").symlink_to(clean / f"span-{span}")
        measure(data, newest, f"clean span {newest}")
    measure(clean, args.spans, f"all {args.spans} spans, cold")
    measure(clean, args.spans, f"all {args.spans} spans, cached")
    last = f"span-{args.spans}"
    for name, damage in CASES.items():
        data = args.work / name.replace(" ", "_").replace(">", "").replace(",", "")
        data.mkdir(parents=True)
        for span in range(1, args.spans):
            (data / f"span-{span}").symlink_to(clean / f"span-{span}")
        rewrite_span(clean / last, data / last, **damage)  # type: ignore[arg-type]
        measure(data, args.spans, name)


if __name__ == "__main__":
    main()
