"""The one exception type of the data tools."""

from __future__ import annotations


class DataError(ValueError):
    """Bad data-set input or output; the message says what, where and how to fix it."""
