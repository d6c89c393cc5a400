"""`tfxp data from-folder`: a class-per-subfolder image tree → TFRecords, and every bad input."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from components.data import dataset as dataset_module
from components.data.dataset import MANIFEST_FILE
from components.data.from_folder import check_images, convert_folder
from components.data.inspect import inspect_dataset
from foundation.contract import IMAGE_KEY, LABEL_KEY, TEXT_KEY, read_label_map
from foundation.data.errors import DataError
from foundation.data.tfrecords import iter_examples
from pipeline.cli import app


def split_files(directory: Path, split: str) -> list[Path]:
    """The shards `tfxp data` wrote for one split (what these tests check is how it writes them)."""
    return sorted((directory / split).glob("part-*-of-*.tfrecord.gz"))


def _image_bytes(size: tuple[int, int], mode: str, image_format: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    channels = {"L": 1, "RGB": 3, "RGBA": 4, "CMYK": 4}[mode]
    pixels = rng.integers(0, 256, (size[1], size[0], channels), dtype=np.uint8)
    image = Image.fromarray(pixels[..., 0] if channels == 1 else pixels, mode=mode)
    buffer = io.BytesIO()
    image.save(buffer, format=image_format)
    return buffer.getvalue()


def _write(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Three classes, mixed sizes, formats, modes and extension cases, a file that is no image, hidden files."""
    src = tmp_path / "src"
    for index in range(6):
        _write(src / "cat" / f"c{index}.jpg", _image_bytes((20 + index, 30), "RGB", "JPEG", index))
        _write(src / "dog" / f"d{index}.PNG", _image_bytes((16, 16 + index), "L", "PNG", 10 + index))
    _write(src / "dog" / "nested" / "d9.Jpeg", _image_bytes((40, 12), "L", "JPEG", 30))
    for index in range(4):
        _write(src / "emu" / f"e{index}.png", _image_bytes((9, 9), "RGBA", "PNG", 20 + index))
    _write(src / "emu" / "cmyk.jpg", _image_bytes((12, 12), "CMYK", "JPEG", 40))
    _write(src / "emu" / "notes.txt", b"not an image, and not named like one")
    _write(src / "emu" / ".hidden.png", b"hidden files are ignored")
    _write(src / ".git" / "x.png", b"hidden folders are not classes")
    return src


