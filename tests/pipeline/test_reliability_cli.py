"""Every `tfxp` command × bad values: exit 2, one paragraph naming the problem, no traceback, nothing written;
and (e2e) a Trainer killed with SIGKILL, then the same command again.

The table grows with the CLI: `test_the_table_covers_every_command` fails when a command has no bad-value case.
Each case runs in a fresh directory (also the working directory, where defaults such as ./tfxp_output would
land) holding the fixtures below; after the command the directory must be exactly as it was.

Placeholders in a case's arguments:
    {tmp}      the case's directory            {file}     a text file        {dir}      an empty directory
    {missing}  a path that does not exist      {binary}   a file that is not text, a model or an image
    {yaml}     a pipeline YAML stand-in        {image}    a PNG              {empty}    a data set whose eval split
                                                                                        holds 0 records
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
import typer
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from serving_fixtures import random_png
from typer.testing import CliRunner

from pipeline.cli import app


class Case(NamedTuple):
    args: tuple[str, ...]
    expected: str  # part of the one-paragraph message


def case(command: str, expected: str) -> Case:
    return Case(tuple(command.split()), expected)


NO_SCHEME = "is not an http:// or https:// URL"
ROLLOUT = "--set serving.rollout=canary --set serving.version_policy=specific"
# Command → its bad-value cases. Arguments are split on spaces (no case needs a space inside one).
CASES: dict[str, list[Case]] = {
    "doctor": [case("doctor --json extra", "unexpected extra argument")],
    "compile": [
        case("compile --out {file}/p.yaml", "{file} is a file, not a directory"),  # issue 15 item 12
        case("compile --out {dir}", "{dir} is a directory"),
        case("compile --out {tmp}/p.yaml --config {missing}", "{missing} does not exist"),
        case("compile --out {tmp}/p.yaml --config {dir}", "{dir} is a directory, not a file"),
        case("compile --out {tmp}/p.yaml --set nosuch.key=1", "nosuch"),
        case("compile --out {tmp}/p.yaml --set kubeflow.memory_request=8K", "kilo is lower-case k"),
        case("compile --out {tmp}/p.yaml --set kubeflow.image=tfxp:0.1;id", "`kubeflow.image`"),
    ],
    "submit": [
        case("submit {missing} --host http://localhost:8080", "{missing} does not exist"),
        case("submit {yaml} --host http://[::1", "is not a URL (Invalid IPv6 URL)"),  # item 17
        case("submit {yaml} --host localhost:8080", NO_SCHEME),
        case("submit {yaml} --host http://localhost:8080 --param novalue", "novalue"),
    ],
    "pipeline upload": [case("pipeline upload {dir} --host http://localhost:8080", "{dir} is a directory")],
    "pipeline list": [
        case("pipeline list --host http://[::1", "is not a URL"),
        case("pipeline list --host http://localhost:8080 --limit 0", "--limit"),
    ],
    "pipeline versions": [case("pipeline versions p --host ftp://localhost", NO_SCHEME)],
    "schedule create": [
        case("schedule create {yaml} --host http://localhost:8080 --cron bad", "bad"),
        case("schedule create {yaml} --host http://localhost:8080 --every 5s", "5s"),
        case("schedule create {missing} --host http://localhost:8080 --every 1h", "{missing} does not exist"),
    ],
    "schedule list": [case("schedule list --host http://[::1", "is not a URL")],
    "schedule pause": [case("schedule pause id1 --host localhost", NO_SCHEME)],
    "schedule resume": [case("schedule resume id1 --host localhost", NO_SCHEME)],
    "schedule delete": [case("schedule delete id1 --host localhost", NO_SCHEME)],
    "runs list": [
        case("runs list --host localhost", NO_SCHEME),
        case("runs list --host http://localhost:0", "not a TCP port (1-65535)"),
    ],
    "runs get": [case("runs get r1 --host http://[::1", "is not a URL")],
    "runs terminate": [case("runs terminate r1 --host localhost", NO_SCHEME)],
    "runs retry": [case("runs retry r1 --host localhost", NO_SCHEME)],
    "run-spec": [
        case("run-spec {missing}", "{missing} does not exist; compile it with `tfxp compile --out FILE`"),
        case("run-spec {yaml} --state {file}", "{file} is a file"),
        case("run-spec {yaml} --pipeline-root {tmp}/root", "with --backend kfp the root is an object-store URI"),
        case("run-spec {yaml} --backend argo", "--backend argo: expected one of kfp, vertex"),
        case("run-spec {yaml} --param novalue", "--param 'novalue' is not NAME=VALUE"),
    ],
    "report": [
        case("report {missing}", "{missing} does not exist; pass the output dir of `tfxp run`"),
        case("report {dir}", "has no run-summary.json"),
        case("report {dir} --out {dir}", "{dir} is a directory"),
    ],
    "run": [
        case("run --output {file}", "{file} is a file"),  # item 12
        case("run --output {file}/out", "{file} is a file, not a directory"),
        case("run --config {dir}", "{dir} is a directory, not a file"),
        case("run --set data.path={missing}", "data.path {missing} is not a directory"),
        case("run --set pipeline.output={file}", "{file}"),
        case("run --set trainer.train_steps=-1", "trainer.train_steps"),
    ],
    "serve": [
        case("serve --grpc-port 70000", "70000 is not a TCP port"),  # item 5
        case("serve --rest-port -1", "-1 is not a TCP port"),
        case("serve --model-base {missing}", "{missing} does not exist"),
        case("serve --model-config-file {dir}", "{dir} is a directory, not a file"),
        case("serve", "run `tfxp run` first"),  # nothing pushed under ./tfxp_output yet
    ],
    "predict": [
        case("predict --grpc 127.0.0.1:99999 {image}", "99999"),  # item 5
        case("predict --rest http://127.0.0.1:1 {missing}", "{missing} does not exist"),
        case("predict --rest http://127.0.0.1:1 --labels {binary} {image}", "{binary} is not UTF-8 text"),  # item 14
        case("predict --rest http://127.0.0.1:1 --examples {dir}", "cannot tell how the data in {dir} is split"),
        case("predict --rest http://127.0.0.1:1 --examples {empty}", "{empty} (eval) has no records"),
        case("predict {image}", "pass exactly one of --grpc"),
    ],
    "loadtest": [
        case("loadtest --rest 127.0.0.1:8501 --image {image}", "http://"),  # item 16
        case("loadtest --rest ftp://127.0.0.1:8501 --image {image}", "ftp://"),
        case("loadtest --rest http://127.0.0.1:1 --image {image} --json {dir}", "{dir} is a directory"),  # item 15
        case("loadtest --rest http://127.0.0.1:1 --image {missing}", "{missing} does not exist"),
        case("loadtest --image {image}", "pass exactly one of --grpc"),
    ],
    "deploy-assets": [
        case("deploy-assets --out {file}", "{file} is a file"),
        case("deploy-assets --out {tmp}/d --set serving.cpu_image=`id`", "`serving.cpu_image`"),
        case("deploy-assets --out {tmp}/d --set serving.namespace=kube-system", "never relabels"),
        case("deploy-assets --out {tmp}/d --set serving.max_replicas=2147483648", "`serving.max_replicas`"),
    ],
    "rollout status": [case("rollout status", "serving.rollout is direct, so no canary is kept")],
    "rollout start": [
        case(f"rollout start --version 5 --by ana {ROLLOUT} --serving-base {{tmp}}/b", "is not a complete version"),
    ],
    "rollout promote": [
        case(f"rollout promote --by ana {ROLLOUT} --serving-base {{tmp}}/b", "has no canary to promote")
    ],
    "rollout rollback": [
        case(f"rollout rollback --by ana {ROLLOUT} --serving-base {{tmp}}/b", "has no canary to roll back"),
    ],
    "rollout sync": [case("rollout sync --set serving.rollout=canary", "serving.version_policy is latest")],
    "rollout analyze": [case(f"rollout analyze {ROLLOUT} --serving-base {{tmp}}/b", "has no canary to analyze")],
    "data digits": [
        case("data digits --out {file}", "{file} is a file"),
        case("data digits --out {tmp}/d --shards 0", "--shards"),
        case(
            "data digits --out gs://bucket/digits", "gs://bucket/digits is a bucket URL; this option takes a local path"
        ),
    ],
    "data from-folder": [
        case("data from-folder {missing} --out {tmp}/d", "{missing} does not exist"),
        case("data from-folder {file} --out {tmp}/d", "{file} is a file, not a directory"),
        case("data from-folder {dir} --out {file}", "{file} is a file"),
    ],
    "data inspect": [case("data inspect {file}", "{file} is a file, not a directory")],
    "edge convert": [
        case("edge convert {missing} --mode int8 --examples {dir} --out {tmp}/m.tflite", "{missing} does not exist"),
        case("edge convert {dir} --mode int8 --examples {missing} --out {tmp}/m.tflite", "{missing} does not exist"),
        case("edge convert {dir} --out {dir}", "{dir} is a directory"),
        case("edge convert {dir} --mode int4 --out {tmp}/m.tflite", "int4"),
        case("edge convert {dir} --mode dynamic --out {tmp}/m.tflite", "{dir} is not a SavedModel directory"),
    ],
    "edge eval": [
        case("edge eval {missing} --examples {dir}", "{missing} does not exist"),
        case("edge eval {binary} --examples {missing}", "{missing} does not exist"),
        case("edge eval {binary} --examples {dir}", "{binary} is not a TFLite model"),
    ],
    "edge verify": [
        case("edge verify {missing} --examples {dir}", "{missing} does not exist"),
        case("edge verify {binary} --examples {dir} --cpu max", "`max` is no device a model ships to"),
        case("edge verify {binary} --examples {dir} --arch riscv", "unknown --arch riscv"),
    ],
    "edge inspect": [
        case("edge inspect {missing}", "{missing} does not exist"),
        case("edge inspect {binary}", "{binary} is not a TFLite model"),
    ],
    "edge versions": [
        case("edge versions {missing}", "{missing} does not exist"),
        case("edge versions {file}", "{file} is a file, not a directory"),
        case("edge versions {dir}", "no published device models under {dir}"),
    ],
    "edge bench": [
        case("edge bench {dir}", "{dir} is a directory, not a file"),
        case("edge bench {file} --runs 0", "--runs"),
        case("edge bench {binary}", "{binary} is not a TFLite model"),
    ],
}


def _fill(text: str, places: dict[str, Path]) -> str:
    return text.format(**{name: str(path) for name, path in places.items()})


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("just text\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "pipeline.yaml").write_text("pipelineSpec: {}\n")
    (tmp_path / "image.png").write_bytes(random_png(8, 1, 0))
    empty = tmp_path / "empty"
    for split in ("train", "eval"):
        (empty / split).mkdir(parents=True)
        with gzip.open(empty / split / "part-00000-of-00001.tfrecord.gz", "wb"):
            pass
    (empty / "labels.txt").write_text("a\nb\n")
    return {
        "tmp": tmp_path,
        "file": tmp_path / "file.txt",
        "dir": tmp_path / "dir",
        "missing": tmp_path / "missing",
        "binary": tmp_path / "binary.bin",
        "yaml": tmp_path / "pipeline.yaml",
        "image": tmp_path / "image.png",
        "empty": empty,
    }


def _tree(root: Path) -> dict[str, tuple[bool, int, int]]:
    return {
        str(path.relative_to(root)): (path.is_dir(), path.stat().st_size, path.stat().st_mtime_ns)
        for path in root.rglob("*")
    }


def one_paragraph(output: str) -> str:
    """The message with Typer's usage lines and box drawing removed, whitespace collapsed."""
    kept = [line.strip("│╭╮╰╯─ ") for line in output.splitlines()]
    kept = [line for line in kept if line and not line.startswith(("Usage:", "Try '", "Error"))]
    return " ".join(" ".join(kept).split())


