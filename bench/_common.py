"""What every benchmark under bench/ shares: the `--out` argument, the command line and machine it records, and
writing its JSON report. Imported by the scripts as `_common` (they run as `python bench/NAME.py`, so bench/ is on
the path); `make bench` runs every script here but this one."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any


def bench_parser(description: str, report_file: str) -> argparse.ArgumentParser:
    """An argument parser with `description` as written (line breaks kept) and `--out DIR` for `report_file`."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help=f"Directory for {report_file}.")
    return parser


def command_line(argv: list[str] | None = None) -> str:
    """The command that reruns this benchmark from the repository root (`argv`: its arguments, default sys.argv's)."""
    arguments = argv if argv is not None else sys.argv[1:]
    return " ".join([".venv/bin/python", f"bench/{Path(sys.argv[0]).name}", *arguments])


def machine() -> dict[str, Any]:
    """The CPUs, platform and load average the numbers were measured on."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()}


def write_report(out: Path, report_file: str, report: dict[str, Any]) -> Path:
    """Writes `report` as indented JSON to `out/report_file` (creating `out`); returns the file's path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / report_file
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path
