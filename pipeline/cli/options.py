"""Options shared by commands: config loading (`run`, `compile`, `deploy-assets`, ...) and typed values that are
checked while the command line is parsed, before any work starts: ports, gRPC targets, REST URLs, output files.

A bad value exits 2 with Typer's one-paragraph "Invalid value for '--OPTION': ..." naming the option and the value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pipeline.cli.console import UserError, fail
from serving.address import check_port, parse_grpc_target, parse_rest_url

if TYPE_CHECKING:
    from pipeline.config import TfxpConfig

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config (defaults: the built-in digits config).")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override one key, `section.key=value`; repeatable."),
]


def load_cli_config(
    config_file: Path | None, overrides: list[str] | None, output: str | Path | None = None
) -> TfxpConfig:
    """The config from `--config`, `--set` and `--output`, or a clean CLI error."""
    from pipeline.config import ConfigError, load_config  # here, so `--help` does not import the config schema

    try:
        config = load_config(config_file, list(overrides or []))
    except ConfigError as error:
        raise fail(str(error)) from None
    if output is not None:  # a path, not YAML: applied as is
        config = config.model_copy(update={"pipeline": config.pipeline.model_copy(update={"output": str(output)})})
    return config


# --- typed values ------------------------------------------------------------------------------------------------
# Typer parsers: text in, value out, `typer.BadParameter` (exit 2, naming the option) for a bad value.


def port_number(text: str) -> int:
    """A TCP port, 1-65535 (one rule for every port option)."""
    try:
        return check_port(int(text.strip()), what="")
    except ValueError as error:
        if not text.strip().lstrip("+-").isdigit():
            raise typer.BadParameter(f"{text!r} is not a port number: use 1-65535") from None
        raise typer.BadParameter(str(error)) from None


def grpc_target(text: str) -> str:
    """A gRPC target `HOST:PORT` (`[IPV6]:PORT`), port 1-65535."""
    try:
        parse_grpc_target(text, what="")
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return text


def rest_url(text: str) -> str:
    """A REST base URL `http(s)://HOST:PORT`, without a trailing slash."""
    try:
        return parse_rest_url(text, what="")
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


GrpcPortOption = Annotated[
    int | None,
    typer.Option(
        "--grpc-port", parser=port_number, metavar="PORT", help="gRPC port, 1-65535 (default serving.grpc_port)."
    ),
]
RestPortOption = Annotated[
    int | None,
    typer.Option(
        "--rest-port", parser=port_number, metavar="PORT", help="REST port, 1-65535 (default serving.rest_port)."
    ),
]
GrpcOption = Annotated[
    str | None,
    typer.Option("--grpc", parser=grpc_target, metavar="HOST:PORT", help="gRPC target HOST:PORT, e.g. localhost:8500."),
]
RestOption = Annotated[
    str | None,
    typer.Option(
        "--rest", parser=rest_url, metavar="URL", help="REST base URL http://HOST:PORT, e.g. http://localhost:8501."
    ),
]


def check_output_file(path: Path, option: str) -> Path:
    """`path` if a file can be written there: not a directory, and its parent a writable directory (or creatable).

    Call it before the command's work starts, so a bad path costs nothing.

    Args:
        path: Where the command will write.
        option: The option's name for the message, e.g. `--json`.

    Returns:
        `path`, unchanged.

    Raises:
        UserError: naming the option, the path and what is wrong with it.
    """
    if path.is_dir():
        raise UserError(f"{option} {path} is a directory; give a file path, e.g. {path / 'result.json'}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:  # missing parents are created: check the first existing one
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{option} {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: directory {parent} is not writable")
    return path