@pytest.mark.parametrize(
    ("args", "expected"),
    [pytest.param(c.args, c.expected, id=" ".join(c.args)) for cases in CASES.values() for c in cases],
)
def test_a_bad_value_exits_2_with_one_paragraph_and_writes_nothing(
    places: dict[str, Path], args: tuple[str, ...], expected: str
) -> None:
    before = _tree(places["tmp"])

    result = CliRunner().invoke(app, [_fill(arg, places) for arg in args], env={"COLUMNS": "240"})

    output = result.output
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert len([line for line in output.splitlines() if line.strip()]) <= 6, output
    assert _fill(expected, places) in one_paragraph(output), output
    assert _tree(places["tmp"]) == before


def _command_paths(command: typer.core.TyperCommand | typer.core.TyperGroup, prefix: str = "") -> list[str]:
    if not isinstance(command, typer.core.TyperGroup):
        return [prefix]
    context = typer.Context(command)
    paths = []
    for name in command.list_commands(context):
        sub = command.get_command(context, name)
        assert sub is not None
        paths += _command_paths(sub, f"{prefix} {name}".strip())
    return paths


def test_the_table_covers_every_command() -> None:
    commands = _command_paths(typer.main.get_command(app))

    assert sorted(commands) == sorted(CASES)


RUN_ENTRY = "import sys; sys.argv[0] = 'tfxp'; from pipeline.cli import main; main()"


