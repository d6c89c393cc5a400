"""`tfxp doctor`: the compat state it reports must match this host, in text and JSON."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from components.trainer.precision import resolve_precision
from pipeline.cli import app, doctor

HOST_GLIBC = doctor.glibc_version()
OLD_GLIBC = HOST_GLIBC is not None and HOST_GLIBC < doctor.WHEEL_GLIBC


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _mlmd_imports() -> bool:
    """Ground truth for "applied": the MLMD extension loads in a fresh interpreter."""
    code = "from ml_metadata.metadata_store import metadata_store"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, env={**os.environ}).returncode == 0


def test_json_report_lists_versions_devices_and_precision(report: dict[str, Any]) -> None:
    assert report["python"] == ".".join(map(str, sys.version_info[:3]))
    assert report["versions"]["tfx"] == "1.21.0"
    assert report["versions"]["tensorflow"].startswith("2.21")
    assert set(doctor.DISTRIBUTIONS) == set(report["versions"])
    assert any(device["type"] == "CPU" for device in report["devices"])
    capabilities = [tuple(d["compute_capability"]) for d in report["devices"] if d["type"] == "GPU"]
    assert (report["precision_auto"]["policy"], report["precision_auto"]["reason"]) == resolve_precision(
        "auto", capabilities
    )
    assert report["problems"] == []


def test_compat_state_matches_this_host(report: dict[str, Any]) -> None:
    compat = report["glibc_compat"]
    assert report["glibc"] == (".".join(map(str, HOST_GLIBC)) if HOST_GLIBC else None)
    assert compat["needed"] == OLD_GLIBC
    if OLD_GLIBC:  # e.g. Debian 12 (glibc 2.36): needed, and applied exactly when MLMD really loads
        assert compat["applied"] == _mlmd_imports()
        assert compat["applied"], "run `make setup`: the compat step should have been applied on this host"
        assert compat["summary"].startswith("needed and applied")
        assert {item["package"] for item in compat["extensions"]} == set(doctor.COMPAT_PACKAGES)
        assert all(item["state"] == "patched" for item in compat["extensions"])
    else:
        assert compat["summary"].startswith("not needed")


def test_text_report_shows_the_compat_line(report: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "glibc compat" in result.output
    assert report["glibc_compat"]["summary"].split(" (")[0] in " ".join(result.output.split())
    assert "precision auto" in result.output


def _fake_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    extensions = {}
    for package in doctor.COMPAT_PACKAGES:
        extension = tmp_path / package / "sub" / f"{package}_extension.so"
        extension.parent.mkdir(parents=True)
        extension.write_bytes(b"\x7fELF patched " + package.encode())
        extensions[package] = extension
    monkeypatch.setattr(doctor, "_package_dir", lambda package: tmp_path / package)
    return extensions


def _mark(extension: Path, content: bytes | None = None) -> None:
    marker = {
        "extension": extension.name,
        "sha256": hashlib.sha256(content if content is not None else extension.read_bytes()).hexdigest(),
        "shimmed_symbols": ["__isoc23_strtol"],
        "weakened_versions": ["libc.so.6:GLIBC_2.38"],
    }
    (extension.parent / doctor.COMPAT_MARKER).write_text(json.dumps(marker))


def test_compat_status_applied_only_when_every_extension_has_a_matching_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extensions = _fake_packages(tmp_path, monkeypatch)
    status = doctor.compat_status((2, 36))
    assert (status["needed"], status["applied"]) == (True, False)
    assert "not patched" in status["summary"]
    assert "run `.venv/bin/python scripts/glibc_compat.py patch`" in status["summary"]

    for extension in extensions.values():
        _mark(extension)
    status = doctor.compat_status((2, 36))
    assert (status["needed"], status["applied"]) == (True, True)
    assert status["extensions"][0]["shimmed_symbols"] == ["__isoc23_strtol"]

    # A reinstall overwrote one extension: the marker no longer matches it.
    extensions["ml_metadata"].write_bytes(b"\x7fELF fresh from the wheel")
    status = doctor.compat_status((2, 36))
    assert (status["needed"], status["applied"]) == (True, False)
    assert "ml_metadata_extension.so: changed since patching" in status["summary"]


def test_compat_status_not_needed_on_new_glibc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_packages(tmp_path, monkeypatch)
    status = doctor.compat_status((2, 39))
    assert (status["needed"], status["applied"]) == (False, False)
    assert status["summary"].startswith("not needed")


def test_compat_status_reports_missing_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "_package_dir", lambda package: None)
    status = doctor.compat_status((2, 36))
    assert status["summary"] == (
        "needed, not applied: ml_metadata, tensorflow_data_validation not installed; "
        "run `rm .venv/.tfxp-setup && make setup`"
    )


def test_doctor_exits_non_zero_when_there_are_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "distribution_versions", lambda: dict.fromkeys(doctor.DISTRIBUTIONS))
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert "problem: tensorflow is not installed; run `rm .venv/.tfxp-setup && make setup`" in " ".join(
        result.output.split()
    )
