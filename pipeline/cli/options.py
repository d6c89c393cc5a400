"""Options and config loading shared by the commands that take a config (`run`, `compile`, `deploy-assets`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pipeline.cli.console import fail

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
