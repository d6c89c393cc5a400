"""What the LoadCheck's InfraBlessing holds, written as TFX's InfraValidator writes it, and read back.

TFX's InfraValidator (tfx/components/infra_validator/executor.py, `_mark_blessed` / `_mark_not_blessed`) sets the
int custom property `blessed` to 1 or 0 and writes an empty `INFRA_BLESSED` or `INFRA_NOT_BLESSED` file; TFX's
Pusher reads the property (`model_utils.is_infra_validated`) and skips the push at 0. tfxp adds the one-line
`reason`, the `server` used and `load_check.json` (`serving.load_check.LoadCheckResult`). No TFX import here, so
the run summary reads the blessing without loading TFX.

Example:
    record_result(blessing_artifact, result)
    read_result(blessing_artifact.uri).reason
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundation import paths
from foundation.bounded import read_document
from serving.load_check import LoadCheckResult

if TYPE_CHECKING:
    from tfx import types

COMPONENT_ID = "LoadCheck"
"""The component's id, and its task's name on Kubeflow."""
BLESSING_KEY = "blessing"
BLESSED_PROPERTY = "blessed"
REASON_PROPERTY = "reason"
SERVER_PROPERTY = "server"
BLESSED_FILE = "INFRA_BLESSED"
NOT_BLESSED_FILE = "INFRA_NOT_BLESSED"
RESULT_FILE = "load_check.json"


def record_result(blessing: types.Artifact, result: LoadCheckResult) -> None:
    """Writes `result` into the InfraBlessing: the `blessed` property and the marker file as TFX's InfraValidator
    does, the reason, the server and `load_check.json`."""
    paths.makedirs(blessing.uri)
    paths.write_text(f"{blessing.uri}/{RESULT_FILE}", result.to_json() + "\n")
    paths.write_text(f"{blessing.uri}/{BLESSED_FILE if result.passed else NOT_BLESSED_FILE}", "")
    blessing.set_int_custom_property(BLESSED_PROPERTY, int(result.passed))
    blessing.set_string_custom_property(REASON_PROPERTY, result.reason)
    blessing.set_string_custom_property(SERVER_PROPERTY, result.server)


def read_result(blessing_uri: str) -> LoadCheckResult:
    """The result a LoadCheck recorded in the InfraBlessing at `blessing_uri`.

    Raises:
        OSError, ValueError, TypeError: `load_check.json` is missing or not a LoadCheckResult's JSON.
    """
    path = f"{blessing_uri.rstrip('/')}/{RESULT_FILE}"
    return LoadCheckResult.from_json(read_document(path, f"LoadCheck result {path}"))
