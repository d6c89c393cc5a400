"""The one error type of the edge package (no heavy imports, so the CLI can catch it cheaply)."""

from __future__ import annotations

from foundation.errors import TfxpError


class EdgeError(TfxpError, ValueError):
    """Bad edge input or a model that cannot become a device model; says what, where and how to fix it."""
