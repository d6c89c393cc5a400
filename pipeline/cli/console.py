"""What every `tfxp` command shares: the output consoles and the turning of user errors into exit 2.

Command modules import these from here, never from `pipeline.cli.app`, which only names the commands.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

console = Console()
error_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Bad input from the user; the message says what, where and how to fix it."""


def fail(message: str, code: int = 2) -> typer.Exit:
    """Prints `message` as one paragraph on stderr and returns the Exit to raise.

    Args:
        message: What went wrong and how to fix it; printed after `error:`.
        code: The exit status; 2 (bad input) by default.

    Returns:
        The `typer.Exit` for the caller to raise, e.g. `raise fail("no such file") from None`.
    """
    error_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def user_errors(*error_types: type[BaseException]) -> Callable[[F], F]:
    """Turns the given exception types (plus UserError) into a clean message and exit 2.

    Args:
        *error_types: Exceptions whose message is fit for the user, e.g. `DataError, OSError`.

    Returns:
        A decorator for a command function.
    """
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
