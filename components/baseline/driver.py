"""The ServedBaseline's driver: its cache key follows what is served.

The serving base path changes outside TFX (every push, or an operator removing a version), so the component
must not reuse an old baseline: this driver sets `served_fingerprint` to the served version (and its push
identity, size and time), so the component reruns exactly when the served model changed and is cached otherwise
(see `components.fingerprint_driver`).

Kubeflow's V2 runner ignores custom drivers; `pipeline.kubeflow.compile` makes the task uncached there.
"""

from __future__ import annotations

from typing import Any

from components.baseline.served import served_fingerprint
from components.baseline.spec import BASE_PATH_KEY, FINGERPRINT_KEY
from components.fingerprint_driver import FingerprintDriver


class ServedModelDriver(FingerprintDriver):
    """Sets `served_fingerprint` from the serving base path."""

    FINGERPRINT_KEY = FINGERPRINT_KEY

    def fingerprint(self, execution_info: Any) -> str:
        """`components.baseline.served.served_fingerprint` of the `base_path` execution property."""
        return served_fingerprint(execution_info.exec_properties[BASE_PATH_KEY])
