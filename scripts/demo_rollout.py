"""`make demo-rollout`: a guarded rollout on digits; a good canary is promoted, a bad one rolled back by itself.

1. `tfxp run` under `serving.rollout: canary` pushes v1: the first version of the base becomes stable.
2. Two `tfxp serve --track` processes serve the stable and the canary track, each polling its own models.config.
3. A second run (more training steps) pushes v2 as the canary; the tracks take their two phases.
4. A bounded load generator, standing in for the mesh, splits traffic by `serving.canary.traffic_percent`, and a
   real Prometheus (Debian's package) scrapes both servers; `tfxp rollout analyze --prometheus URL --apply`
   promotes v2.
5. A data delivery arrives with its labels permuted in both splits (a labelling bug): offline the new model beats
   stable on that data, so the Evaluator blesses it and it is pushed as v3; live, it disagrees with stable on
   the replayed sample, and the analysis rolls it back.
6. The decisions, with their evidence, as a table; `tfxp rollout status --json` at the end.

Without a `prometheus` binary the analysis reads the servers' /metrics and the demo says so.

Usage (from the repository root; `make demo-rollout` passes the venv's tfxp):
    python scripts/demo_rollout.py [--tfxp .venv/bin/tfxp] [--data data/digits] [--out tfxp_output_rollout]
        [--train-steps 300]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from foundation.contract import IMAGE_KEY, LABEL_KEY
from foundation.data.tfrecords import iter_examples, make_example, write_shards
from serving.rest_client import RestClient
from serving.rollout.local_prometheus import LocalPrometheus, prometheus_binary
from serving.rollout.state import describe_rollout

PORTS = {"stable": (8700, 8701), "canary": (8710, 8711)}
CANARY = ["serving.rollout=canary", "serving.version_policy=specific", "serving.config_poll_seconds=1"]
URLS = [f"serving.canary.{track}_url=http://127.0.0.1:{rest}" for track, (_, rest) in PORTS.items()]
# Two trainings of one recipe agree on most digits, not all: the demo asks 0.9 of the replay, not 0.95.
ANALYSIS = ["serving.canary.min_requests=100", "serving.canary.replay_samples=200", "serving.canary.min_agreement=0.9"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tfxp", default=str(Path(sys.executable).with_name("tfxp")), help="The tfxp command.")
    parser.add_argument(
        "--data", type=Path, default=Path("data/digits"), help="The digits data set (written if missing)."
    )
    parser.add_argument("--out", type=Path, default=Path("tfxp_output_rollout"), help="Output dir (rewritten).")
    parser.add_argument("--train-steps", type=int, default=300, help="trainer.train_steps of the first run.")
    return parser.parse_args(argv)


def sets(overrides: list[str]) -> list[str]:
    return [part for override in overrides for part in ("--set", override)]


def tfxp(args: argparse.Namespace, *command: str, capture: bool = False) -> str:
    line = [args.tfxp, *command]
    print("$ " + " ".join(line), flush=True)
    result = subprocess.run(line, check=False, capture_output=capture, text=True)
    if result.returncode != 0:
        sys.exit(f"demo-rollout: `{' '.join(line)}` exited {result.returncode}\n{result.stderr or ''}")
    return result.stdout or ""


def pipeline_run(args: argparse.Namespace, data: Path, steps: int) -> dict[str, object]:
    tfxp(
        args,
        "run",
        "--config",
        "configs/default.yaml",
        "--output",
        str(args.out),
        *sets([f"data.path={data}", f"trainer.train_steps={steps}", "edge.enabled=false", *CANARY, *URLS]),
    )
    summary: dict[str, Any] = json.loads((args.out / "run-summary.json").read_text())
    pushed = Path(str(summary.get("pushed_model_dir") or "-")).name
    print(f"run: {summary['decision']} version {pushed}; rollout: {describe_rollout(summary['rollout'])}", flush=True)
    return summary


def permuted_copy(source: Path, target: Path) -> Path:
    """`source` with every label moved to the next class, in both splits: a labelling bug no offline check on
    that data sees."""
    shutil.rmtree(target, ignore_errors=True)
    labels = (source / "labels.txt").read_text().split()
    for split in ("train", "eval"):
        records = []
        for example in iter_examples(sorted((source / split).glob("*.tfrecord*"))):
            features = example.features.feature
            label = (int(features[LABEL_KEY].int64_list.value[0]) + 1) % len(labels)  # the digits' labels are 0-based
            records.append(make_example(features[IMAGE_KEY].bytes_list.value[0], label).SerializeToString())
        write_shards(target / split, records, 2, lambda record: record)
    shutil.copy(source / "labels.txt", target / "labels.txt")
    return target


def traffic(images: list[bytes], requests: int, canary_percent: int) -> None:
    """`requests` single-image predictions, each sent to the canary with `canary_percent` chance (the mesh)."""
    clients = {track: RestClient(f"http://127.0.0.1:{rest}", "digits") for track, (_, rest) in PORTS.items()}
    chooser = random.Random(0)
    for index in range(requests):
        track = "canary" if chooser.random() * 100 < canary_percent else "stable"
        clients[track].predict_images([images[index % len(images)]])
    for client in clients.values():
        client.close()


def settle(args: argparse.Namespace, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (
            "waiting"
            not in (
                text := tfxp(
                    args, "rollout", "sync", *sets([*CANARY, *URLS, f"pipeline.output={args.out}"]), capture=True
                )
            )
            and "loading" not in text
        ):
            return
        time.sleep(1.5)
    sys.exit("demo-rollout: the track servers did not load the new version in time")


def main() -> None:
    args = parse_args()
    if not (args.data / "labels.txt").exists():
        tfxp(args, "data", "digits", "--out", str(args.data))
    shutil.rmtree(args.out, ignore_errors=True)
    config = [*CANARY, *URLS, *ANALYSIS, f"pipeline.output={args.out}"]
    pipeline_run(args, args.data, args.train_steps)
    servers = [
        subprocess.Popen(
            [args.tfxp, "serve", "--track", track, "--grpc-port", str(grpc), "--rest-port", str(rest), *sets(config)]
        )
        for track, (grpc, rest) in PORTS.items()
    ]
    images = [
        example.features.feature["image/encoded"].bytes_list.value[0]
        for example in iter_examples(sorted((args.data / "eval").glob("*.tfrecord*")))
    ][:400]
    prometheus_used = prometheus_binary() is not None
    try:
        time.sleep(8)
        pipeline_run(args, args.data, args.train_steps + 100)  # v2: the canary
        settle(args)
        with _prometheus(args) as prometheus:
            traffic(images, 1500, 30)
            time.sleep(3)
            analyze = ["rollout", "analyze", "--replay", str(args.data), "--apply", *sets(config)]
            tfxp(args, *analyze, *(["--prometheus", prometheus] if prometheus else []))
            settle(args)
            pipeline_run(args, permuted_copy(args.data, args.out / "delivery-permuted"), args.train_steps)  # v3
            settle(args)
            traffic(images, 1500, 30)
            time.sleep(3)
            tfxp(args, *analyze, *(["--prometheus", prometheus] if prometheus else []))
            settle(args)
    finally:
        for server in servers:
            server.terminate()
            server.wait(30)
    print(
        "evidence: "
        + (
            "a real Prometheus (PromQL over its HTTP API)"
            if prometheus_used
            else "the servers' /metrics (no prometheus binary: apt-get install prometheus)"
        )
    )
    tfxp(args, "rollout", "status", "--last", "10", *sets(config))
    print(tfxp(args, "rollout", "status", "--json", "--last", "0", *sets(config), capture=True))


class _prometheus:  # noqa: N801  (a context manager used like a function)
    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.process = args, None

    def __enter__(self) -> str | None:
        if prometheus_binary() is None:
            print("demo-rollout: no prometheus binary; the analysis reads the servers' /metrics", flush=True)
            return None
        hosts = {track: f"127.0.0.1:{rest}" for track, (_, rest) in PORTS.items()}
        self.process = LocalPrometheus(hosts, self.args.out / "prometheus").__enter__()
        self.process.wait_for_scrapes()
        return self.process.url

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            self.process.close()


if __name__ == "__main__":
    main()
