"""The `tfxp` command line; see `tfxp --help`."""

from pipeline.cli.app import app, main

__all__ = ["app", "main"]
