"""What every `tfxp` command shares: the output consoles, `error:` and `warning:` lines.

Command modules import these from here, never from `pipeline.cli.app`, which only names the commands.

A command reports bad input by raising a `foundation.errors.TfxpError` (`UserError` for what the CLI itself
checks); the root group (`pipeline.cli.app.LazyGroup`) catches it once and prints it with `fail`, exit 2.
A command raises `fail` itself only for another exit status (a failed run: 1).

User text (paths, names, values, error messages that quote them) is shown literally: never parsed as Rich
markup (`/data/[/x]` would crash the print, `[bold]x` would vanish) nor as emoji codes (`127.0.0.1:-1:` would
become a thumbs-down). The consoles never replace emoji codes; pass user text to `say`, `fail` or `warn`, as a
`rich.text.Text`, or escaped with `rich.markup.escape` inside a markup string.

Text from outside (a server's answer, a label, file metadata) may hold terminal control sequences (`ESC [ 2 J`
clears the screen, `\r` overwrites a line). The consoles show every control character escaped
(`foundation.shown_text.escape_controls`), whatever a command prints, so no command has to remember it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from foundation.errors import TfxpError
from foundation.shown_text import escape_controls, has_controls


class EscapingConsole(Console):
    """A Rich console that shows control characters escaped: in strings before Rich reads them (Rich itself drops
    `\r` and keeps ESC), and in every segment it renders (a `Text` or a table cell made elsewhere)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(escape_controls(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not has_controls(segment.text):
                yield segment
            else:
                yield Segment(escape_controls(segment.text), segment.style)


console = EscapingConsole(emoji=False)
error_console = EscapingConsole(stderr=True, emoji=False)


class UserError(TfxpError):
    """Bad input that the CLI itself finds (a combination of options, a missing model base path)."""


def say(line: str) -> None:
    """Prints `line` on stdout literally (no markup, no highlighting): a line that holds user text (paths, names)."""
    console.print(line, highlight=False, markup=False)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Prints `error: message` as one paragraph on stderr and returns the Exit to raise.

    Args:
        message: What went wrong and how to fix it; printed literally (no markup).
        code: The exit status; 2 (bad input) by default.

    Returns:
        The `typer.Exit` for the caller to raise, e.g. `raise fail("the run failed: ...", code=1) from None`.
    """
    error_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Prints `warning: message` as one paragraph on stderr; `message` is printed literally (no markup)."""
    error_console.print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)
