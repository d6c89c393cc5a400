"""The `tfxp` root command: commands registered by name and loaded lazily, so help imports no TensorFlow."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType

import pytest
import typer
from typer.models import ParameterInfo
from typer.testing import CliRunner

import pipeline.cli
from pipeline.cli import app
from pipeline.cli.app import COMMANDS

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("tensorflow", "tfx", "tf_keras")
# Runs the console script's entry point; at exit (after every other exit hook) prints which heavy
# packages were imported, as JSON on the last line of stderr.
ENTRY_POINT = f"""
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr))
sys.argv[0] = "tfxp"
from pipeline.cli import main
main()
"""
# Modules of pipeline.cli that hold no commands.
NOT_COMMAND_MODULES = {"pipeline.cli.app", "pipeline.cli.console", "pipeline.cli.options", "pipeline.cli.quiet"}


def _tfxp(*args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-c", ENTRY_POINT, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    imported = json.loads(result.stderr.strip().splitlines()[-1])
    return result, imported


def test_root_help_lists_every_command_and_imports_no_tensorflow() -> None:
    result, imported = _tfxp("--help")

    assert result.returncode == 0, result.stderr
    assert "Usage: tfxp [OPTIONS] COMMAND [ARGS]..." in result.stdout
    assert "One TFX pipeline from image TFRecords to a TF Serving model" in result.stdout
    listed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("│ ") and line.split()[1:]]
    assert [name for name in listed if name in COMMANDS] == list(COMMANDS)
    assert imported == []


@pytest.mark.parametrize(
    ("command", "summary"),
    [
        ("run", "Run the pipeline locally (LocalDagRunner) and write OUT/run-summary.json."),
        ("compile", "Compile the pipeline for Kubeflow Pipelines (KFP v2 IR YAML)"),
        ("serve", "Serve models over TF Serving's gRPC and REST APIs, until Ctrl-C."),
    ],
)
def test_command_help_imports_no_tensorflow(command: str, summary: str) -> None:
    result, imported = _tfxp(command, "--help")

    assert result.returncode == 0, result.stderr
    assert f"Usage: tfxp {command} [OPTIONS]" in result.stdout
    assert summary in result.stdout
    assert "--config" in result.stdout
    assert imported == []


def test_unknown_command_is_a_usage_error() -> None:
    result, _ = _tfxp("nosuch")

    assert result.returncode == 2
    assert "No such command 'nosuch'." in result.stderr


def test_a_typo_gets_the_close_command_names() -> None:
    result = CliRunner().invoke(app, ["serv"])

    assert result.exit_code == 2
    assert "No such command 'serv'. Did you mean 'serve'?" in result.output


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_registered_command_loads(name: str) -> None:
    result = CliRunner().invoke(app, [name, "--help"])

    assert result.exit_code == 0, result.output
    assert f"Usage: tfxp {name} [OPTIONS]" in result.output


def _command_modules() -> list[ModuleType]:
    names = [f"pipeline.cli.{module.name}" for module in pkgutil.iter_modules(pipeline.cli.__path__)]
    return [importlib.import_module(name) for name in names if name not in NOT_COMMAND_MODULES]


def _takes_cli_options(function: object) -> bool:
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except NameError:  # an annotation only type checkers see: Typer could not make a command of it either
        return False
    return any(
        isinstance(extra, ParameterInfo) for hint in hints.values() for extra in getattr(hint, "__metadata__", ())
    )


def test_every_command_in_the_command_modules_is_registered() -> None:
    registered = {
        getattr(importlib.import_module(module), attribute)
        for module, _, attribute in (target.partition(":") for target in COMMANDS.values())
    }
    in_groups = {
        command.callback
        for group in registered
        if isinstance(group, typer.Typer)
        for command in group.registered_commands
    }
    unregistered = []
    for module in _command_modules():
        for name, value in vars(module).items():
            is_group = isinstance(value, typer.Typer)
            is_command = inspect.isfunction(value) and value.__module__ == module.__name__ and _takes_cli_options(value)
            if (is_group or is_command) and value not in registered | in_groups:
                unregistered.append(f"{module.__name__}:{name}")

    assert unregistered == []
    assert {target.partition(":")[0] for target in COMMANDS.values()} == {m.__name__ for m in _command_modules()}


def _imported_modules(module: ModuleType) -> set[str]:
    tree = ast.parse(Path(inspect.getfile(module)).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return imported


def test_command_modules_do_not_import_the_root() -> None:
    importers = [module.__name__ for module in _command_modules() if "pipeline.cli.app" in _imported_modules(module)]

    assert importers == []
