"""`tfxp data inspect` reads every layout `tfxp run` reads (foundation.data.layout), with the run's label offset."""

from __future__ import annotations

from pathlib import Path

import pytest
from layout_fixtures import LAYOUTS, write_layout
from typer.testing import CliRunner

from components.data.inspect import inspect_data
from foundation.data.layout import DataSpec
from pipeline.cli import app


def table_rows(output: str) -> dict[str, list[str]]:
    """The rows of the last table in `output` printed for each name: name → the cells after it."""
    rows = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if len(cells) >= 3:
            rows[cells[1]] = cells[2:]
    return rows


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_inspect_reads_every_layout_tfxp_run_reads(tmp_path: Path, name: str) -> None:
    layout = LAYOUTS[name]
    root = write_layout(tmp_path / "data", layout)
    sets = [value for override in layout.overrides for value in ("--set", override)]
    result = CliRunner().invoke(app, ["data", "inspect", str(root), *sets], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert f"label offset {layout.offset}" in result.output
    expected = layout.counts()
    rows = table_rows(result.output)
    splits = list(expected)
    for label_name in layout.names():
        assert rows[label_name][: len(splits)] == [str(expected[split][label_name]) for split in splits], name
    assert rows["shards"][: len(splits)] == [str(len(layout.splits[split])) for split in splits]
    inspection = inspect_data(root, DataSpec(str(root), **_keys(layout.overrides)))
    assert inspection.total.counts == expected
    assert sorted(inspection.spans) == list(layout.spans)
    for span in layout.spans:
        assert inspection.spans[span].counts == layout.counts(f"span-{span}/")


def _keys(overrides: tuple[str, ...]) -> dict[str, str]:
    return {key.removeprefix("data."): value for key, _, value in (item.partition("=") for item in overrides)}


def test_inspect_honours_an_explicit_label_offset(tmp_path: Path) -> None:
    # 1-based labels without class names: `auto` cannot see the offset, `data.label_offset=1` says it.
    layout = LAYOUTS["train and validation folders, uncompressed, 1-based"]
    root = write_layout(tmp_path / "data", layout, texts=False)
    result = CliRunner().invoke(app, ["data", "inspect", str(root), "--set", "data.label_offset=1"], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = table_rows(result.output)
    assert rows["cat"][:2] == ["2", "0"] and rows["emu"][:2] == ["0", "1"]
    assert "label 3?" not in rows
    unshifted = CliRunner().invoke(app, ["data", "inspect", str(root)], terminal_width=200)
    assert table_rows(unshifted.output)["label 3?"][:2] == ["0", "1"]  # offset 0: label 3 is outside the map


def test_inspect_of_an_unrecognised_layout_lists_what_it_found(tmp_path: Path) -> None:
    (tmp_path / "labels.txt").write_text("a\nb\n")
    (tmp_path / "train").mkdir()
    result = CliRunner().invoke(app, ["data", "inspect", str(tmp_path)], terminal_width=300)
    assert result.exit_code == 2
    assert "found train/ (folder) (folders for train but none for eval or validation)" in result.output
