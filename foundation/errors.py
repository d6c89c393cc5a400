"""The base class of every error whose message is meant for the user (pure Python, so any package imports it).

A `TfxpError` says what is wrong, where (file, key, option) and how to fix it. The `tfxp` CLI catches it once,
at its root (`pipeline.cli.app.LazyGroup.invoke`), and prints `error: <message>` with exit status 2; any other
exception is a bug and keeps its traceback. Subclasses keep their other bases (`ValueError`, `RuntimeError`), so
code that catches those still catches them.
"""

from __future__ import annotations


class TfxpError(Exception):
    """Bad input or setup the user can fix; the message says what, where and how to fix it."""
