"""The `tfxp` Typer application and the error handling every command shares.

Command modules (`data.py`, `run.py`, ...) register on `app`; they import heavy
libraries (TensorFlow, TFX) inside the command functions so `tfxp --help` is fast.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

app = typer.Typer(
    name="tfxp",
    help="One TFX pipeline from image TFRecords to a TF Serving model and a quantized TFLite model.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
error_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Bad input from the user; the message says what, where and how to fix it."""


def fail(message: str, code: int = 2) -> typer.Exit:
    """Prints `message` as one paragraph on stderr and returns the Exit to raise."""
    error_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def user_errors(*error_types: type[BaseException]) -> Callable[[F], F]:
    """Turns the given exception types (plus UserError) into a clean message and exit 2."""
    handled: tuple[type[BaseException], ...] = (UserError, *error_types)

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except handled as error:
                raise fail(str(error)) from None

        return wrapper  # type: ignore[return-value]

    return decorate


def main() -> None:
    """Console-script entry point: registers every command module, then runs."""
    from pipeline.cli import commands  # noqa: F401  (registers the commands on `app`)

    sys.exit(app())
