"""The error of a serving setup the user must fix, as opposed to a request's status (`serving.errors`)."""

from __future__ import annotations

from foundation.errors import TfxpError


class ServingConfigError(TfxpError, ValueError):
    """A serving config, models.config file, version policy or client call the user must change; says which."""
