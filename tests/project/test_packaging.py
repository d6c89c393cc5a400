"""pyproject.toml says what `make setup` and the build backend take (issue 35, "Setup").

setuptools warns about a `project.license` table and stops building one after 2027-02-18; PEP 639's SPDX string
is read by setuptools >= 77 only, which `[build-system]` asks for (pip builds in an isolated environment: the
venv's own setuptools, 65.5 from Python 3.11's ensurepip, is not used). `requires-python` names the Python the
Makefile's setup demands.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# setuptools 77.0 is the first to read `project.license` as an SPDX expression (PEP 639).
PEP_639_LAST_WITHOUT = "76.1"


def test_the_license_is_an_spdx_expression_that_the_pinned_backend_reads() -> None:
    project = PYPROJECT["project"]
    assert isinstance(project["license"], str) and re.fullmatch(r"[A-Za-z0-9.+-]+", project["license"])
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]  # PEP 639 forbids both
    setuptools = next(Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    # No release before 77 may build it (Python 3.11's own venv brings setuptools 65.5, which refuses the string).
    assert not [old for old in ("65.5.0", PEP_639_LAST_WITHOUT) if old in setuptools.specifier]


def test_requires_python_is_the_python_make_setup_demands() -> None:
    makefile = (ROOT / "Makefile").read_text()
    demanded = re.search(r"v == \((\d+), (\d+)\)", makefile)
    assert demanded, "the Makefile's setup no longer checks the Python version this test reads"
    version = ".".join(demanded.groups())
    supported = SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert version in supported
    minor = int(demanded.group(2))
    # TFX 1.21's kfp extra applies only below 3.12 (docs/architecture.md, "Stack"), and the pins need 3.11.
    assert f"3.{minor - 1}" not in supported and f"3.{minor + 1}" not in supported
    assert PYPROJECT["tool"]["mypy"]["python_version"] == version
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py" + version.replace(".", "")
