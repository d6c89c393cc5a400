"""A quiet terminal: TensorFlow's C++ logs, absl and Python warnings go to a log file; `tfxp -v` shows them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# glog's line format, which TensorFlow, XLA and LiteRT's C++ code use: `I0000 00:00:1796… 123 port.cc:153] …`.
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]", re.MULTILINE)


def _run(args: list[str], tmp_path: Path, code: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}  # TF's defaults
    env.update(PYTHONPATH=str(REPO), TMPDIR=str(tmp_path), COLUMNS="200")
    program = code or "import sys; sys.argv[0] = 'tfxp'; from pipeline.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )


def _logs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "tfxp-logs").glob("*.log"))


@pytest.fixture
def not_a_model(tmp_path: Path) -> tuple[Path, Path]:
    model = tmp_path / "model.tflite"
    model.write_bytes(b"\0" * 64)
    examples = tmp_path / "examples"
    examples.mkdir()
    return model, examples


def test_a_failing_command_keeps_tensorflows_lines_in_its_log_and_names_it(
    tmp_path: Path, not_a_model: tuple[Path, Path]
) -> None:
    model, examples = not_a_model
    result = _run(["edge", "eval", str(model), "--examples", str(examples)], tmp_path)  # imports TensorFlow

    assert result.returncode == 2, result.stderr
    assert f"error: {model} is not a TFLite model" in result.stderr
    assert CPP_LOG_LINE.search(result.stderr) is None and CPP_LOG_LINE.search(result.stdout) is None
    (log,) = _logs(tmp_path)
    assert log.name.startswith("edge-")
    assert f"full log: {log}" in result.stderr
    assert CPP_LOG_LINE.search(log.read_text()) is not None


def test_verbose_shows_everything_and_writes_no_log(tmp_path: Path, not_a_model: tuple[Path, Path]) -> None:
    model, examples = not_a_model
    result = _run(["-v", "edge", "eval", str(model), "--examples", str(examples)], tmp_path)

    assert result.returncode == 2
    assert CPP_LOG_LINE.search(result.stderr) is not None
    assert f"error: {model} is not a TFLite model" in result.stderr
    assert _logs(tmp_path) == []


def test_a_command_that_succeeds_prints_its_output_and_leaves_no_log(tmp_path: Path) -> None:
    result = _run(["doctor", "--json"], tmp_path)  # lists devices with TensorFlow

    assert result.returncode == 0, result.stderr
    assert "tensorflow" in json.loads(result.stdout)["versions"]
    assert CPP_LOG_LINE.search(result.stderr) is None
    assert _logs(tmp_path) == []


PROBE = """
import logging, os, sys, warnings
import typer
from pipeline.cli.console import console, error_console
from pipeline.cli.quiet import command_output
try:
    with command_output("probe"):
        os.write(2, b"E0000 00:00:1.0 1 probe.cc:1] from C++\\n")
        os.write(1, b"printf from C++\\n")
        warnings.warn("a Python warning")
        logging.getLogger("absl").warning("an absl record")
        print("print() on the terminal")
        console.print("console on the terminal")
        error_console.print("error console on the terminal")
        raise typer.Exit(int(sys.argv[1]))
except typer.Exit:
    pass
print("after: terminal again")
os.write(2, b"after: fd 2 is the terminal again\\n")
"""


@pytest.mark.parametrize("exit_code", [0, 1])
def test_what_goes_where(tmp_path: Path, exit_code: int) -> None:
    result = _run([str(exit_code)], tmp_path, code=PROBE)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "print() on the terminal",
        "console on the terminal",
        "after: terminal again",
    ]
    stderr = result.stderr.splitlines()
    assert stderr[0] == "error console on the terminal" and stderr[-1] == "after: fd 2 is the terminal again"
    for hidden in ("from C++", "printf from C++", "a Python warning", "an absl record"):
        assert hidden not in result.stdout + result.stderr
    logs = _logs(tmp_path)
    if exit_code == 0:
        assert logs == []  # a temp log is removed when the command succeeds
    else:
        (log,) = logs
        assert f"full log: {log}" in result.stderr
        text = log.read_text()
        for hidden in ("from C++", "printf from C++", "a Python warning", "an absl record"):
            assert hidden in text


KEPT = """
import os
from pipeline.cli.quiet import command_output, keep_log
with command_output("serve"):
    os.write(2, b"a server's C++ line\\n")
    print(f"log: {keep_log()}")
"""


def test_a_long_running_command_keeps_the_log_it_names(tmp_path: Path) -> None:
    result = _run([], tmp_path, code=KEPT)

    (log,) = _logs(tmp_path)
    assert result.stdout == f"log: {log}\n"
    assert log.read_text() == "a server's C++ line\n"
