"""docs/architecture.md is the map: it names every product package and module by its path, so a newcomer finds
each one there (that every path it names exists is `tests/project/test_docs.py`'s check)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("foundation", "components", "serving", "edge", "pipeline")
MAP = REPO / "docs" / "architecture.md"


def product_paths() -> list[str]:
    modules = [path for package in PRODUCT for path in (REPO / package).rglob("*.py")]
    packages = {f"{path.parent.relative_to(REPO)}/" for path in modules}
    return sorted(packages) + sorted(str(path.relative_to(REPO)) for path in modules if path.name != "__init__.py")


def test_the_map_names_every_product_package_and_module_by_its_path() -> None:
    text = MAP.read_text()
    paths = product_paths()
    assert len(paths) > 150, "the rule finds too few modules: is PRODUCT the list of product packages?"
    missing = [path for path in paths if f"`{path}`" not in text]
    assert not missing, (
        f"docs/architecture.md does not name {len(missing)} product module(s) or package(s); add a line for each "
        f"in its package map (python3 scripts/architecture_map.py prints the lines from the docstrings): {missing}"
    )