@pytest.mark.e2e
def test_a_trainer_killed_mid_training_resumes_on_rerun_and_pushes_once(digits_dir: Path, tmp_path: Path) -> None:
    """kill -9 during the Trainer, then the same command: it resumes from the backup, pushes one model, and
    leaves no RUNNING execution and no empty output directory of the killed one (issue 15, item 10)."""
    out = tmp_path / "out"
    command = [
        sys.executable, "-c", RUN_ENTRY, "run", "--output", str(out), "--set", f"data.path={digits_dir}",
        "--set", "trainer.train_steps=600", "--set", "edge.enabled=false",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "TMPDIR": str(tmp_path)}
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert first.stdout is not None
    for line in first.stdout:  # Keras's per-epoch lines reach the terminal
        if line.startswith("Epoch 2/"):
            break
    else:
        pytest.fail("the first run ended before its Trainer's second epoch")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    root = out / "tfxp-digits" / "root"
    (killed,) = [path.name for path in (root / "Trainer" / "model").iterdir()]

    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)

    assert second.returncode == 0, second.stdout + second.stderr
    assert f"Trainer (execution {killed}) left RUNNING by a killed run: marked CANCELED" in second.stdout
    assert not (root / "Trainer" / "model" / killed).exists()
    (model,) = [path for path in (root / "Trainer" / "model").iterdir()]
    assert json.loads((model / "training_metrics.json").read_text())["start_epoch"] >= 1  # resumed
    assert len([path for path in (out / "serving" / "digits").iterdir() if path.name.isdigit()]) == 1
    store = metadata_store.MetadataStore(sqlite_connection(out / "tfxp-digits" / "metadata.db"))
    states = {execution.last_known_state for execution in store.get_executions()}
    assert metadata_store_pb2.Execution.RUNNING not in states
    assert metadata_store_pb2.Execution.CANCELED in states
    assert "Traceback" not in second.stderr and "I0000" not in second.stderr


def sqlite_connection(path: Path) -> metadata_store_pb2.ConnectionConfig:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(path)
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return config
