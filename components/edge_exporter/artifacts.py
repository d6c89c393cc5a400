"""The EdgeExporter's output artifact types.

Type names are `components.<Name>`: KubeflowV2DagRunner encodes a custom type's name as its KFP schema title
(`<namespace>.<Name>`), and TFX's v2 container entrypoint imports that title as a class path, which
`components/__init__.py` resolves.
"""

from __future__ import annotations

from tfx.types.artifact import Artifact


class EdgeModel(Artifact):
    """A device model directory: `model.tflite`, `labels.txt`, `edge_metadata.json`.

    When the upstream model was not blessed it holds only `edge_metadata.json`, saying so.
    Custom properties: `blessed` (1/0), `pushed` (1/0), `pushed_path`, `reason`, `mode`.
    """

    TYPE_NAME = "components.EdgeModel"


class EdgeBlessing(Artifact):
    """The accuracy gate's verdict: an empty `BLESSED` or `NOT_BLESSED` file, custom properties `blessed`
    (1/0), `accuracy_drop` and `reason`."""

    TYPE_NAME = "components.EdgeBlessing"
