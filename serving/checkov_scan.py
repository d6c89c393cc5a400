"""checkov, run with `serving/checkov.yaml` on what tfxp writes (deploy assets, the Dockerfile).

Its skips and soft failures are read from that file with their reasons (`checkov_exceptions`); a check tool that is
not installed is a `CheckToolError` saying how to install it (`serving.k8s_check` raises it for kubernetes-validate).

Example:
    result = run_checkov(Path("deploy"), "kubernetes")
    result.failed  # the failed checks; `checkov_exceptions()` says which of them are soft failures
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from foundation.bounded import parse_json
from foundation.errors import TfxpError
from foundation.yaml_files import read_yaml

CHECKOV_CONFIG = Path(__file__).with_name("checkov.yaml")
# Where `make setup` installs checkov: a venv of its own, as its pins conflict with constraints.txt.
CHECKOV_VENV_BINARY = Path(__file__).resolve().parents[1] / ".venv-checkov" / "bin" / "checkov"


class CheckToolError(TfxpError, RuntimeError):
    """A tool the check needs is not installed; the message says how to install it."""


@dataclass(frozen=True)
class CheckovFinding:
    check_id: str
    name: str
    resource: str


@dataclass(frozen=True)
class CheckovResult:
    """checkov's verdict on one directory or file."""

    version: str
    passed: int
    failed: tuple[CheckovFinding, ...]


def find_checkov() -> str | None:
    """checkov's executable: $TFXP_CHECKOV, else the repository's `.venv-checkov`, else `checkov` on PATH."""
    if os.environ.get("TFXP_CHECKOV"):
        return os.environ["TFXP_CHECKOV"]
    if CHECKOV_VENV_BINARY.is_file():
        return str(CHECKOV_VENV_BINARY)
    return shutil.which("checkov")


def checkov_exceptions(config: Path = CHECKOV_CONFIG) -> dict[str, tuple[str, str]]:
    """check id → (`skip-check` or `soft-fail-on`, the reason on its line) from checkov's config file."""
    listed = read_yaml(config)
    reasons = dict(re.findall(r"^\s*-\s*(CKV\w+)\s*#\s*(.*?)\s*$", config.read_text(), flags=re.MULTILINE))
    return {
        check_id: (kind, reasons.get(check_id, ""))
        for kind in ("skip-check", "soft-fail-on")
        for check_id in listed.get(kind) or []
    }


def run_checkov(target: Path, framework: str, checkov: str | None = None) -> CheckovResult:
    """Runs checkov with `serving/checkov.yaml` on a directory or file and returns what it found.

    Args:
        target: A directory (scanned recursively) or one file.
        framework: checkov's framework, `kubernetes` or `dockerfile`.
        checkov: The executable; None = `find_checkov()`.

    Raises:
        CheckToolError: no checkov found, or it did not answer in JSON.
    """
    executable = checkov or find_checkov()
    if executable is None:
        raise CheckToolError(
            "checkov is not installed; `make setup` puts it in .venv-checkov (its pins conflict with "
            "constraints.txt), or point TFXP_CHECKOV at a checkov executable"
        )
    command = [executable, "--config-file", str(CHECKOV_CONFIG), "--framework", framework, "-o", "json"]
    command += ["-d" if target.is_dir() else "-f", str(target)]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    try:
        reports = parse_json(result.stdout)
    except ValueError:  # not JSON, or nested too deep to read
        raise CheckToolError(f"checkov ({executable}) did not report in JSON: {result.stderr[-2000:]}") from None
    passed, failed, version = 0, [], ""
    for report in reports if isinstance(reports, list) else [reports]:
        summary = report.get("summary", report)  # a scan that found nothing to check prints the summary only
        passed += summary.get("passed", 0)
        version = summary.get("checkov_version", version)
        failed += [
            CheckovFinding(item["check_id"], item["check_name"], item["resource"])
            for item in report.get("results", {}).get("failed_checks", [])
        ]
    return CheckovResult(version, passed, tuple(failed))
