"""foundation.contract: the one label-map rule, the same verdict from every entry point, and no heavy imports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from import_probe import heavy_modules_loaded
from typer.testing import CliRunner

from foundation.contract import LabelMapError, parse_label_map, read_label_map, write_label_map
from pipeline.cli import app


def _labels(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "labels.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, newline="")
    return path


@pytest.mark.parametrize(
    "content",
    ["cat\ndog\nred fox\n", "cat\ndog\nred fox", "cat\r\ndog\r\nred fox\r\n", "cat  \n\tdog\nred fox \n\n \n"],
    ids=["plain", "no-final-newline", "crlf", "surrounding-whitespace-and-trailing-blank-lines"],
)
def test_names_are_stripped_and_trailing_blank_lines_ignored(tmp_path: Path, content: str) -> None:
    assert read_label_map(_labels(tmp_path, content)) == ["cat", "dog", "red fox"]


def test_synset_lines_name_the_class_by_the_synset(tmp_path: Path) -> None:
    # ImageNet's synset list (one id a line) and its metadata (id, then a description that may repeat).
    assert parse_label_map("n01440764\nn01443537\n", "synsets.txt") == ["n01440764", "n01443537"]
    text = "n03126707 crane\nn02012849\tcrane\nn01440764 tench, Tinca tinca\n"
    assert parse_label_map(text, "imagenet_metadata.txt") == ["n03126707", "n02012849", "n01440764"]
    # Only a WordNet id splits a line; class names with spaces stay whole.
    assert parse_label_map("n0144 tench\ngolden retriever\n", "labels.txt") == ["n0144 tench", "golden retriever"]
    with pytest.raises(LabelMapError, match=r"names 'n01440764' twice, at lines 1 and 2"):
        parse_label_map("n01440764 tench\nn01440764 tinca\n", "labels.txt")
    with pytest.raises(LabelMapError, match=r"'n01440764 tench' cannot go into .*read back as the synset 'n01440764'"):
        write_label_map(tmp_path / "labels.txt", ["n01440764 tench", "cat"])


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_name(tmp_path: Path) -> None:
    assert read_label_map(_labels(tmp_path, "\ufeffchat\nchien\n".encode())) == ["chat", "chien"]


def test_a_blank_line_between_names_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = _labels(tmp_path, "cat\ndog\n  \nfox\n")
    with pytest.raises(LabelMapError, match=rf"label map {re.escape(str(path))} has a blank line at line 3;"):
        read_label_map(path)


def test_a_duplicate_name_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    path = _labels(tmp_path, "cat\ndog\nfox\ndog \n")
    with pytest.raises(LabelMapError, match=r"labels.txt names 'dog' twice, at lines 2 and 4"):
        read_label_map(path)


@pytest.mark.parametrize(
    ("content", "line", "shown"),
    [
        ("cat\ndog\x1b[31m\n", 2, r"'dog\x1b[31m' holds the control character \x1b"),
        ("cat\ndo\rg\n", 2, r"'do\rg' holds the control character \r"),  # a lone CR is no line break
        ("cat\rdog\r", 1, r"'cat\rdog' holds the control character \r"),
        ("ca\x1ct\ndog\n", 1, r"\x1c"),  # str.splitlines read it as a line break: the ids shifted
        ("cat\ndog\u2028fox\n", 2, r"\u2028"),
        ("cat\nn01440764\x7f\n", 2, r"\x7f"),
        ("cat\nxob\u202e\n", 2, r"\u202e"),
    ],
)
def test_a_class_name_with_a_control_character_is_refused_naming_the_line(content: str, line: int, shown: str) -> None:
    with pytest.raises(LabelMapError, match=rf"labels.txt line {line}: the class name ") as error:
        parse_label_map(content, "labels.txt")
    assert shown in str(error.value)


@pytest.mark.parametrize("content", ["", "\n\n", "cat\n"])
def test_fewer_than_two_classes_is_an_error(content: str) -> None:
    with pytest.raises(LabelMapError, match=r"labels.txt lists [01] class\(es\); a classifier needs at least two"):
        parse_label_map(content, "labels.txt")


def test_a_missing_file_names_the_config_keys_or_the_callers_hint(tmp_path: Path) -> None:
    with pytest.raises(LabelMapError, match=r"nope.txt does not exist; set data.labels .* in data.path"):
        read_label_map(tmp_path / "nope.txt")
    with pytest.raises(LabelMapError, match=r"nope.txt does not exist; pass --labels"):
        read_label_map(tmp_path / "nope.txt", missing_hint="pass --labels")


def test_a_binary_file_names_the_file(tmp_path: Path) -> None:
    path = _labels(tmp_path, b"cat\n\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(LabelMapError, match=rf"label map {re.escape(str(path))} is not UTF-8 text \(byte 4"):
        read_label_map(path)


def test_a_directory_is_reported_not_raised_as_os_error(tmp_path: Path) -> None:
    with pytest.raises(LabelMapError, match=r"cannot read label map .*: Is a directory"):
        read_label_map(tmp_path)


def test_written_label_maps_read_back_and_bad_names_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "labels.txt"
    write_label_map(path, ["cat", "dog", "red fox"])
    assert path.read_text() == "cat\ndog\nred fox\n"
    assert read_label_map(path) == ["cat", "dog", "red fox"]
    for names, message in [
        (["ok", "a\nb"], r"class name 'a\\nb' cannot go into .*other.txt: names must be non-empty single lines"),
        (["ok", " "], r"class name ' ' cannot go into"),
        (["ok", "cat "], r"class name 'cat ' cannot go into .* without surrounding whitespace"),
        (["ok", "dog\x1b[31m"], r"class name 'dog\\x1b\[31m' holds the control character \\x1b, so it cannot go into"),
        (["ok", "a\rb"], r"class name 'a\\rb' holds the control character \\r"),
        (["cat", "dog", "cat"], r"names 'cat' twice, at lines 1 and 3"),
        (["cat"], r"lists 1 class\(es\)"),
    ]:
        with pytest.raises(LabelMapError, match=message):
            write_label_map(tmp_path / "other.txt", names)
    assert not (tmp_path / "other.txt").exists()


def test_importing_the_contract_paths_and_versions_modules_loads_no_ml_framework() -> None:
    code = (
        "import foundation.contract, foundation.publish, foundation.paths, components.baseline.served, "
        "foundation.preprocessing_spec, foundation.data.class_match, foundation.data.layout"
    )
    assert heavy_modules_loaded(code, ["tensorflow", "tfx", "keras", "tf_keras"]) == []


# The same label map gets the same verdict from every command that reads one.
BAD_LABEL_MAPS = [
    ("cat\n\ndog\n", "has a blank line at line 2"),
    ("cat\ndog\ncat\n", "names 'cat' twice, at lines 1 and 3"),
    ("cat\ndog\x1b[31m\n", r"line 2: the class name 'dog\x1b[31m' holds the control character \x1b"),
]


def _entry_points(data_dir: Path, tmp_path: Path) -> dict[str, list[str]]:
    image = tmp_path / "image.png"
    image.write_bytes(b"not read: the label map is checked before the server is asked")
    labels = str(data_dir / "labels.txt")
    return {
        "data inspect": ["data", "inspect", str(data_dir)],
        # --examples holds labels.txt; nothing beside the model (not a model), which is loaded after the labels.
        "edge eval": ["edge", "eval", str(image), "--examples", str(data_dir)],
        "predict": ["predict", str(image), "--rest", "http://127.0.0.1:9", "--labels", labels],
        "run": [
            "run",
            "--set",
            f"data.path={data_dir}",
            "--set",
            "data.schema=infer",
            "--output",
            str(tmp_path / "out"),
        ],
    }


@pytest.mark.parametrize(("content", "verdict"), BAD_LABEL_MAPS, ids=["blank-line", "duplicate", "control"])
def test_every_entry_point_gives_the_same_verdict(tmp_path: Path, content: str, verdict: str) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "train").mkdir(parents=True)
    (data_dir / "eval").mkdir()
    (data_dir / "labels.txt").write_text(content)
    expected = f"label map {data_dir / 'labels.txt'} {verdict}"

    for name, args in _entry_points(data_dir, tmp_path).items():
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, f"{name}: {result.output}"
        assert expected in re.sub(r"\s*\n\s*", " ", result.output), f"{name}: {result.output}"
    assert not (tmp_path / "out").exists()  # `tfxp run` stopped before any component
