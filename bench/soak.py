"""Serving soak: minutes of mixed gRPC and REST load on `tfxp serve` while its model base changes under it.

The server runs as `tfxp serve` in a subprocess over a model base that this script changes, phase by phase:
- steady: nothing changes;
- new versions: a version is published every `--publish-every` seconds, as the Pusher does (copied into a hidden
  staging dir `.staging-N`, then renamed to `N`);
- half-written: a numeric dir `N` appears without `SAVED_MODEL_FILE` and stays incomplete for most of the phase
  (a copy in progress), then gets it;
- rollback: the newest version is deleted; the server must go back to the one before;
- stalled clients: `--stalled` extra REST connections send half a request line (a fifth of them trickle a
  header byte every half second) and a few gRPC ones half the HTTP/2 preface; each one the server closes is
  replaced at once, so the server has to keep timing them out (`serving.request_timeout_seconds` is set to
  `--stall-timeout`);
- bomb images: one extra client sends decompression bombs (a real 97 KB PNG of 10000 x 10000, PNG/JPEG/GIF/
  BMP/WebP headers declaring 9000 x 8000, a bomb within a batch of good images, too many pixels in total),
  progressive-JPEG bombs (issue 35: 20,000 repeated scans of 5900 x 5900 in 1.3 MB, 400 scans of 64 x 64 alone
  and within a batch, 8 images each at their scan limit), PNGs whose zlib stream outgrows their rows (16 x 16
  carrying 2 GiB of zeros in 2 MB, 64 MiB within a batch, 4000 x 4000 carrying 1 GiB within the model's bound)
  and truncated PNG/JPEG over gRPC and REST; every one must be refused (400 / INVALID_ARGUMENT).
Phases cycle in that order. Throughout, `--concurrency` closed-loop clients per transport (the engine of
`tfxp loadtest`) send single-image requests over gRPC and REST at once.

Reported per phase and in total: requests, errors (must be 0), p50/p99 latency per transport, the versions
that answered (gRPC), the server's RSS and open file descriptors, and for the hostile phases what the hostile
clients got (`hostile`: connections closed by the server, bombs refused, unexpected answers, which must be 0);
RSS at start and end; and any half-written version that never
answered once complete. The exit status is 1 when any request failed.

Usage:
    .venv/bin/python bench/soak.py --out bench/results [--seconds 180] [--phase-seconds 10] [--concurrency 4]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import bench_parser, command_line, write_report

if TYPE_CHECKING:
    from serving.loadtest import Transport

ROOT = Path(__file__).resolve().parents[1]
# `python bench/soak.py` puts bench/ first on sys.path, where bench/edge.py would shadow the `edge` package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != ROOT / "bench"]
# The bombs are the reliability tests' own (tests/support/image_bombs.py; tests/ until the tests mirrored the
# packages, when the bomb phase silently sent nothing: a hostile client that fails is now a failure).
sys.path.append(str(ROOT / "tests" / "support"))

from foundation.contract import SAVED_MODEL_FILE  # noqa: E402  (after the sys.path entry)
from foundation.publish import version_number  # noqa: E402
from foundation.redirects import guard_session  # noqa: E402

MODEL = "soak"
PHASES = ("steady", "new versions", "half-written", "rollback", "stalled clients", "bomb images")
HOSTILE = ("stalled clients", "bomb images")
SERVER_ENTRY = "import sys; sys.argv[0] = 'tfxp'; from pipeline.cli import main; main()"


def export_source(workdir: Path) -> Path:
    """The digits model of configs/default.yaml (untrained: serving cost only), exported as the Trainer does."""
    from components.trainer.export import export_saved_model
    from components.trainer.models import ModelSpec, build_model
    from foundation.preprocessing_spec import PreprocessingSpec

    source = workdir / "source"
    model = build_model("small_resnet", ModelSpec(image_size=16, channels=1, num_classes=10, width=16))
    export_saved_model(model, str(source), PreprocessingSpec(16, 1), [str(digit) for digit in range(10)])
    return source


def digit_pngs(count: int = 32) -> list[bytes]:
    """scikit-learn's digits scaled to 16×16 uint8, as PNG."""
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    pixels = (load_digits().images[:count] * (255.0 / 16.0)).astype(np.uint8)[..., None]
    resized = tf.image.resize(pixels, [16, 16], method="nearest").numpy().astype(np.uint8)
    return [tf.io.encode_png(image).numpy() for image in resized]


