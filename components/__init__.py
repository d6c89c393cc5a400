"""The TFX components: their component/spec/executor/driver glue, the Trainer's `run_fn`, and the plain modules
behind them (data tools, training, validation, report, notice, multi-node training).

The custom artifact types are reachable as `components.<Type>` because KubeflowV2DagRunner names a custom type
by its `TYPE_NAME`, and TFX's v2 container entrypoint imports that name as a class path (`module.Class`, one
dot). They load lazily, so importing a plain module of this package loads no TFX.
"""

from __future__ import annotations

from typing import Any

# Artifact type name (the class path TFX's v2 entrypoint imports) → module that defines it.
_ARTIFACT_TYPES = {
    "EdgeModel": "components.edge_exporter.artifacts",
    "EdgeBlessing": "components.edge_exporter.artifacts",
    "HtmlReport": "components.report.artifacts",
}


def __getattr__(name: str) -> Any:
    if name in _ARTIFACT_TYPES:
        import importlib

        return getattr(importlib.import_module(_ARTIFACT_TYPES[name]), name)
    raise AttributeError(f"module 'components' has no attribute {name!r}")