def _add_bad_images(src: Path) -> None:
    jpeg = _image_bytes((64, 64), "RGB", "JPEG", 99)
    _write(src / "cat" / "truncated.jpg", jpeg[: len(jpeg) // 2])
    png = _image_bytes((64, 64), "RGB", "PNG", 98)
    _write(src / "dog" / "truncated.png", png[: len(png) // 2])
    _write(src / "emu" / "garbage.png", b"this is not a PNG at all")


def _stored(out: Path) -> list[tuple[int, str, bytes]]:
    files = [path for split in ("train", "eval") for path in split_files(out, split)]
    return [
        (
            example.features.feature[LABEL_KEY].int64_list.value[0],
            example.features.feature[TEXT_KEY].bytes_list.value[0].decode(),
            example.features.feature[IMAGE_KEY].bytes_list.value[0],
        )
        for example in iter_examples(files)
    ]


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_converts_tree_keeping_original_bytes(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = convert_folder(tree, out, eval_fraction=0.25, shards=2, workers=2)
    assert read_label_map(out / "labels.txt") == ["cat", "dog", "emu"]
    assert {split: sum(counts.values()) for split, counts in summary.counts.items()} == {"train": 13, "eval": 5}
    assert summary.counts["eval"] == {"cat": 2, "dog": 2, "emu": 1}
    stored = _stored(out)
    assert Counter(text for _, text, _ in stored) == {"cat": 6, "dog": 7, "emu": 5}
    assert all(text == ["cat", "dog", "emu"][label] for label, text, _ in stored)
    originals = {path.read_bytes() for path in tree.rglob("*") if path.is_file() and path.name != "cmyk.jpg"}
    kept = [content for _, _, content in stored if content in originals]
    assert len(kept) == 17  # every image except the CMYK JPEG, byte for byte
    # The CMYK JPEG is re-encoded as an RGB PNG, and reported.
    (reencoded,) = [content for _, _, content in stored if content not in originals]
    assert Image.open(io.BytesIO(reencoded)).format == "PNG"
    assert Image.open(io.BytesIO(reencoded)).mode == "RGB"
    assert summary.reencoded == ("emu/cmyk.jpg (JPEG CMYK)",)
    assert summary.skipped == (("emu/notes.txt", "not an image in a format tfxp knows"),)  # hidden files: ignored
    # TensorFlow (what the trainer and serving use) decodes every stored image.
    import tensorflow as tf

    for _, _, content in stored:
        assert tf.io.decode_image(content, channels=3, expand_animations=False).shape[-1] == 3
    assert inspect_dataset(out).counts == summary.counts


def test_same_tree_same_bytes(tree: Path, tmp_path: Path) -> None:
    convert_folder(tree, tmp_path / "a", shards=1, workers=2)
    convert_folder(tree, tmp_path / "b", shards=1, workers=1)
    assert _snapshot(tmp_path / "a").keys() == _snapshot(tmp_path / "b").keys()
    for name, content in _snapshot(tmp_path / "a").items():
        if name != MANIFEST_FILE:  # the manifest names the source; the data must match exactly
            assert content == _snapshot(tmp_path / "b")[name]


def test_thread_and_process_checks_agree(tree: Path) -> None:
    _add_bad_images(tree)
    paths = sorted(path for path in tree.rglob("*") if path.suffix.lower() in {".jpg", ".png"})
    threads = check_images(paths, workers=2, executor="thread")
    processes = check_images(paths, workers=2, executor="process")
    assert threads == processes
    failed = {Path(check.path).relative_to(tree).as_posix() for check in threads if check.error}
    assert failed == {"cat/truncated.jpg", "dog/truncated.png", "emu/garbage.png", "emu/.hidden.png", ".git/x.png"}


def test_empty_source_folder(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    with pytest.raises(DataError, match=r"source folder .*src has no class folders \(it is empty\); expected one"):
        convert_folder(tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_images_without_class_folders(tmp_path: Path) -> None:
    _write(tmp_path / "src" / "a.jpg", _image_bytes((8, 8), "RGB", "JPEG", 1))
    with pytest.raises(DataError, match=r"has no class folders \(it has 1 images but no class subfolders\)"):
        convert_folder(tmp_path / "src", tmp_path / "out")


def test_missing_source_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"source folder .*nope does not exist or is not a directory"):
        convert_folder(tmp_path / "nope", tmp_path / "out")


def test_only_one_class_folder(tmp_path: Path) -> None:
    for index in range(3):
        _write(tmp_path / "src" / "cat" / f"{index}.png", _image_bytes((8, 8), "L", "PNG", index))
    with pytest.raises(DataError, match=r"has one class folder \(cat\); a classifier needs at least two classes"):
        convert_folder(tmp_path / "src", tmp_path / "out")


@pytest.mark.parametrize(("name", "shown"), [("dog\x1b[31m", r"\x1b"), ("dog\rcat", r"\r"), ("a\u202egod", r"\u202e")])
def test_a_class_folder_named_with_a_control_character_is_refused(
    tree: Path, tmp_path: Path, name: str, shown: str
) -> None:
    # found by the hardening pass over issue 35: the folder's name went raw into labels.txt, the model and answers
    _write(tree / name / "0.png", _image_bytes((8, 8), "L", "PNG", 0))
    with pytest.raises(DataError, match="cannot name a class") as error:
        convert_folder(tree, tmp_path / "out")
    assert f"holds the control character {shown}; rename the folder" in str(error.value)
    assert not (tmp_path / "out").exists()


def test_class_folder_without_images(tree: Path, tmp_path: Path) -> None:
    _write(tree / "fox" / "readme.md", b"no images here")
    with pytest.raises(DataError, match=r"have no images left: fox; skipped: fox/readme.md \(not an image in a format"):
        convert_folder(tree, tmp_path / "out")


def test_bad_images_fail_listing_every_file(tree: Path, tmp_path: Path) -> None:
    _add_bad_images(tree)
    with pytest.raises(DataError) as caught:
        convert_folder(tree, tmp_path / "out", workers=2)
    message = str(caught.value)
    assert message.startswith("3 of 21 images in")
    for name in ("cat/truncated.jpg", "dog/truncated.png", "emu/garbage.png"):
        assert name in message
    assert "pass --skip-bad to leave them out" in message
    assert not (tmp_path / "out").exists()


def test_skip_bad_leaves_them_out_and_reports_them(tree: Path, tmp_path: Path) -> None:
    _add_bad_images(tree)
    summary = convert_folder(tree, tmp_path / "out", skip_bad=True, workers=2)
    assert sorted(path for path, _ in summary.skipped) == [
        "cat/truncated.jpg",
        "dog/truncated.png",
        "emu/garbage.png",
        "emu/notes.txt",  # not an image: skipped with or without --skip-bad
    ]
    assert all(reason for _, reason in summary.skipped)
    assert sum(summary.split_total(split) for split in summary.counts) == 18
    manifest = json.loads((tmp_path / "out" / MANIFEST_FILE).read_text())
    assert len(manifest["skipped"]) == 4


def test_skip_bad_refuses_when_a_class_has_nothing_left(tmp_path: Path) -> None:
    for index in range(2):
        _write(tmp_path / "src" / "cat" / f"{index}.png", _image_bytes((8, 8), "L", "PNG", index))
    _write(tmp_path / "src" / "dog" / "broken.png", b"nope")
    with pytest.raises(DataError, match=r"have no images left: dog"):
        convert_folder(tmp_path / "src", tmp_path / "out", skip_bad=True)


def test_non_empty_out_is_refused_without_overwrite(tree: Path, tmp_path: Path) -> None:
    out = _write(tmp_path / "out" / "precious.txt", b"user data").parent
    with pytest.raises(DataError, match=r"out already exists and is not empty \(precious.txt\); pass --overwrite"):
        convert_folder(tree, out)
    assert _snapshot(out) == {"precious.txt": b"user data"}


def test_out_that_is_a_file_is_refused(tree: Path, tmp_path: Path) -> None:
    out = _write(tmp_path / "out", b"a file")
    with pytest.raises(DataError, match=r"--out .*out is a file, not a directory"):
        convert_folder(tree, out, overwrite=True)
    assert out.read_bytes() == b"a file"


def test_overwrite_refuses_a_folder_tfxp_did_not_write(tree: Path, tmp_path: Path) -> None:
    out = _write(tmp_path / "out" / "train" / "photo.jpg", b"user data").parent.parent
    with pytest.raises(DataError, match=r"is not a data set written by `tfxp data` \(it has no tfxp_dataset.json\)"):
        convert_folder(tree, out, overwrite=True)
    assert _snapshot(out) == {"train/photo.jpg": b"user data"}


def test_overwrite_replaces_only_what_tfxp_wrote(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    convert_folder(tree, out, shards=3)
    _write(out / "README.md", b"my notes")
    (tree / "cat" / "c0.jpg").unlink()
    summary = convert_folder(tree, out, shards=1, overwrite=True)
    assert (out / "README.md").read_bytes() == b"my notes"
    assert [path.name for path in split_files(out, "train")] == ["part-00000-of-00001.tfrecord.gz"]
    assert inspect_dataset(out).counts == summary.counts
    assert summary.counts["train"]["cat"] + summary.counts["eval"]["cat"] == 5
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".out.")]  # no staging leftovers


def test_overwrite_refuses_foreign_files_inside_train(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    convert_folder(tree, out, shards=1)
    _write(out / "train" / "extra.csv", b"user data")
    before = _snapshot(out)
    with pytest.raises(DataError, match=r"hold files tfxp did not write \(train/extra.csv\); move those files"):
        convert_folder(tree, out, overwrite=True)
    assert _snapshot(out) == before


def test_out_inside_source_is_refused(tree: Path) -> None:
    with pytest.raises(DataError, match=r"lies inside the source folder"):
        convert_folder(tree, tree / "records")


def test_a_failure_while_writing_leaves_nothing_behind(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    convert_folder(tree, out, shards=1)
    before = _snapshot(out)
    calls = {"n": 0}
    real_make_example = dataset_module.make_example

    def failing_make_example(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError(28, "No space left on device")
        return real_make_example(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dataset_module, "make_example", failing_make_example)
    with pytest.raises(OSError, match="No space left"):
        convert_folder(tree, out, shards=1, overwrite=True)
    with pytest.raises(OSError, match="No space left"):
        convert_folder(tree, tmp_path / "fresh", shards=1)
    assert _snapshot(out) == before  # the old data set is intact
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out", "src"]  # no fresh/, no staging dirs


def test_cli_from_folder_reports_bad_files_and_exits_non_zero(tree: Path, tmp_path: Path) -> None:
    _add_bad_images(tree)
    runner = CliRunner()
    result = runner.invoke(app, ["data", "from-folder", str(tree), "--out", str(tmp_path / "out"), "--workers", "2"])
    assert result.exit_code == 2
    assert "error: 3 of 21 images" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["data", "from-folder", str(tree), "--out", str(tmp_path / "out"), "--skip-bad"])
    assert result.exit_code == 0, result.output
    assert "skipped 4 files" in result.output
    assert "emu/garbage.png" in result.output
    assert "emu/notes.txt: not an image in a format tfxp knows" in result.output
    assert "re-encoded (stored as upright JPEG/PNG): 1 files" in result.output
    assert "emu/cmyk.jpg (JPEG CMYK)" in result.output


def test_cli_from_folder_bad_eval_fraction(tree: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["data", "from-folder", str(tree), "--out", str(tmp_path / "out"), "--eval-fraction", "1"]
    )
    assert result.exit_code == 2
    assert "--eval-fraction must be between 0 and 1 (exclusive), got 1.0" in result.output


def test_a_jpeg_of_many_scans_is_refused_before_pillow_decodes_it(tmp_path: Path) -> None:
    from image_bombs import scan_bomb

    from components.data.images import check_image

    (tmp_path / "bomb.jpg").write_bytes(scan_bomb(400))
    check = check_image(str(tmp_path / "bomb.jpg"))
    assert check.error is not None and "in 400 scans is over the limit of 100 scans" in check.error
    (tmp_path / "fine.jpg").write_bytes(scan_bomb(100))
    assert check_image(str(tmp_path / "fine.jpg")).error is None


def test_a_png_whose_data_outgrows_its_rows_is_refused_though_pillow_stops_at_the_rows(tmp_path: Path) -> None:
    from image_bombs import idat_bomb

    from components.data.images import check_image

    (tmp_path / "bomb.png").write_bytes(idat_bomb(64))  # Pillow decodes it in milliseconds; TensorFlow would not
    check = check_image(str(tmp_path / "bomb.png"))
    assert check.error is not None and "PNG of 16x16 pixels whose image data (IDAT chunks) take 65536" in check.error
    (tmp_path / "large.png").write_bytes(idat_bomb(20, 1000))  # within the bound, 20 MiB past its 1 MB of rows
    check = check_image(str(tmp_path / "large.png"))
    assert check.error is not None and "inflates to more than the 1001000 bytes its rows take" in check.error
