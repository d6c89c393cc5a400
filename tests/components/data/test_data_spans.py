"""`tfxp data ... --span`: spans beside one label map, digits cut into seeded spans, corrupted labels, inspect."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.data.dataset import MANIFEST_FILE, corrupt_labels
from components.data.digits import SOURCE, write_digit_spans
from components.data.span_writer import check_span_cut, cut_into_spans, existing_spans, prepare_span
from foundation.contract import LABEL_KEY, TEXT_KEY, read_label_map
from foundation.data.errors import DataError
from foundation.data.tfrecords import iter_examples
from pipeline.cli import app


def split_files(directory: Path, split: str) -> list[Path]:
    """The shards `tfxp data` wrote for one split (what these tests check is how it writes them)."""
    return sorted((directory / split).glob("part-*-of-*.tfrecord.gz"))


def _labels_and_texts(directory: Path, split: str) -> list[tuple[int, str]]:
    return [
        (e.features.feature[LABEL_KEY].int64_list.value[0], e.features.feature[TEXT_KEY].bytes_list.value[0].decode())
        for e in iter_examples(split_files(directory, split))
    ]


def _images(directory: Path) -> set[bytes]:
    return {
        e.features.feature["image/encoded"].bytes_list.value[0]
        for split in ("train", "eval")
        for e in iter_examples(split_files(directory, split))
    }


@pytest.fixture(scope="module")
def three_spans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stream") / "digits"
    result = CliRunner().invoke(app, ["data", "digits", "--out", str(out), "--spans", "3", "--shards", "1"])
    assert result.exit_code == 0, result.output
    return out


def test_digits_cut_into_disjoint_spans_beside_one_label_map(three_spans: Path) -> None:
    assert sorted(path.name for path in three_spans.iterdir()) == ["labels.txt", "span-1", "span-2", "span-3"]
    assert read_label_map(three_spans / "labels.txt") == [str(digit) for digit in range(10)]
    images = [_images(three_spans / f"span-{span}") for span in (1, 2, 3)]
    assert all(len(part) in (599, 600) for part in images)  # 1,797 digits in three parts
    assert not (images[0] & images[1]) and not (images[1] & images[2]) and not (images[0] & images[2])
    for span in (1, 2, 3):
        folder = three_spans / f"span-{span}"
        assert sorted(path.name for path in folder.iterdir()) == ["eval", MANIFEST_FILE, "train"]
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        assert (manifest["span"], manifest["spans"]) == (span, 3)
        assert set(Counter(label for label, _ in _labels_and_texts(folder, "eval"))) == set(range(10))


def test_one_span_at_a_time_gives_the_same_bytes(three_spans: Path, tmp_path: Path) -> None:
    for span in (2, 1):
        write_digit_spans(tmp_path, spans=3, only=span, shards=1)
    assert existing_spans(tmp_path) == [1, 2]
    for span in (1, 2):
        for split in ("train", "eval"):
            written = [path.read_bytes() for path in split_files(tmp_path / f"span-{span}", split)]
            assert written == [path.read_bytes() for path in split_files(three_spans / f"span-{span}", split)]


def test_corrupted_labels_are_wrong_systematically_in_train_only(three_spans: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["data", "digits", "--out", str(tmp_path), "--spans", "3", "--span", "3", "--shards", "1",
              "--corrupt-labels", "0.5"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    clean = dict(zip(_images(three_spans / "span-3"), [0] * 10_000, strict=False))  # same images as the clean span
    assert _images(tmp_path / "span-3") == set(clean)
    train = _labels_and_texts(tmp_path / "span-3", "train")
    original = _labels_and_texts(three_spans / "span-3", "train")
    changed = [(old, new) for (old, _), (new, _) in zip(original, train, strict=True) if old != new]
    assert len(changed) == round(len(train) * 0.5)
    shifts = {(new - old) % 10 for old, new in changed}
    assert len(shifts) == 1 and 0 not in shifts  # one labelling bug, never the right class by accident
    assert all(text == str(label) for label, text in train)  # the text follows the (wrong) label
    assert _labels_and_texts(tmp_path / "span-3", "eval") == _labels_and_texts(three_spans / "span-3", "eval")
    assert json.loads((tmp_path / "span-3" / MANIFEST_FILE).read_text())["corrupt_train_labels"] == 0.5


def test_cli_inspect_shows_every_span(three_spans: Path) -> None:
    result = CliRunner().invoke(app, ["data", "inspect", str(three_spans)])
    assert result.exit_code == 0, result.output
    assert "all 3 spans" in result.output
    assert "1797" in result.output  # the total over every span and split
    for span in (1, 2, 3):  # span, train, eval, shards (one a split)
        assert re.search(rf"│\s+{span} │\s+(479|480) │\s+(119|120) │\s+2 │", result.output), result.output


def test_spans_refuse_a_different_label_map_an_existing_span_and_an_unspanned_root(
    three_spans: Path, tmp_path: Path
) -> None:
    (tmp_path / "labels.txt").write_text("cat\ndog\n")
    with pytest.raises(DataError, match=r"labels.txt has 2 classes: cat, dog, but this span has 10 classes: 0, 1"):
        prepare_span(tmp_path, 1, [str(digit) for digit in range(10)], overwrite=False)
    assert not (tmp_path / "span-1").exists()
    with pytest.raises(DataError, match=r"--out .*span-2 already exists and is not empty"):
        write_digit_spans(three_spans, spans=3, only=2)
    (tmp_path / "flat" / "train").mkdir(parents=True)
    with pytest.raises(DataError, match=r"holds a data set without spans \(train\); spans go into a directory"):
        write_digit_spans(tmp_path / "flat", spans=2, only=1)
    with pytest.raises(DataError, match=r"--span 4 is not one of the 3 spans \(1..3\)"):
        write_digit_spans(tmp_path / "new", spans=3, only=4)


def test_a_span_cut_otherwise_than_the_digits_spans_beside_it_is_refused(three_spans: Path, tmp_path: Path) -> None:
    root = tmp_path / "stream"
    root.mkdir()
    for span in (1, 2, 3):  # copies of the fixture's spans, cut as 3 parts
        shutil.copytree(three_spans / f"span-{span}", root / f"span-{span}")
    shutil.copy(three_spans / "labels.txt", root / "labels.txt")
    runner = CliRunner()
    for arguments in (["--span", "0"], ["--spans", "1", "--span", "1", "--overwrite"], ["--spans", "2", "--overwrite"]):
        result = runner.invoke(app, ["data", "digits", "--out", str(root), "--shards", "1", *arguments])
        assert result.exit_code == 2, result.output
        message = " ".join(result.output.split())
        assert re.search(
            r"holds span-\d cut as 3 parts \(seed 0, eval fraction 0\.2\); (span-\d, )*span-\d would", message
        )
        assert "--spans 3 --eval-fraction 0.2" in message
    assert sorted(path.name for path in root.iterdir()) == ["labels.txt", "span-1", "span-2", "span-3"]
    with pytest.raises(DataError, match=r"span-4 would be cut as 3 parts \(seed 1, eval fraction 0.2\)"):
        check_span_cut(root, [4], SOURCE, {"spans": 3, "seed": 1, "eval_fraction": 0.2})
    with pytest.raises(DataError, match=r"eval fraction 0.3"):
        check_span_cut(root, [4], SOURCE, {"spans": 3, "seed": 0, "eval_fraction": 0.3})
    check_span_cut(root, [4], SOURCE, {"spans": 3, "seed": 0, "eval_fraction": 0.2})  # the same cut: more spans
    check_span_cut(root, [1, 2, 3], SOURCE, {"spans": 1, "seed": 0, "eval_fraction": 0.2})  # replaces every span
    check_span_cut(root, [4], "/data/photos", {"spans": 1, "seed": 0, "eval_fraction": 0.2})  # another source


def test_cut_into_spans_is_seeded_disjoint_and_balanced() -> None:
    labels = [label for label in range(3) for _ in range(7)]
    parts = cut_into_spans(labels, 3, seed=1)
    assert sorted(index for part in parts for index in part) == list(range(len(labels)))
    assert sorted(len(part) for part in parts) == [7, 7, 7]
    assert all(len({labels[index] for index in part}) == 3 for part in parts)
    assert parts == cut_into_spans(labels, 3, seed=1) != cut_into_spans(labels, 3, seed=2)
    with pytest.raises(DataError, match=r"--spans 4 is too many: the smallest class has 7 examples.*at most 3 spans"):
        cut_into_spans(labels, 4, seed=1)


def test_corrupt_labels_fraction_bounds() -> None:
    assert corrupt_labels([0, 1, 2, 3], 0.0, 4, seed=0) == [0, 1, 2, 3]
    assert all(new != old for old, new in zip([0, 1, 2, 3], corrupt_labels([0, 1, 2, 3], 1.0, 4, seed=0), strict=True))
    with pytest.raises(DataError, match=r"--corrupt-labels must be between 0 and 1, got 1\.5"):
        corrupt_labels([0, 1], 1.5, 2, seed=0)


def _png(seed: int) -> bytes:
    import io

    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    pixels = np.random.default_rng(seed).integers(0, 256, (6, 6), dtype=np.uint8)
    Image.fromarray(pixels, mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def test_from_folder_writes_a_span_beside_the_shared_label_map(tmp_path: Path) -> None:
    for month, classes in (("june", ("cat", "dog")), ("july", ("cat", "dog")), ("august", ("cat", "emu"))):
        for name in classes:
            for index in range(3):
                path = tmp_path / month / name / f"{index}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(_png(index + 10 * len(name)))
    out = tmp_path / "photos"
    for span, month in ((6, "june"), (7, "july")):
        result = CliRunner().invoke(app, ["data", "from-folder", str(tmp_path / month), "--out", str(out),
                                          "--span", str(span), "--workers", "1"])  # fmt: skip
        assert result.exit_code == 0, result.output
    assert existing_spans(out) == [6, 7]
    assert read_label_map(out / "labels.txt") == ["cat", "dog"]
    assert not (out / "span-6" / "labels.txt").exists()
    assert json.loads((out / "span-7" / MANIFEST_FILE).read_text())["span"] == 7
    result = CliRunner().invoke(app, ["data", "from-folder", str(tmp_path / "august"), "--out", str(out),
                                      "--span", "8", "--workers", "1"])  # fmt: skip
    assert result.exit_code == 2
    assert "but this span has 2 classes: cat, emu; every span of a data set shares one label map" in " ".join(
        result.output.split()
    )
    assert existing_spans(out) == [6, 7]
