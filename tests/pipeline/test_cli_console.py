"""User text in CLI messages is shown literally: no Rich markup, no emoji codes (issue 15, item 11)."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.cli.console import fail

TRICKY = "/data/[/x] /data/[bold]x [red]red[/red] :-1: :smile: '^[a-z0-9][a-z0-9-]{0,62}$' \\[escaped]"


def test_fail_prints_the_message_character_for_character(capsys: pytest.CaptureFixture[str]) -> None:
    exit_ = fail(TRICKY)
    assert isinstance(exit_, typer.Exit) and exit_.exit_code == 2
    assert capsys.readouterr().err == f"error: {TRICKY}\n"


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize("path", ["/data/[/x]", "/data/[bold]x", "/data/:-1:x"])
def test_a_data_path_with_markup_or_emoji_codes_is_reported_as_typed(path: str) -> None:
    code, output = run_cli("run", "--set", f"data.path={path}")
    assert code == 2
    assert f"data.path {path} is not a directory" in output
    assert "MarkupError" not in output and "Traceback" not in output and "👎" not in output


def test_the_pipeline_name_pattern_is_shown_whole() -> None:
    code, output = run_cli("run", "--set", "pipeline.name=Bad Name!")
    assert code == 2
    assert "String should match pattern '^[a-z0-9][a-z0-9-]{0,62}$'" in output


def test_a_negative_port_prints_no_emoji() -> None:
    code, output = run_cli("serve", "--rest-port", "-1")
    assert code == 2
    assert "-1 is not a TCP port" in output and "👎" not in output


def test_text_from_outside_is_printed_with_control_characters_escaped() -> None:
    """A label, a server's answer or file metadata holding terminal escapes (issue 35, class 8): whatever the
    consoles print — a string, a `Text`, a table cell, an error — shows them escaped, other Unicode as it is."""
    from rich.table import Table
    from rich.text import Text

    from pipeline.cli.console import console, error_console

    hostile = "seven\x1b[2J\x1b]8;;http://evil\x1b\\\rclear \x9b31m Zürich"
    shown = "seven\\x1b[2J\\x1b]8;;http://evil\\x1b\\\\rclear \\x9b31m Zürich"
    table = Table()
    table.add_column("label")
    table.add_row(hostile)
    table.add_row(Text(hostile))
    with console.capture() as out:
        console.print(hostile, markup=False)
        console.print(Text(hostile))
        console.print(table)
    with error_console.capture() as err:
        fail(f"the server said {hostile}")
    printed = out.get() + err.get()
    assert "\x1b" not in printed and "\r" not in printed and "\x9b" not in printed
    assert printed.count(shown) == 3  # the string, the table's string cell, the error
    assert printed.count(shown.replace("\\r", "")) == 2  # a `Text` and its cell: Rich drops \r when it is made
