"""Prints the package map of docs/architecture.md from the code: one line per package and module, its path and
the first sentence of its docstring (tests/project/test_architecture_map.py checks that the map names every one).

Usage: python3 scripts/architecture_map.py [PACKAGE...]
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("foundation", "components", "serving", "edge", "pipeline")


def first_sentence(path: Path) -> str:
    """The first sentence of the module's docstring, on one line; `(no docstring)` when there is none."""
    doc = ast.get_docstring(ast.parse(path.read_text())) if path.exists() else None
    if not doc:
        return "(no docstring)"
    text = " ".join(doc.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?[.:;])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".:;")


def package_map(package: str) -> list[str]:
    """The map's lines for one top-level package, sub-packages after their parent."""
    lines = []
    for folder in sorted({path.parent for path in (REPO / package).rglob("*.py")}):
        lines.append(f"- **`{folder.relative_to(REPO)}/`**: {first_sentence(folder / '__init__.py')}.")
        for module in sorted(folder.glob("*.py")):
            if module.name != "__init__.py":
                lines.append(f"  - `{module.relative_to(REPO)}`: {first_sentence(module)}.")
    return lines


if __name__ == "__main__":
    for name in sys.argv[1:] or PRODUCT:
        print("\n".join(package_map(name)))
