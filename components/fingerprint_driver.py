"""A TFX driver that puts a fingerprint of state outside the pipeline into the execution properties.

Some components depend on files that change outside TFX: the served versions under a TF Serving base path,
which every push and every operator's `rm` changes. TFX's local launcher runs a component's driver before it
computes the cache key, and the key includes the execution properties the driver returns: a driver that sets
one property to a fingerprint of that outside state makes the component rerun exactly when the state changed
and stay cached otherwise (with everything downstream of it that saw the same inputs).

Kubeflow's V2 runner ignores custom drivers.

Example:
    class ServedModelDriver(FingerprintDriver):
        FINGERPRINT_KEY = "served_fingerprint"

        def fingerprint(self, execution_info):
            return served_fingerprint(execution_info.exec_properties["base_path"])
"""

from __future__ import annotations

from typing import Any, ClassVar

from tfx.dsl.components.base import base_driver
from tfx.orchestration import data_types_utils
from tfx.orchestration.portable import base_driver as portable_driver
from tfx.proto.orchestration import driver_output_pb2


class FingerprintDriver(base_driver.BaseDriver, portable_driver.BaseDriver):
    """Sets the execution property `FINGERPRINT_KEY` to `fingerprint(execution_info)` (TFX's local launcher
    calls `run`); subclasses name the property and compute the fingerprint."""

    FINGERPRINT_KEY: ClassVar[str]

    def __init__(self, metadata_handle: Any) -> None:
        base_driver.BaseDriver.__init__(self, metadata_handle)
        portable_driver.BaseDriver.__init__(self, metadata_handle)

    def fingerprint(self, execution_info: Any) -> str:
        """A short string that changes exactly when the outside state the component depends on changes."""
        raise NotImplementedError

    def run(self, execution_info: Any) -> driver_output_pb2.DriverOutput:
        """Returns only the fingerprint; the inputs and outputs are left as the launcher made them."""
        result = driver_output_pb2.DriverOutput()
        data_types_utils.set_metadata_value(
            result.exec_properties[self.FINGERPRINT_KEY], self.fingerprint(execution_info)
        )
        return result
