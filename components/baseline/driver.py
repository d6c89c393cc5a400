"""The ServedBaseline's driver: its cache key follows what is served.

The serving base path changes outside TFX (every push, or an operator removing a version), so the component
must not reuse an old baseline: this driver sets `served_fingerprint` to the served version (and its push
identity, size and time), so the component reruns exactly when the served model changed and is cached otherwise
(see `components.fingerprint_driver`).

Kubeflow's V2 runner ignores custom drivers; `pipeline.kubeflow.compiler.compile` makes the task uncached there.
"""

from __future__ import annotations

import hashlib
from typing import Any

from components.baseline.served import served_fingerprint
from components.baseline.spec import BASE_PATH_KEY, FINGERPRINT_KEY, LABELS_PATH_KEY
from components.fingerprint_driver import FingerprintDriver
from foundation.paths import read_bytes


class ServedModelDriver(FingerprintDriver):
    """Sets `served_fingerprint` from the serving base path and the run's label map (whether the served version is
    compared depends on both)."""

    FINGERPRINT_KEY = FINGERPRINT_KEY

    def fingerprint(self, execution_info: Any) -> str:
        """`components.baseline.served.served_fingerprint` of the `base_path` execution property, and a digest of
        the `labels_path` label map when one is set."""
        properties = execution_info.exec_properties
        served = served_fingerprint(properties[BASE_PATH_KEY])
        labels_path = properties.get(LABELS_PATH_KEY) or ""
        if not labels_path:
            return served
        try:
            labels = hashlib.sha256(read_bytes(labels_path)).hexdigest()[:16]
        except OSError:  # the executor then fails on it, naming the file
            labels = "unreadable"
        return f"{served}:labels:{labels}"
