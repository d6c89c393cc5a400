"""`tfxp doctor`: versions, glibc and its compat step, devices, and the precision `auto` picks.

The compat state is read from the marker files `scripts/glibc_compat.py patch` writes next to
each patched extension module (`tfxp_glibc_compat.json`), and checked against the extension's
current SHA-256, so a reinstalled (unpatched) package is reported as such.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from foundation.bounded import parse_json, read_document
from pipeline.cli.console import console

# Distributions whose versions decide whether the stack works (docs/architecture.md "Stack").
DISTRIBUTIONS = (
    "tensorflow",
    "tf-keras",
    "tfx",
    "apache-beam",
    "tensorflow-model-analysis",
    "tensorflow-data-validation",
    "ml-metadata",
    "kfp",
    "tensorflow-serving-api",
    "ai-edge-litert",
    "protobuf",
)
# Must match scripts/glibc_compat.py: the wheels' glibc floor, the patched packages, the marker name.
WHEEL_GLIBC = (2, 39)
COMPAT_PACKAGES = ("ml_metadata", "tensorflow_data_validation")
COMPAT_MARKER = "tfxp_glibc_compat.json"


def distribution_versions() -> dict[str, str | None]:
    """Installed version of each stack distribution; None when it is not installed."""
    versions: dict[str, str | None] = {}
    for name in DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def glibc_version() -> tuple[int, int] | None:
    """The running glibc's (major, minor); None on a non-glibc host."""
    match = re.search(r"(\d+)\.(\d+)", os.confstr("CS_GNU_LIBC_VERSION") or "") if hasattr(os, "confstr") else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _package_dir(package: str) -> Path | None:
    # find_spec on a top-level package locates it without importing it.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _extension_state(extension: Path) -> dict[str, Any]:
    marker_path = extension.parent / COMPAT_MARKER
    state: dict[str, Any] = {"extension": str(extension), "marker": str(marker_path)}
    if not marker_path.exists():
        return {**state, "state": "not patched"}
    try:
        marker = parse_json(read_document(marker_path, str(marker_path)))
    except (OSError, ValueError) as error:  # ValueError: not JSON, or nested too deep
        return {**state, "state": "marker unreadable", "detail": str(error)}
    if marker.get("sha256") != hashlib.sha256(extension.read_bytes()).hexdigest():
        return {**state, "state": "changed since patching", "detail": "the extension no longer matches the marker"}
    return {
        **state,
        "state": "patched",
        "shimmed_symbols": marker.get("shimmed_symbols", []),
        "weakened_versions": marker.get("weakened_versions", []),
    }


def compat_status(glibc: tuple[int, int] | None) -> dict[str, Any]:
    """Whether the glibc compat step is needed here and whether it is applied to every extension."""
    needed = sys.platform.startswith("linux") and glibc is not None and glibc < WHEEL_GLIBC
    extensions: list[dict[str, Any]] = []
    missing_packages = []
    for package in COMPAT_PACKAGES:
        package_dir = _package_dir(package)
        if package_dir is None:
            missing_packages.append(package)
            continue
        found = sorted(package_dir.rglob("*_extension.so"))
        if not found:
            missing_packages.append(package)
        extensions.extend({"package": package, **_extension_state(path)} for path in found)
    all_patched = bool(extensions) and all(item["state"] == "patched" for item in extensions)
    if not needed:
        summary = "not needed (glibc >= 2.39 installs the wheels as published)"
    elif missing_packages:
        summary = (
            f"needed, not applied: {', '.join(missing_packages)} not installed; "
            "run `rm .venv/.tfxp-setup && make setup`"
        )
    elif all_patched:
        summary = f"needed and applied ({len(extensions)} extension modules patched and unchanged)"
    else:
        broken = [
            f"{Path(item['extension']).name}: {item['state']}" for item in extensions if item["state"] != "patched"
        ]
        summary = (
            f"needed, not applied: {'; '.join(broken)}; "
            "run `.venv/bin/python scripts/glibc_compat.py patch` (or `rm .venv/.tfxp-setup && make setup`)"
        )
    return {
        "needed": needed,
        "applied": needed and not missing_packages and all_patched,
        "summary": summary,
        "extensions": extensions,
    }


def visible_devices() -> list[dict[str, Any]]:
    """TensorFlow's physical devices, with name and compute capability for GPUs."""
    import tensorflow as tf

    devices = []
    for device in tf.config.list_physical_devices():
        entry: dict[str, Any] = {"name": device.name, "type": device.device_type}
        if device.device_type == "GPU":
            details = tf.config.experimental.get_device_details(device)
            capability = details.get("compute_capability")
            entry["device_name"] = details.get("device_name", "")
            entry["compute_capability"] = list(capability) if capability else None
        devices.append(entry)
    return devices


def collect_report() -> dict[str, Any]:
    """Everything `tfxp doctor` prints, as plain data (what `--json` writes)."""
    from components.trainer.precision import resolve_precision

    glibc = glibc_version()
    versions = distribution_versions()
    compat = compat_status(glibc)
    devices = visible_devices() if versions["tensorflow"] else []
    capabilities = [tuple(d["compute_capability"]) for d in devices if d.get("compute_capability")]
    policy, reason = resolve_precision("auto", capabilities)  # type: ignore[arg-type]
    problems = [
        f"{name} is not installed; run `rm .venv/.tfxp-setup && make setup`"
        for name, version in versions.items()
        if not version
    ]
    if compat["needed"] and not compat["applied"]:
        problems.append(f"glibc compat step {compat['summary']}")
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "glibc": ".".join(map(str, glibc)) if glibc else None,
        "versions": versions,
        "glibc_compat": compat,
        "devices": devices,
        "precision_auto": {"policy": policy, "reason": reason},
        "problems": problems,
    }


def _print_report(report: dict[str, Any]) -> None:
    table = Table(title="tfxp doctor", show_header=False, title_justify="left")
    table.add_column("item", style="bold")
    table.add_column("value")
    table.add_row("python", f"{report['python']} ({sys.executable})")
    table.add_row("platform", report["platform"])
    table.add_row("glibc", report["glibc"] or "not glibc")
    for name, version in report["versions"].items():
        table.add_row(name, version or "[red]not installed[/]")
    compat = report["glibc_compat"]
    colour = "red" if compat["needed"] and not compat["applied"] else "green"
    table.add_row("glibc compat", f"[{colour}]{compat['summary']}[/]")
    for item in compat["extensions"]:
        table.add_row("", f"{item['package']}/{Path(item['extension']).name}: {item['state']}")
    for device in report["devices"]:
        capability = device.get("compute_capability")
        detail = (
            f" {device.get('device_name', '')}, compute capability {capability[0]}.{capability[1]}"
            if capability
            else ""
        )
        table.add_row("device", f"{device['name']}{detail}")
    if not report["devices"]:
        table.add_row("device", "[red]none (TensorFlow not importable)[/]")
    auto = report["precision_auto"]
    table.add_row("precision auto", f"{auto['policy']} — {auto['reason']}")
    console.print(table)
    for problem in report["problems"]:
        console.print(f"[bold red]problem:[/] {problem}", highlight=False)


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Versions, glibc and its compat step, visible devices, and which precision `auto` picks."""
    report = collect_report()
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        _print_report(report)
    if report["problems"]:
        raise typer.Exit(1)
