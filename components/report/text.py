"""How the report writes numbers, sizes, durations, times and names that come from the data."""

from __future__ import annotations

import re
import time
from typing import Any

from foundation.paths import name_of
from foundation.shown_text import escape_controls

NOT_KNOWN = "—"
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Unicode's bidirectional formatting characters: in a class name they reorder the text around them (an RTL
override makes `exe.txt` read `txt.exe`), so the page shows them as escapes instead."""
NAME_LIMIT = 40
"""Characters of a class name shown in a table, a plot or under an image; the full name is in the tooltip."""


def visible(value: Any) -> str:
    """`value` as text with each bidi control written as its escape (`\\u202e`), so it cannot reorder the page, and
    every other control character too (`\\x1b`, `foundation.shown_text`): a page holds no raw ESC or BEL."""
    return escape_controls(BIDI_CONTROLS.sub(lambda match: f"\\u{ord(match.group()):04x}", str(value)))


def short_name(name: Any, limit: int = NAME_LIMIT) -> str:
    """A name from the data (a class name) made `visible` and cut to `limit` characters with `…`."""
    shown = visible(name)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def number(value: Any, digits: int = 4) -> str:
    """A float with `digits` decimals, an int as it is, `—` for None."""
    if value is None:
        return NOT_KNOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and digits == 0):
        return f"{int(value):,}"
    return f"{float(value):.{digits}f}"


def size(value: Any) -> str:
    """Bytes as KiB or MiB."""
    if value is None:
        return NOT_KNOWN
    if value < 1024 * 1024:
        return f"{value / 1024:.1f} KiB"
    return f"{value / 1024 / 1024:.2f} MiB"


def seconds(value: Any) -> str:
    """A duration: `0.4 s`, `12.3 s`, `4 min 05 s`."""
    if value is None:
        return NOT_KNOWN
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s"


def clock(epoch_seconds: Any) -> str:
    """A time since the epoch as local `YYYY-MM-DD HH:MM:SS`."""
    if epoch_seconds is None:
        return NOT_KNOWN
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_seconds))


def version_of(path: Any) -> str | None:
    """The version (last path element) of a pushed model directory."""
    return name_of(path) if path else None


def first_line(text: Any, limit: int = 400) -> str:
    """The first line of an error, at most `limit` characters."""
    line = str(text or "").strip().splitlines()[0] if str(text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
