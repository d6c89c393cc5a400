"""The ServedBaseline's driver: its cache key follows what is served.

The serving base path changes outside TFX (every push, or an operator removing a version), so the component
must not reuse an old baseline. TFX's local launcher runs a component's driver before it computes the cache
key, and the key includes the execution properties the driver returns: this driver sets `served_fingerprint`
to the served version (and its push identity, size and time), so the component reruns exactly when the served
model changed and is cached otherwise (with everything downstream of it that saw the same inputs).

Kubeflow's V2 runner ignores custom drivers; `pipeline.kubeflow.compile` makes the task uncached there.
"""

from __future__ import annotations

from typing import Any

from tfx.dsl.components.base import base_driver
from tfx.orchestration import data_types_utils
from tfx.orchestration.portable import base_driver as portable_driver
from tfx.proto.orchestration import driver_output_pb2

from components.baseline.served import served_fingerprint
from components.baseline.spec import BASE_PATH_KEY, FINGERPRINT_KEY


class ServedModelDriver(base_driver.BaseDriver, portable_driver.BaseDriver):
    """Sets `served_fingerprint` from the serving base path (TFX's local launcher calls `run`)."""

    def __init__(self, metadata_handle: Any) -> None:
        base_driver.BaseDriver.__init__(self, metadata_handle)
        portable_driver.BaseDriver.__init__(self, metadata_handle)

    def run(self, execution_info: Any) -> driver_output_pb2.DriverOutput:
        """Returns only the fingerprint; the inputs and outputs are left as the launcher made them."""
        result = driver_output_pb2.DriverOutput()
        fingerprint = served_fingerprint(execution_info.exec_properties[BASE_PATH_KEY])
        data_types_utils.set_metadata_value(result.exec_properties[FINGERPRINT_KEY], fingerprint)
        return result
