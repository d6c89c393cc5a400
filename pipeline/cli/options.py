"""Options and config loading shared by the commands that take a config (`run`, `compile`, `deploy-assets`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.app import fail
from pipeline.config import ConfigError, TfxpConfig, load_config

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config (defaults: the built-in digits config).")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override one key, `section.key=value`; repeatable."),
]


def load_cli_config(config_file: Path | None, overrides: list[str] | None, output: Path | None = None) -> TfxpConfig:
    """The config from `--config`, `--set` and `--output`, or a clean CLI error."""
    settings = list(overrides or [])
    if output is not None:
        settings.append(f"pipeline.output={output}")
    try:
        return load_config(config_file, settings)
    except ConfigError as error:
        raise fail(str(error)) from None
