"""`tfxp data digits` and `tfxp data inspect` on the embedded digits data set."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits
from typer.testing import CliRunner

from components.data.dataset import MANIFEST_FILE, DatasetSummary
from components.data.digits import write_digits
from components.data.inspect import inspect_dataset
from foundation.contract import IMAGE_KEY, LABEL_KEY, TEXT_KEY, read_label_map
from foundation.data.errors import DataError
from foundation.data.tfrecords import iter_examples
from pipeline.cli import app


def split_files(directory: Path, split: str) -> list[Path]:
    """The shards `tfxp data` wrote for one split (what these tests check is how it writes them)."""
    return sorted((directory / split).glob("part-*-of-*.tfrecord.gz"))


@pytest.fixture(scope="module")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DatasetSummary]:
    out = tmp_path_factory.mktemp("digits") / "digits"
    return out, write_digits(out, shards=2)


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()
    }


def test_digits_layout_labels_and_stratified_counts(digits_dir: tuple[Path, DatasetSummary]) -> None:
    out, summary = digits_dir
    assert read_label_map(out / "labels.txt") == [str(digit) for digit in range(10)]
    assert [path.name for path in split_files(out, "train")] == [
        "part-00000-of-00002.tfrecord.gz",
        "part-00001-of-00002.tfrecord.gz",
    ]
    assert len(split_files(out, "eval")) == 2
    per_digit = Counter(load_digits().target.tolist())
    assert sum(per_digit.values()) == 1797
    for digit, total in per_digit.items():
        name = str(digit)
        assert summary.counts["eval"][name] == round(total * 0.2)
        assert summary.counts["train"][name] + summary.counts["eval"][name] == total
    assert json.loads((out / MANIFEST_FILE).read_text())["counts"] == summary.counts


def test_digits_examples_are_scaled_grayscale_pngs(digits_dir: tuple[Path, DatasetSummary]) -> None:
    import tensorflow as tf

    out, _ = digits_dir
    examples = list(iter_examples(split_files(out, "eval")))
    assert len(examples) == digits_dir[1].split_total("eval")
    brightest = 0
    for example in examples[:50]:
        features = example.features.feature
        encoded = features[IMAGE_KEY].bytes_list.value[0]
        assert encoded.startswith(b"\x89PNG")
        image = tf.io.decode_png(encoded).numpy()
        assert image.shape == (8, 8, 1)
        assert image.dtype == np.uint8
        brightest = max(brightest, int(image.max()))
        label = features[LABEL_KEY].int64_list.value[0]
        assert features[TEXT_KEY].bytes_list.value[0] == str(label).encode()
    assert brightest == 255  # 0..16 scaled to the full 0..255 range


def test_inspect_counts_match_what_was_written(digits_dir: tuple[Path, DatasetSummary]) -> None:
    out, summary = digits_dir
    inspected = inspect_dataset(out)
    assert inspected.counts == summary.counts
    assert inspected.shards == {"train": 2, "eval": 2}
    assert inspected.label_names == tuple(str(digit) for digit in range(10))


def test_cli_digits_writes_the_same_bytes_every_run(digits_dir: tuple[Path, DatasetSummary], tmp_path: Path) -> None:
    out, _ = digits_dir
    result = CliRunner().invoke(app, ["data", "digits", "--out", str(tmp_path / "again"), "--shards", "2"])
    assert result.exit_code == 0, result.output
    assert "1797" in result.output
    assert _files(tmp_path / "again") == _files(out)


def test_cli_inspect_prints_counts_per_split(digits_dir: tuple[Path, DatasetSummary]) -> None:
    out, summary = digits_dir
    result = CliRunner().invoke(app, ["data", "inspect", str(out)])
    assert result.exit_code == 0, result.output
    assert f"{summary.split_total('train')}" in result.output
    assert f"{summary.split_total('eval')}" in result.output


def test_cli_inspect_errors_are_one_clean_paragraph(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["data", "inspect", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "does not exist; create one with `tfxp data digits --out DIR`" in " ".join(
        result.output.replace("│", " ").split()
    )
    assert "Traceback" not in result.output
    (tmp_path / "labels.txt").write_text("a\nb\n")
    result = CliRunner().invoke(app, ["data", "inspect", str(tmp_path)])
    assert result.exit_code == 2
    assert "is split: found nothing (no TFRecords that tfxp recognises)" in " ".join(result.output.split())


def test_inspect_flags_labels_outside_the_label_map(digits_dir: tuple[Path, DatasetSummary], tmp_path: Path) -> None:
    out, summary = digits_dir
    copy = tmp_path / "copy"
    for relative, content in _files(out).items():
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes(content)
    (copy / "labels.txt").write_text("".join(f"{digit}\n" for digit in range(9)))  # digit 9 unknown
    inspected = inspect_dataset(copy)
    assert inspected.counts["eval"]["label 9?"] == summary.counts["eval"]["9"]
    assert inspected.row_names()[-1] == "label 9?"


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_digits_rejects_eval_fraction_outside_zero_one(fraction: float, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=rf"--eval-fraction must be between 0 and 1 \(exclusive\), got {fraction}"):
        write_digits(tmp_path / "out", eval_fraction=fraction)
    assert not (tmp_path / "out").exists()
