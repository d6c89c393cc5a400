"""What every `tfxp` command shares: the output consoles and the turning of user errors into exit 2.

Command modules import these from here, never from `pipeline.cli.app`, which only names the commands.

User text (paths, names, values, error messages that quote them) is shown literally: never parsed as Rich
markup (`/data/[/x]` would crash the print, `[bold]x` would vanish) nor as emoji codes (`127.0.0.1:-1:` would
become a thumbs-down). The consoles never replace emoji codes; pass user text to `fail`, as a `rich.text.Text`,
or escaped with `rich.markup.escape` inside a markup string.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

console = Console(emoji=False)
error_console = Console(stderr=True, emoji=False)

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Bad input from the user; the message says what, where and how to fix it."""


def fail(message: str, code: int = 2) -> typer.Exit:
    """Prints `message` as one paragraph on stderr and returns the Exit to raise.

    Args:
        message: What went wrong and how to fix it; printed literally (no markup) after `error:`.
        code: The exit status; 2 (bad input) by default.

    Returns:
        The `typer.Exit` for the caller to raise, e.g. `raise fail("no such file") from None`.
    """
    error_console.print(Text.assemble(("error: ", "bold red"), message), highlight=False, soft_wrap=True)
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