class ModelBase:
    """The served model base path and the changes the phases make to it."""

    def __init__(self, base: Path, source: Path) -> None:
        self.base = base
        self.source = source
        self.next_version = 1
        base.mkdir(parents=True)
        (base / ".staging-leftover").mkdir()  # a hidden dir the server must ignore for the whole soak
        shutil.copytree(source, base / ".staging-leftover" / "copy")

    def versions(self) -> list[int]:
        numbers = (version_number(path.name) for path in self.base.iterdir())
        return sorted(number for number in numbers if number is not None)

    def publish(self) -> int:
        """Copies the model into a hidden staging dir, then renames it to the next version (atomic)."""
        version = self.next_version
        self.next_version += 1
        staging = self.base / f".staging-{version}"
        shutil.copytree(self.source, staging)
        os.rename(staging, self.base / str(version))
        return version

    def half_written(self, incomplete_seconds: float, stop: threading.Event) -> int:
        """A version dir without `SAVED_MODEL_FILE` for `incomplete_seconds`, then complete."""
        version = self.next_version
        self.next_version += 1
        target = self.base / str(version)
        shutil.copytree(self.source, target, ignore=shutil.ignore_patterns(SAVED_MODEL_FILE))
        stop.wait(incomplete_seconds)
        shutil.copy2(self.source / SAVED_MODEL_FILE, target / SAVED_MODEL_FILE)
        return version

    def rollback(self) -> int | None:
        """Deletes the newest version (the server goes back to the previous one); keeps at least one."""
        versions = self.versions()
        if len(versions) < 2:
            return None
        shutil.rmtree(self.base / str(versions[-1]))
        return versions[-1]


def rss_mb(pid: int) -> float:
    """The process's resident set size in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    """How many file descriptors the process has open (Linux)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def stalled_clients(rest_url: str, grpc_target: str, count: int, stop: threading.Event) -> dict[str, int]:
    """Keeps `count` REST connections (and count // 10 gRPC ones) stalled mid-request until `stop`."""
    import select
    import socket
    import urllib.parse

    rest = urllib.parse.urlsplit(rest_url)
    targets = [(rest.hostname or "127.0.0.1", int(rest.port or 80))] * count + [tuple(grpc_target.rsplit(":", 1))] * (
        count // 10
    )
    partial = {"rest": b"POST /v1/models/soak:pre", "grpc": b"PRI * HTTP/2.0\r\n"}
    stats = {"opened": 0, "closed_by_server": 0, "answered_408": 0, "answered_503": 0}
    slots: list[tuple[socket.socket, bool] | None] = [None] * len(targets)
    while not stop.wait(0.5):
        for index, (host, port) in enumerate(targets):
            if slots[index] is None:
                sock = socket.socket()
                sock.setblocking(False)
                sock.connect_ex((host, int(port)))
                slots[index] = (sock, False)
                stats["opened"] += 1
        for index, slot in enumerate(slots):
            assert slot is not None
            sock, started = slot
            kind = "rest" if index < count else "grpc"
            try:
                if not started:
                    sock.send(partial[kind])
                    slots[index] = (sock, True)
                elif kind == "rest" and index % 5 == 0:
                    sock.send(b"x")  # trickling a header byte
                if select.select([sock], [], [], 0)[0]:
                    data = sock.recv(4096)
                    stats["answered_408"] += data.startswith(b"HTTP/1.1 408")
                    stats["answered_503"] += data.startswith(b"HTTP/1.1 503")
                    raise ConnectionResetError
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                stats["closed_by_server"] += 1
                sock.close()
                slots[index] = None
    for slot in slots:
        if slot is not None:
            slot[0].close()
    return stats


