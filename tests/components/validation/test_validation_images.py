"""Images the Trainer would stop on are named by span, file and record in the ExampleValidator (issue 35, class 7).

A 42 MP PNG passed the validator (TFDV saw a PNG) and was refused later, in the Trainer, by the model's 40 MP rule;
a truncated image ended training in a raw "Graph execution error". The validator now applies the model's own rules
(`foundation.image_formats`, the twins of the graph's checks) and decoder to every record of the spans read.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from image_bombs import idat_bomb, png_bomb, scan_bomb
from layout_fixtures import example_bytes, write_records
from PIL import Image
from validator_fixtures import validator_artifacts

from components.validation.span_images import ImageCheck, check_span_images, file_problems
from components.validation.strict_example_validator import (
    IMAGE_CHECK_KEY,
    DataValidationError,
    StrictExampleValidatorExecutor,
)
from foundation.data.spans import INPUT_BASE_PROPERTY, SPANS_PROPERTY
from pipeline.component_settings import image_check
from pipeline.config import build_config

PATTERNS = {"train": "span-*/train/*", "eval": "span-*/eval/*"}
LIMIT = 40_000_000


def _image(format_name: str = "PNG", seed: int = 0, **options: object) -> bytes:
    buffer = io.BytesIO()
    Image.effect_noise((24, 24), 40 + seed).convert("RGB").save(buffer, format_name, **options)
    return buffer.getvalue()


GOOD = [_image(), _image("JPEG", progressive=True), _image("WEBP"), _image("GIF")]


def _records(images: list[bytes]) -> list[bytes]:
    return [example_bytes(image, index % 10, str(index % 10)) for index, image in enumerate(images)]


def _validate(tmp_path: Path, spans: dict[int, dict[str, list[bytes]]], limit: int = LIMIT) -> None:
    data, merged = tmp_path / "data", dict[str, list[bytes]]()
    for span, splits in spans.items():
        for split, images in splits.items():
            write_records(data / f"span-{span}" / split / "part-0.tfrecord.gz", _records(images))
            merged.setdefault(split, []).extend(_records(images))
    inputs, outputs = validator_artifacts(tmp_path / "artifacts", merged)
    examples = inputs["examples"][0]
    examples.set_string_custom_property(SPANS_PROPERTY, ",".join(str(span) for span in spans))
    examples.set_string_custom_property(INPUT_BASE_PROPERTY, str(data))
    check = ImageCheck(limit, PATTERNS, str(data)).to_json()
    StrictExampleValidatorExecutor().Do(inputs, outputs, {"exclude_splits": "[]", IMAGE_CHECK_KEY: check})


def test_a_42_mp_png_is_refused_by_the_validator_naming_span_file_and_record(tmp_path: Path) -> None:
    bomb = png_bomb(7000, 6000)  # 42 MP, about 40 KB: TFDV sees a PNG
    spans = {1: {"train": GOOD * 3, "eval": GOOD}, 2: {"train": [*GOOD, bomb], "eval": GOOD}}
    with pytest.raises(DataValidationError) as raised:
        _validate(tmp_path, spans)
    message = " ".join(str(raised.value).split())
    file = tmp_path / "data" / "span-2" / "train" / "part-0.tfrecord.gz"
    assert (
        f"span 2 ({tmp_path / 'data' / 'span-2'}), file {file}: 1 of 5 images cannot be used (record 4: image of "
        "7000x6000 pixels is over the limit of 40000000 pixels per image"
    ) in message
    assert "trainer.max_image_pixels" in message and "span 1" not in message


def test_truncated_and_many_scan_images_are_named_before_training(tmp_path: Path) -> None:
    png, jpeg = _image(), _image("JPEG")
    bad = [png[: len(png) // 2], jpeg[: len(jpeg) // 2], scan_bomb(400), b"not an image"]
    with pytest.raises(DataValidationError) as raised:
        _validate(tmp_path, {3: {"train": [*GOOD, *bad], "eval": GOOD}})
    message = " ".join(str(raised.value).split())
    assert "span 3 (" in message and "4 of 8 images cannot be used" in message
    assert "record 4: the image does not decode (truncated or corrupt: Invalid PNG data, size" in message
    assert "record 5: the image does not decode (truncated or corrupt:" in message
    assert "record 6: progressive JPEG of 64x64 pixels in 400 scans is over the limit of 100 scans" in message
    assert "record 7: Unknown image file format" in message
    assert "Graph execution error" not in message and "function_node" not in message and "[Op:" not in message
    assert message.count("values are not images") == 0  # one line per file, not TFDV's count besides


def test_healthy_spans_pass_and_the_limit_is_the_configured_one(tmp_path: Path) -> None:
    _validate(tmp_path / "ok", {1: {"train": GOOD * 3, "eval": GOOD}, 2: {"train": GOOD, "eval": GOOD}})
    with pytest.raises(DataValidationError, match="image of 24x24 pixels is over the limit of 500 pixels"):
        _validate(tmp_path / "small", {1: {"train": GOOD, "eval": GOOD}}, limit=500)


def test_without_spans_the_files_of_data_path_are_read(tmp_path: Path) -> None:
    write_records(tmp_path / "train" / "a.tfrecord", _records([*GOOD, GOOD[0][:40]]))
    write_records(tmp_path / "eval" / "a.tfrecord", _records(GOOD))
    check = ImageCheck(LIMIT, {"train": "train/*", "eval": "eval/*"}, str(tmp_path))
    (line,) = check_span_images(check, "", [])
    assert line.startswith(f"file {tmp_path / 'train' / 'a.tfrecord'}: 1 of 5 images cannot be used (record 4: ")
    assert file_problems(str(tmp_path / "eval" / "a.tfrecord"), LIMIT) == (4, {})


def test_a_file_that_passed_is_not_read_again_until_it_changes(tmp_path: Path) -> None:
    data, cache = tmp_path / "data", tmp_path / "out" / "statistics"
    write_records(data / "train" / "a.tfrecord", _records(GOOD))
    check = ImageCheck(LIMIT, {"train": "train/*"}, str(data), str(cache))
    assert check_span_images(check, "", []) == [] and len(list((cache / "images").iterdir())) == 1
    assert ImageCheck.from_json(check.to_json()) == check
    write_records(data / "train" / "a.tfrecord", _records([*GOOD, b"GIF89a"]))  # rewritten: read again
    (line,) = check_span_images(check, "", [])
    assert "record 4: " in line and len(list((cache / "images").iterdir())) == 1


def test_the_pipeline_hands_the_validator_the_trainers_pixel_limit(tmp_path: Path) -> None:
    config = build_config({}, [f"data.path={tmp_path}", "trainer.max_image_pixels=1234"])
    check = ImageCheck.from_json(image_check(config))
    assert check.max_pixels == 1234 and check.input_base == str(tmp_path) and check.cache_dir.endswith("/statistics")
    assert image_check(build_config({}, ["data.check_images=false"])) == ""


def test_pngs_whose_data_outgrows_their_rows_are_named(tmp_path: Path) -> None:
    # The model refuses the first (more IDAT data than its rows allow); the second passes that bound but inflates
    # 20 MiB past its 1 MB of rows, which TensorFlow's decoder would inflate to the end.
    write_records(tmp_path / "a.tfrecord", _records([*GOOD, idat_bomb(64), idat_bomb(20, 1000)]))
    count, problems = file_problems(str(tmp_path / "a.tfrecord"), LIMIT)
    assert count == 6 and sorted(problems) == [4, 5]
    assert "PNG of 16x16 pixels whose image data (IDAT chunks) take 65536 bytes" in problems[4]
    assert "PNG of 1000x1000 pixels whose compressed data inflates to more than the 1001000 bytes" in problems[5]
