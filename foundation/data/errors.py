"""The one exception type of the data tools."""

from __future__ import annotations

from foundation.errors import TfxpError


class DataError(TfxpError, ValueError):
    """Bad data-set input or output; the message says what, where and how to fix it."""
