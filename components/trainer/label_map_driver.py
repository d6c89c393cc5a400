"""The Trainer's driver: its cache key follows the label map's content, not only its path.

The Trainer reads the label map (`labels_path` in its `custom_config`) and puts it into the SavedModel's assets;
TFX's cache key holds the path only, so a class renamed in `labels.txt` left the Trainer cached and the old names
served ("no new data"). This driver sets `label_map_fingerprint` to a digest of the file's bytes: a rename
retrains, the model holds the new names, and its model identity (`foundation.model_identity`, which hashes the
label map) makes the Pusher publish it as a new version. The same file again keeps the Trainer cached.

Kubeflow's V2 runner ignores custom drivers: there the uncached InputFingerprint task computes the same digest
(`label_map_fingerprint`) and hands it to the Trainer as `tfxp_cache_labels` (`pipeline.kubeflow.compiler.cache_keys`).
"""

from __future__ import annotations

from typing import Any

from tfx.types import standard_component_specs

from components.fingerprint_driver import FingerprintDriver
from foundation.bounded import parse_json
from foundation.contract import label_map_digest

LABEL_MAP_FINGERPRINT_KEY = "label_map_fingerprint"
# The `custom_config` key naming the label map (`components.trainer.options.RunOptions.labels_path`).
LABELS_PATH_KEY = "labels_path"


def label_map_fingerprint(custom_config: Any) -> str:
    """`foundation.contract.label_map_digest` of the label map `custom_config` names.

    Args:
        custom_config: The Trainer's `custom_config` execution property (JSON text or a mapping).
    """
    config = parse_json(custom_config) if isinstance(custom_config, str) else custom_config
    labels_path = config.get(LABELS_PATH_KEY) if isinstance(config, dict) else None
    return label_map_digest(labels_path if isinstance(labels_path, str) else None)


class LabelMapDriver(FingerprintDriver):
    """Sets `label_map_fingerprint` from the label map the Trainer's `custom_config` names."""

    FINGERPRINT_KEY = LABEL_MAP_FINGERPRINT_KEY

    def fingerprint(self, execution_info: Any) -> str:
        """`label_map_fingerprint` of the `custom_config` execution property."""
        return label_map_fingerprint(execution_info.exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY))
