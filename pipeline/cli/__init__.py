"""The `tfxp` command line; see `tfxp --help`.

`app` is the root Typer app (for `typer.testing.CliRunner().invoke(app, [...])`); `main` runs it.
"""

from pipeline.cli.app import app, main

__all__ = ["app", "main"]
