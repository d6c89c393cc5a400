"""Text from outside (server answers, labels, file metadata, error bodies) as tfxp shows it: control characters
escaped, so what a server or a file says cannot drive the user's terminal.

A terminal obeys what it is sent: `ESC [ 2 J` clears the screen, `\\r` moves back to overwrite what a line said,
an OSC sequence sets the window title or a hyperlink, and the 8-bit C1 codes (`\\x9b` is CSI) do the same on many
terminals. Rich drops only BEL, BS, VT, FF and CR. So `escape_controls` writes every C0 control but the line
break and the tab, DEL, every C1 control and the bidirectional overrides (which reorder a line on screen) as the
escape Python writes for it (`\\x1b`, `\\r`, `\\x9b`, `\\u202e`), keeping all other Unicode as it is. The CLI's
consoles apply it to everything they print (`pipeline.cli.console`).

Example:
    escape_controls("a\\x1b[2Jb\\rc")  # 'a\\\\x1b[2Jb\\\\rc', shown as a\\x1b[2Jb\\rc
"""

from __future__ import annotations

import re

# C0 but \t and \n, DEL, C1, and the bidirectional embeddings, overrides and isolates (which reorder what follows
# on screen, CVE-2021-42574).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    character = match.group()
    code = ord(character)
    return _NAMED.get(character) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_controls(text: str) -> str:
    """`text` with every control character but `\\n` and `\\t` written as its escape (`\\x1b`, `\\r`)."""
    return _CONTROL.sub(_escaped, text)


def has_controls(text: str) -> bool:
    """Whether `escape_controls` would change `text`."""
    return _CONTROL.search(text) is not None