def bomb_client(rest_url: str, grpc_target: str, good: bytes, stop: threading.Event) -> dict[str, Any]:
    """Sends decompression bombs and truncated images until `stop`; every answer must be a refusal."""
    import base64

    import grpc
    import requests
    from image_bombs import BOMB_FORMATS, header_bomb, idat_bomb, png_bomb, scan_bomb
    from tensorflow.core.framework import tensor_pb2, types_pb2
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    batches = [[png_bomb()], *([header_bomb(name, 9000, 8000)] for name in BOMB_FORMATS)]
    batches += [[good, header_bomb("JPEG", 9000, 8000), good], [header_bomb("PNG", 6000, 6000)] * 3]
    batches += [[good[: len(good) // 2]], [header_bomb("JPEG", 16, 16)[:200]]]
    batches += [[scan_bomb(20000, 5900)], [scan_bomb(400)], [good, scan_bomb(400), good], [scan_bomb(100, 1800)] * 8]
    batches += [[idat_bomb()], [good, idat_bomb(64), good], [idat_bomb(1024, 4000)]]
    stats: dict[str, Any] = {"sent": 0, "refused": 0, "slowest_refusal_s": 0.0, "unexpected": []}
    session = guard_session(requests.Session())
    with grpc.insecure_channel(grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        while not stop.is_set():
            batch, started = batches[stats["sent"] % len(batches)], time.perf_counter()
            if stats["sent"] % 2:
                request = predict_pb2.PredictRequest()
                request.model_spec.name = MODEL
                tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=batch)
                tensor.tensor_shape.dim.add(size=len(batch))
                request.inputs["image_bytes"].CopyFrom(tensor)
                try:
                    stub.Predict(request, timeout=30)
                    outcome = "OK"
                except grpc.RpcError as error:
                    outcome = error.code().name
                refused = outcome == "INVALID_ARGUMENT"
            else:
                body = {"instances": [{"b64": base64.b64encode(image).decode()} for image in batch]}
                response = session.post(f"{rest_url}/v1/models/{MODEL}:predict", json=body, timeout=30)
                outcome, refused = str(response.status_code), response.status_code == 400
            stats["sent"] += 1
            stats["refused"] += refused
            took = round(time.perf_counter() - started, 3)
            stats["slowest_refusal_s"] = max(stats["slowest_refusal_s"], took if refused else 0.0)
            if not refused:
                stats["unexpected"].append(outcome)
    session.close()
    return stats


def start_server(
    base: Path, workdir: Path, batching: bool, stall_timeout: float
) -> tuple[subprocess.Popen[str], str, str]:
    import portpicker

    grpc_port, rest_port = portpicker.pick_unused_port(), portpicker.pick_unused_port()
    command = [
        sys.executable, "-c", SERVER_ENTRY, "serve", "--model-base", str(base), "--model-name", MODEL,
        "--grpc-port", str(grpc_port), "--rest-port", str(rest_port), "--batching" if batching else "--no-batching",
        "--set", "serving.poll_interval_seconds=0.5", "--set", "serving.intra_op_threads=1",
        "--set", "serving.inter_op_threads=1", "--set", f"serving.request_timeout_seconds={stall_timeout}",
    ]  # fmt: skip
    log = (workdir / "server.out").open("w")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(workdir)}
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    return server, f"127.0.0.1:{grpc_port}", f"http://127.0.0.1:{rest_port}"


def wait_until_serving(grpc_target: str, image: bytes, server: subprocess.Popen[str]) -> None:
    from serving.base_client import RetryPolicy
    from serving.grpc_client import GrpcClient

    retry = RetryPolicy(max_attempts=240, initial_backoff_seconds=0.25, multiplier=1.0)
    with GrpcClient(grpc_target, MODEL, retry=retry) as client:
        client.predict_images([image])
    if server.poll() is not None:
        raise RuntimeError(f"the server exited with {server.returncode}")


def run_phase(
    kind: str,
    seconds: float,
    targets: dict[Transport, str],
    images: list[bytes],
    concurrency: int,
    mutate: Callable[[threading.Event], list[str]],
    hostile: Callable[[threading.Event], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Load on every transport for `seconds` while `mutate` changes the model base in another thread, and
    `hostile` (if any) runs its clients in a third."""
    from serving.loadtest import run_async_load_test

    results: dict[str, Any] = {}
    events: list[str] = []
    stop = threading.Event()

    def load(transport: Transport) -> None:
        results[transport] = run_async_load_test(
            targets[transport], MODEL, images, transport=transport, concurrency=concurrency, seconds=seconds
        ).to_json()

    threads = [threading.Thread(target=load, args=(transport,)) for transport in targets]
    mutator = threading.Thread(target=lambda: events.extend(mutate(stop)))
    hostile_stats: dict[str, Any] = {}
    others = [mutator]
    if hostile is not None:

        def run_hostile() -> None:
            try:
                hostile_stats.update(hostile(stop))
            except Exception as error:  # counted as unexpected: a hostile phase that sent nothing proves nothing
                hostile_stats["unexpected"] = [f"the hostile client failed: {type(error).__name__}: {error}"]

        others.append(threading.Thread(target=run_hostile))
    for thread in [*threads, *others]:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    for thread in others:
        thread.join()
    phase = {"phase": kind, "events": events, **results}
    if hostile is not None:
        phase["hostile"] = hostile_stats
    return phase


def mutation(kind: str, base: ModelBase, seconds: float, publish_every: float) -> Callable[[threading.Event], list]:
    def steady(stop: threading.Event) -> list[str]:
        return []

    def new_versions(stop: threading.Event) -> list[str]:
        published = []
        while not stop.wait(publish_every):
            published.append(f"published {base.publish()}")
        return published

    def half_written(stop: threading.Event) -> list[str]:
        stop.wait(1.0)
        return [f"half-written {base.half_written(seconds / 3, stop)}, then completed"]

    def rollback(stop: threading.Event) -> list[str]:
        stop.wait(seconds / 3)
        removed = base.rollback()
        return [f"rolled back: deleted {removed}"] if removed is not None else ["rollback skipped: one version"]

    return {
        "steady": steady,
        "new versions": new_versions,
        "half-written": half_written,
        "rollback": rollback,
        "stalled clients": steady,
        "bomb images": steady,
    }[kind]


def summarise(phases: list[dict[str, Any]], transports: list[Transport]) -> dict[str, Any]:
    totals: dict[str, Any] = {}
    for transport in transports:
        rows = [phase[transport] for phase in phases]
        totals[transport] = {
            "requests": sum(row["requests"] for row in rows),
            "errors": sum(row["errors"] for row in rows),
            "worst_p99_ms": max(row["p99_ms"] for row in rows),
            "median_p50_ms": sorted(row["p50_ms"] for row in rows)[len(rows) // 2],
        }
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__, "soak.json")
    parser.add_argument("--seconds", type=float, default=180.0, help="Length of the soak (whole phases).")
    parser.add_argument("--phase-seconds", type=float, default=10.0, help="Length of one phase.")
    parser.add_argument("--publish-every", type=float, default=3.0, help="Seconds between new versions.")
    parser.add_argument("--concurrency", type=int, default=4, help="Requests in flight per transport.")
    parser.add_argument("--no-batching", action="store_true", help="Serve without server-side batching.")
    parser.add_argument("--stalled", type=int, default=300, help="Stalled REST connections kept open.")
    parser.add_argument(
        "--stall-timeout", type=float, default=2.0, help="The server's serving.request_timeout_seconds."
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    transports: list[Transport] = ["grpc", "rest"]
    report: dict[str, Any] = {
        "command": command_line(argv),
        "concurrency_per_transport": args.concurrency,
        "batching": not args.no_batching,
    }
    with tempfile.TemporaryDirectory(prefix="tfxp-soak-") as scratch:
        workdir = Path(scratch)
        images = digit_pngs()
        base = ModelBase(workdir / "models" / MODEL, export_source(workdir))
        base.publish()
        server, grpc_target, rest_url = start_server(
            base.base, workdir, batching=not args.no_batching, stall_timeout=args.stall_timeout
        )
        try:
            wait_until_serving(grpc_target, images[0], server)
            report["rss_mb_start"] = rss_mb(server.pid)
            report["fds_start"] = open_fds(server.pid)
            targets: dict[Transport, str] = {"grpc": grpc_target, "rest": rest_url}
            phases = []
            count = max(1, round(args.seconds / args.phase_seconds))
            print(f"{count} phases of {args.phase_seconds:.0f} s; server RSS {report['rss_mb_start']:.0f} MiB")
            for index in range(count):
                kind = PHASES[index % len(PHASES)]
                change = mutation(kind, base, args.phase_seconds, args.publish_every)
                hostile: Callable[[threading.Event], dict[str, Any]] | None = None
                if kind == "stalled clients":
                    hostile = lambda stop: stalled_clients(rest_url, grpc_target, args.stalled, stop)  # noqa: E731
                elif kind == "bomb images":
                    hostile = lambda stop: bomb_client(rest_url, grpc_target, images[0], stop)  # noqa: E731
                phase = run_phase(kind, args.phase_seconds, targets, images, args.concurrency, change, hostile)
                phase["rss_mb"] = rss_mb(server.pid)
                phase["fds"] = open_fds(server.pid)
                phases.append(phase)
                print(
                    f"{index + 1:>3} {kind:<13} "
                    + "  ".join(
                        f"{t} {phase[t]['requests']:>5} req {phase[t]['errors']} err "
                        f"p50 {phase[t]['p50_ms']:.1f} p99 {phase[t]['p99_ms']:.1f} ms"
                        for t in transports
                    )
                    + f"  RSS {phase['rss_mb']:.0f} MiB  versions {sorted(phase['grpc']['versions'])}"
                    + f"  fds {phase['fds']}  {'; '.join(phase['events'])}"
                    + (f"  hostile {json.dumps(phase['hostile'])}" if "hostile" in phase else ""),
                    flush=True,
                )
            time.sleep(args.stall_timeout + 1)  # the last stalled connections time out
            report["rss_mb_end"] = rss_mb(server.pid)
            report["fds_end"] = open_fds(server.pid)
            report["server_alive"] = server.poll() is None
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
        report["phases"] = phases
        report["versions_left"] = base.versions()
    # A version completed a third into its phase should answer for the rest of it (TF Serving: within a retry).
    report["half_written_versions_never_served"] = [
        int(phase["events"][0].split()[1].rstrip(","))
        for phase in phases
        if phase["phase"] == "half-written"
        and phase["events"][0].split()[1].rstrip(",") not in phase["grpc"]["versions"]
    ]
    report["totals"] = summarise(phases, transports)
    report["errors"] = sum(total["errors"] for total in report["totals"].values())
    report["requests"] = sum(total["requests"] for total in report["totals"].values())
    report["hostile_unexpected"] = sum(len(phase.get("hostile", {}).get("unexpected", [])) for phase in phases)
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    for transport, total in report["totals"].items():
        print(
            f"{transport}: {total['requests']} requests, {total['errors']} errors, median p50 "
            f"{total['median_p50_ms']:.1f} ms, worst p99 {total['worst_p99_ms']:.1f} ms"
        )
    growth = report["rss_mb_end"] - report["rss_mb_start"]
    print(
        f"total {report['requests']} requests, {report['errors']} errors; server RSS {report['rss_mb_start']:.0f} → "
        f"{report['rss_mb_end']:.0f} MiB ({growth:+.0f}); open fds {report['fds_start']} → {report['fds_end']}; "
        f"hostile requests answered other than refused: {report['hostile_unexpected']}"
    )
    if report["half_written_versions_never_served"]:
        print(f"half-written versions never served after completion: {report['half_written_versions_never_served']}")
    path = write_report(args.out, "soak.json", report)
    print(f"→ {path} ({report['wall_seconds']} s)")
    return 1 if report["errors"] or report["hostile_unexpected"] else 0


if __name__ == "__main__":
    sys.exit(main())
