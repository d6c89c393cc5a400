"""`make demo-continuous`: continuous training on digits that arrive in spans, one pipeline run per arrival.

Writes the digits as four seeded spans, one at a time: three clean ones, then a fourth whose train labels are
partly wrong (a labelling bug). After each arrival it runs `tfxp run` on the span directory, and at the end once
more without new data. Every run compares its model with the version being served (`evaluator.baseline: served`)
and pushes only a model that is no worse; the EdgeExporter makes a device model of each pushed one (`edge.*`,
as in `make demo`), and a run that pushes nothing publishes no new edge version (a model already converted is
reused: the edge version identity is what went into it). The corrupted span never reaches the Trainer: the drift checks
(`data.drift`) run the served model on a sample of it, find it agrees far less with the span's labels than with
the earlier spans', and stop the run at the ExampleValidator; the run without new data stops on it again (a
refused span stays refused until it is fixed, removed or accepted with `data.drift.accept`). Then the operator
removes span 4 and a span 5 arrives whose images are brighter (a camera's exposure changed: span 3's images, 0.2 of
full scale brighter): the image-property check (brightness, Jensen-Shannon) stops that run before the Trainer too.

It ends with a table read from each run's `run-summary.json`: run, spans seen, accuracy, the baseline (the served
version and its accuracy on the same eval split), the decision, the version served afterwards and the edge
version; then each run's reason in words, and the count of served and edge versions (one edge version per
served version).

Usage (from the repository root; `make demo-continuous` passes the venv's tfxp):
    python scripts/demo_continuous.py [--tfxp .venv/bin/tfxp] [--data data/digits-stream]
        [--out tfxp_output_continuous] [--spans-policy all] [--corrupt-labels 0.6] [--train-steps 300]
        [--edge-eval-samples 200]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SPANS = 4
CORRUPT_SPAN = 4
# The last arrival: span 3's images, brighter by this share of full scale (`components.data.span_damage`).
BRIGHT_SPAN = 5
BRIGHTEN = 0.2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tfxp", default=str(Path(sys.executable).with_name("tfxp")), help="The tfxp command.")
    parser.add_argument("--data", type=Path, default=Path("data/digits-stream"), help="Span root (rewritten).")
    parser.add_argument("--out", type=Path, default=Path("tfxp_output_continuous"), help="Output dir (rewritten).")
    parser.add_argument("--config", default="configs/default.yaml", help="Base config of every run.")
    parser.add_argument("--spans-policy", default="all", help="data.spans of every run: all, latest or N.")
    parser.add_argument("--corrupt-labels", type=float, default=0.6, help="Share of span 4's train labels made wrong.")
    parser.add_argument("--train-steps", type=int, default=300, help="trainer.train_steps of every run.")
    parser.add_argument(
        "--edge-eval-samples", type=int, default=200, help="edge.eval_samples of every run (0 = the whole eval split)."
    )
    return parser.parse_args(argv)


DRIFT_STOP = "stopped by the drift check"


def run(command: list[str], summary: Path | None = None) -> None:
    """Runs a command, showing its output; stops the demo when it fails (a drift stop recorded in `summary`,
    the run summary the command writes, is one of the demo's outcomes, not a failure)."""
    print("$ " + " ".join(command), flush=True)
    if summary is not None:
        summary.unlink(missing_ok=True)
    result = subprocess.run(command, check=False)
    stopped = summary is not None and summary.exists() and json.loads(summary.read_text()).get("decision") == DRIFT_STOP
    if result.returncode != 0 and not stopped:
        sys.exit(f"demo-continuous: `{' '.join(command)}` exited {result.returncode}")


def write_span(args: argparse.Namespace, span: int) -> None:
    command = [args.tfxp, "data", "digits", "--out", str(args.data), "--spans", str(SPANS), "--span", str(span)]
    if span == CORRUPT_SPAN:
        command += ["--corrupt-labels", str(args.corrupt_labels)]
    run(command)


def write_bright_span(args: argparse.Namespace) -> None:
    """Removes the refused span and writes span 5: span 3's images, brighter (run in the venv: it needs TF)."""
    shutil.rmtree(args.data / f"span-{CORRUPT_SPAN}")
    source, target = args.data / "span-3", args.data / f"span-{BRIGHT_SPAN}"
    code = (
        "import sys; from pathlib import Path; from components.data.span_damage import rewrite_span; "
        "rewrite_span(Path(sys.argv[1]), Path(sys.argv[2]), brighten=float(sys.argv[3]))"
    )
    run([sys.executable, "-c", code, str(source), str(target), str(BRIGHTEN)])


def run_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    """One `tfxp run` on the span root; returns its run summary and wall time."""
    overrides = [
        f"data.path={args.data}",
        f"data.spans={args.spans_policy}",
        f"trainer.train_steps={args.train_steps}",
        # Each pushed model gets its device model; a small gate sample keeps the EdgeExporter to seconds.
        f"edge.eval_samples={args.edge_eval_samples}",
    ]
    command = [args.tfxp, "run", "--config", args.config, "--output", str(args.out)]
    for override in overrides:
        command += ["--set", override]
    started = time.monotonic()
    run(command, args.out / "run-summary.json")
    summary = json.loads((args.out / "run-summary.json").read_text())
    summary["demo_seconds"] = time.monotonic() - started
    kept = args.out / "demo-runs" / f"run-{len(list((args.out / 'demo-runs').glob('run-*.json'))) + 1}.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps(summary, indent=2) + "\n")  # each run's summary, for a later look
    return summary


def row(number: int, arrived: str, summary: dict[str, Any], served_before: str = "-") -> list[str]:
    """One table row: run, what arrived, spans seen, accuracy, baseline, decision, served version, edge version
    and its status, seconds.

    A run that failed records no served version; a drift stop leaves `served_before` served."""
    spans = (summary.get("data") or {}).get("spans_seen")
    accuracy = summary["metrics"].get("accuracy")
    baseline = summary.get("baseline") or {}
    if summary.get("decision") == DRIFT_STOP:
        compared = "not trained"
    elif baseline.get("version"):
        compared = f"{baseline['version']} ({_number(baseline.get('accuracy'))})"
    else:
        compared = "none served yet" if baseline.get("mode", "served") == "served" else "not compared"
    return [
        str(number),
        arrived,
        ",".join(str(span) for span in spans) if spans else "-",
        _number(accuracy),
        compared,
        summary.get("decision") or summary["status"],
        summary.get("served_version") or (served_before if summary.get("decision") == DRIFT_STOP else "-"),
        _edge(summary),
        f"{summary['demo_seconds']:.0f}",
    ]


def _edge(summary: dict[str, Any]) -> str:
    """The edge version after the run and what the EdgeExporter did (`pushed`, `already_published`, ...)."""
    edge = summary.get("edge") or {}
    if not edge:
        return "not run"
    return f"{edge.get('version') or '-'} ({edge.get('status')})"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_table(rows: list[list[str]], summaries: list[dict[str, Any]]) -> None:
    headers = ["run", "arrived", "spans seen", "accuracy", "baseline (accuracy)", "decision", "served", "edge", "s"]
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    line = "  ".join("{:<" + str(width) + "}" for width in widths)
    print()
    print(line.format(*headers))
    print(line.format(*("-" * width for width in widths)))
    for cells in rows:
        print(line.format(*cells))
    print()
    for number, summary in enumerate(summaries, start=1):
        reason = summary.get("blessing_reason") or summary.get("error", "")
        print(f"run {number}: {reason.splitlines()[0] if summary.get('decision') == DRIFT_STOP else reason}")
        if summary.get("decision") == DRIFT_STOP:
            print("       " + "\n       ".join(line.strip() for line in reason.splitlines()[1:]))


def print_versions(out: Path) -> None:
    """The served and the edge versions the runs left: one edge version per served version (a run that pushed
    nothing published no device model either)."""
    served = sorted(p.name for p in (out / "serving" / "digits").glob("*") if p.name.isdigit())
    edge = sorted(p.name for p in (out / "edge" / "digits").glob("*") if p.name.isdigit())
    print(f"\nserved versions: {len(served)} ({', '.join(served) or 'none'})")
    print(f"edge versions:   {len(edge)} ({', '.join(edge) or 'none'})")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    for path in (args.data, args.out):
        shutil.rmtree(path, ignore_errors=True)
    started = time.monotonic()
    rows, summaries = [], []
    arrivals = [(span, f"span {span}" + (" (labels partly wrong)" if span == CORRUPT_SPAN else "")) for span in
                range(1, SPANS + 1)]  # fmt: skip
    bright = f"span 4 removed, span {BRIGHT_SPAN} (brighter images)"
    for span, arrived in [*arrivals, (None, "nothing new"), (BRIGHT_SPAN, bright)]:
        print(f"\n== {arrived}", flush=True)
        if span == BRIGHT_SPAN:
            write_bright_span(args)
        elif span is not None:
            write_span(args, span)
        summary = run_pipeline(args)
        summaries.append(summary)
        rows.append(row(len(rows) + 1, arrived, summary, rows[-1][6] if rows else "-"))
    print_table(rows, summaries)
    print_versions(args.out)
    print(f"\ndemo-continuous: {len(rows)} runs in {time.monotonic() - started:.0f} s; summaries under {args.out}")


if __name__ == "__main__":
    main()
