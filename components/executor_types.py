"""The argument types of TFX's executor API (`BaseExecutor.Do`), named once for tfxp's executors.

Example:
    def Do(self, input_dict: ArtifactDict, output_dict: ArtifactDict, exec_properties: ExecProperties) -> None:
"""

from __future__ import annotations

from typing import Any

from tfx import types

ArtifactDict = dict[str, list[types.Artifact]]
"""A component's inputs or outputs as TFX hands them to `Do`: channel key → the channel's artifacts."""

ExecProperties = dict[str, Any]
"""A component's execution properties (parameters) as TFX hands them to `Do`: key → value."""
