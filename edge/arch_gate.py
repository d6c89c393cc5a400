"""The EdgeExporter's check on the architecture a model ships to (`edge.verify`): run, recorded, in the verdict.

`verify_export` runs `edge.verify.verify_on_arch` on the eval examples of the accuracy gate and turns every
outcome into an `ArchCheck` (`passed`, `failed` or `not_run`, never an exception), which `apply_check` records in
`edge_metadata.json` (`arch_check`) and folds into the export's blessing.

Example (the EdgeExporter's executor):
    export = export_edge_model(saved_model, examples, options)
    if options.verify:
        export = verify_export(export, saved_model, examples, options)
    export.metadata["arch_check"]["status"]  # "passed", "failed" or "not_run"
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from edge.errors import EdgeError
from edge.verify import APP_CLIENT_ON_HOST, judge, verify_on_arch

if TYPE_CHECKING:
    from edge.export import EdgeExport
    from edge.options import EdgeOptions

Status = Literal["passed", "failed", "not_run"]


@dataclass(frozen=True)
class ArchCheck:
    """The EdgeExporter's record of one architecture check (`edge_metadata.json` → `arch_check`).

    Attributes:
        status: `passed`, `failed` (blocks the push) or `not_run` (blocks it when `edge.verify_required`).
        reason: One sentence: the figures and limits, or why it failed or did not run.
        details: The comparison, core, kernels and runtime facts (empty when not run).
    """

    status: Status
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, **self.details}


def verify_export(
    export: EdgeExport, saved_model: Path, examples: str | Path, options: EdgeOptions, label_offset: int = 0
) -> EdgeExport:
    """The export with the check `edge.verify` asks for run, recorded (`arch_check`) and in its verdict.

    The check runs on the eval examples the accuracy gate used (`edge.eval_samples`, the same seeded sample)
    and compares the target's accuracy with the SavedModel's. Nothing raises: a runtime that cannot be prepared
    is a check `not_run`, anything else that stops it a check `failed`.

    Args:
        export: The converted, evaluated and gated export.
        saved_model: Its SavedModel directory (for the preprocessing).
        examples: The data the export was evaluated on.
        options: The `edge` section (`verify`, `verify_cpu`, `min_arch_agreement`, `verify_required`, ...).
        label_offset: `data.label_offset`. Defaults to 0.
    """
    from edge.data import load_split
    from edge.inputs import read_preprocessing

    spec = read_preprocessing(saved_model)
    eval_data = load_split(
        examples,
        "eval",
        spec,
        limit=options.eval_samples,
        label_offset=label_offset,
        shuffle=options.eval_samples > 0,
    )
    check = check_arch(
        export.tflite, eval_data.frames, eval_data.labels, export.metadata["accuracy"]["saved_model"], options
    )
    return apply_check(export, check, options)


def check_arch(
    tflite: bytes, images: np.ndarray, labels: np.ndarray, reference_accuracy: float, options: EdgeOptions
) -> ArchCheck:
    """Runs the check of `options` (on `edge.verify_cpu`, XNNPACK, one thread on both sides); every outcome is an
    `ArchCheck`, none raises."""
    from edge import arch

    arches = ", ".join(options.verify)
    where = f"{arches} ({options.verify_cpu})"
    try:
        run = verify_on_arch(tflite, images, labels, options.verify_cpu, threads=1, report=arch.log_progress)
    except arch.RuntimeUnavailableError as error:
        return ArchCheck("not_run", f"{where} check not run: {error}")
    except EdgeError as error:
        return ArchCheck("failed", f"{where} check failed: {error}")
    passed, figures = judge(
        run.comparison, options.min_arch_agreement, reference_accuracy, options.max_accuracy_drop, arches
    )
    details = {
        "arch": arches,
        "cpu": run.core.name,
        "kernels": run.kernels,
        **run.comparison.to_json(),
        "runtime": run.runtime,
        "app_client": APP_CLIENT_ON_HOST,
    }
    return ArchCheck("passed" if passed else "failed", f"{where}: {figures}", details)


def apply_check(export: EdgeExport, check: ArchCheck, options: EdgeOptions) -> EdgeExport:
    """The export with the check recorded and in its verdict: blessed only if the accuracy gate passed and the
    check passed (or did not run and `edge.verify_required` is false)."""
    from edge.gate import GateResult

    allowed = check.status == "passed" or (check.status == "not_run" and not options.verify_required)
    blessed = export.gate.blessed and allowed
    reason = f"{export.gate.reason}; {check.reason}"
    if check.status == "not_run":
        reason += (
            "; edge.verify_required is false, so the model was pushed unverified"
            if allowed
            else "; edge.verify_required blocks the push (set it to false to push unverified)"
        )
    if export.gate.blessed and not blessed:
        reason += "; not pushed"
    gate = GateResult(blessed=blessed, drop=export.gate.drop, reason=reason)
    metadata = {**export.metadata, "arch_check": check.to_json(), "blessed": blessed, "reason": reason}
    return dataclasses.replace(export, gate=gate, metadata=metadata)
