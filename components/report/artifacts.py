"""The RunReport's output artifact type.

The type name is `components.<Name>`: KubeflowV2DagRunner encodes a custom type's name as its KFP schema title,
and TFX's v2 container entrypoint imports that title as a class path, which `components/__init__.py` resolves.
The KFP v2 UI shows only `system.HTML` artifacts as pages, a title TFX's entrypoint cannot import (there is no
top-level `system` module), so the page is also written next to the pushed model (see `component.RunReport`).
"""

from __future__ import annotations

from tfx.types.artifact import Artifact


class HtmlReport(Artifact):
    """A directory holding `report.html`, the run report; custom properties `published_path` (the copy next to
    the pushed model, "" when nothing was pushed) and `problems` (outputs the report could not read)."""

    TYPE_NAME = "components.HtmlReport"
