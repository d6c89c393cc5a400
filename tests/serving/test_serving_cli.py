"""`tfxp serve`, `tfxp predict` and `tfxp loadtest` from the command line."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import portpicker
import pytest
from layout_fixtures import LAYOUTS, write_layout
from serving_fixtures import random_png, tiny_classifier, write_model_version
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.cli.options import check_output_file
from serving.base_client import RetryPolicy
from serving.grpc_client import GrpcClient
from serving.model_config import ModelConfig
from serving.server import ModelServer
from serving.server_options import ServerOptions

LABELS = ["cat", "dog", "emu"]


@pytest.fixture(scope="module")
def model_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("cli") / "pets"
    write_model_version(base, 1, tiny_classifier(8, 1, len(LABELS), seed=3), LABELS)
    return base


@pytest.fixture(scope="module")
def server(model_base: Path) -> Iterator[ModelServer]:
    with ModelServer([ModelConfig("pets", model_base)], ServerOptions(grpc_port=0, rest_port=0)) as running:
        yield running


@pytest.fixture
def image_files(tmp_path: Path) -> list[Path]:
    paths = []
    for seed in range(2):
        path = tmp_path / f"image{seed}.png"
        path.write_bytes(random_png(8, 1, seed))
        paths.append(path)
    return paths


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_predict_prints_top_k_with_label_names(
    server: ModelServer, model_base: Path, image_files: list[Path], transport: str
) -> None:
    target = server.grpc_target if transport == "grpc" else server.rest_url
    labels = model_base / "1" / "assets" / "labels.txt"
    code, output = run_cli(
        "predict",
        *map(str, image_files),
        f"--{transport}",
        target,
        "--model-name",
        "pets",
        "--labels",
        str(labels),
        "--top-k",
        "2",
    )
    assert code == 0, output
    lines = [line for line in output.splitlines() if line.startswith(str(image_files[0].parent))]
    assert len(lines) == 2
    for line in lines:
        ranked = line.split(": ", 1)[1].split(", ")
        assert len(ranked) == 2 and all(entry.split(" ")[0] in LABELS for entry in ranked)
    if transport == "grpc":
        assert "(version 1) via gRPC" in output


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_predict_classifies_examples_of_every_layout_tfxp_run_reads(
    server: ModelServer, tmp_path: Path, name: str
) -> None:
    layout = LAYOUTS[name]
    root = write_layout(tmp_path / "data", layout)
    sets = [value for override in layout.overrides for value in ("--set", override)]
    code, output = run_cli(
        "predict", "--examples", str(root), "--count", "9", "--grpc", server.grpc_target, "--model-name", "pets",
        "--labels", str(root / "labels.txt"), "--top-k", "1", *sets,
    )  # fmt: skip
    assert code == 0, output
    split = "eval" if "eval" in layout.splits else "all"
    newest = f"span-{layout.spans[-1]}/" if layout.spans else ""
    files = [path for path in layout.splits[split] if path.startswith(newest)]
    truths = [layout.names()[label] for path in sorted(files) for label in layout.files[path]]
    lines = [line for line in output.splitlines() if " #" in line]
    assert [line.rsplit("[true: ", 1)[1] for line in lines] == [f"{truth}]" for truth in truths]
    assert all(line.startswith(f"{root} ({split}") for line in lines)


def test_predict_explains_bad_targets_and_models(server: ModelServer, image_files: list[Path]) -> None:
    code, output = run_cli("predict", "--grpc", server.grpc_target)
    assert code == 2 and "pass image files or --examples DIR" in output
    code, output = run_cli("predict", "--examples", str(image_files[0].parent), "--grpc", server.grpc_target)
    assert code == 2 and "is split: found nothing (no TFRecords that tfxp recognises)" in plain(output)
    code, output = run_cli("predict", str(image_files[0]))
    assert code == 2 and "pass exactly one of --grpc HOST:PORT and --rest URL" in output
    code, output = run_cli("predict", str(image_files[0]), "--grpc", server.grpc_target, "--model-name", "nope")
    assert code == 2
    assert "NOT_FOUND: Servable not found for request: Latest(nope)" in output.replace("\n", " ")
    code, output = run_cli("predict", "missing.png", "--grpc", server.grpc_target)
    assert code == 2 and "Invalid value for 'images': missing.png does not exist" in plain(output)


def test_loadtest_reports_throughput_and_writes_json(
    server: ModelServer, image_files: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "load.json"
    code, output = run_cli(
        "loadtest", "--grpc", server.grpc_target, "--model-name", "pets", "--image", str(image_files[0]),
        "--concurrency", "2", "--seconds", "1", "--warmup", "0.2", "--json", str(out),
    )  # fmt: skip
    assert code == 0, output
    result = json.loads(out.read_text())
    assert result["errors"] == 0 and result["requests"] > 0 and result["concurrency"] == 2
    assert result["qps"] > 0 and result["p50_ms"] <= result["p95_ms"] <= result["p99_ms"]
    assert "QPS" in output and "p99" in output


def test_serve_refuses_a_missing_model_base(tmp_path: Path) -> None:
    code, output = run_cli("serve", "--model-base", str(tmp_path / "nothing"))
    assert code == 2
    assert "does not exist; run `tfxp run` first" in plain(output)


def test_serve_points_from_the_serving_dir_to_the_model_below_it(tmp_path: Path) -> None:
    (tmp_path / "serving" / "digits" / "1796000000").mkdir(parents=True)
    code, output = run_cli("serve", "--model-base", str(tmp_path / "serving"))
    assert code == 2
    assert f"holds no versions, but digits below it does; pass --model-base {tmp_path / 'serving' / 'digits'}" in (
        plain(output)
    )


def test_serve_help_says_it_stands_in_for_tf_serving() -> None:
    code, output = run_cli("serve", "--help")
    assert code == 0
    assert "Production serves the pushed model with TensorFlow Serving" in " ".join(output.split())


@pytest.mark.slow  # `tfxp serve` in a process of its own
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_tfxp_serve_answers_until_interrupted(model_base: Path, stop: signal.Signals) -> None:
    grpc_port, rest_port = portpicker.pick_unused_port(), portpicker.pick_unused_port()
    command = [
        str(Path(sys.executable).parent / "tfxp"), "serve", "--model-base", str(model_base), "--model-name", "pets",
        "--grpc-port", str(grpc_port), "--rest-port", str(rest_port), "--no-batching",
    ]  # fmt: skip
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        retry = RetryPolicy(max_attempts=120, initial_backoff_seconds=0.25, multiplier=1.0)
        with GrpcClient(f"127.0.0.1:{grpc_port}", "pets", retry=retry) as client:
            assert client.predict_images([random_png(8, 1, 0)]).model_version == 1
        process.send_signal(stop)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    assert f"serving gRPC on 127.0.0.1:{grpc_port}, REST on http://127.0.0.1:{rest_port}" in output
    assert "stopping: finishing in-flight requests" in output


# --- bad option values: refused while the command line is parsed, before any work -------------------------------


def plain(output: str) -> str:
    """The output without Typer's error-panel borders, on one line."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", output).split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--grpc-port", "70000"], "Invalid value for '--grpc-port': 70000 is not a TCP port: use 1-65535"),
        (["serve", "--rest-port", "-1"], "Invalid value for '--rest-port': -1 is not a TCP port: use 1-65535"),
        (["serve", "--rest-port", "0"], "Invalid value for '--rest-port': 0 is not a TCP port: use 1-65535"),
        (["serve", "--grpc-port", "http"], "Invalid value for '--grpc-port': 'http' is not a port number: use 1-65535"),
        (
            ["predict", "x.png", "--grpc", "127.0.0.1:99999"],
            "Invalid value for '--grpc': '127.0.0.1:99999' has port 99999, not a TCP port (1-65535): use HOST:PORT",
        ),
        (
            ["loadtest", "--grpc", "localhost", "--image", "x.png"],
            "Invalid value for '--grpc': 'localhost' is not HOST:PORT: use HOST:PORT, e.g. localhost:8500",
        ),
        (
            ["loadtest", "--rest", "127.0.0.1:8501", "--image", "x.png"],
            "Invalid value for '--rest': '127.0.0.1:8501' is not an http:// or https:// URL: use http://HOST:PORT",
        ),
        (
            ["loadtest", "--rest", "ftp://127.0.0.1:8501", "--image", "x.png"],
            "Invalid value for '--rest': 'ftp://127.0.0.1:8501' is not an http:// or https:// URL",
        ),
        (
            ["predict", "x.png", "--rest", "http://[::1"],
            "Invalid value for '--rest': 'http://[::1' is not a URL (Invalid IPv6 URL): use http://HOST:PORT",
        ),
    ],
)
def test_bad_ports_and_addresses_exit_2_naming_the_option_and_value(args: list[str], message: str) -> None:
    code, output = run_cli(*args)
    assert code == 2
    assert message in plain(output)
    assert "Traceback" not in output and "👎" not in output


def test_loadtest_refuses_a_json_path_that_is_a_directory_before_the_test(
    image_files: list[Path], tmp_path: Path
) -> None:
    started = time.monotonic()
    code, output = run_cli(
        "loadtest", "--rest", "http://127.0.0.1:9", "--image", str(image_files[0]), "--seconds", "30",
        "--json", str(tmp_path),
    )  # fmt: skip
    assert time.monotonic() - started < 10  # the 30-second test never started
    assert code == 2
    assert (
        f"Invalid value for '--json': {tmp_path} is a directory; give a file path, e.g. {tmp_path / 'result.json'}"
        in plain(output)
    )


def test_loadtest_refuses_a_json_path_under_a_file(image_files: list[Path], tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    code, output = run_cli(
        "loadtest", "--rest", "http://127.0.0.1:9", "--image", str(image_files[0]), "--seconds", "30",
        "--json", str(blocker / "out" / "load.json"),
    )  # fmt: skip
    assert code == 2
    assert f"{blocker} is a file, not a directory" in plain(output)
    assert blocker.read_text() == "x"


def test_check_output_file_accepts_new_files_in_new_directories(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "load.json"
    assert check_output_file(target, "--json") == target
    assert not (tmp_path / "a").exists()  # checking creates nothing
