"""Device model files read as far as needed and no further, and damaged records as one message (issue 35, classes 3
and 8): `tfxp edge inspect` refuses a file that is not TFLite after its first 8 bytes, not after reading it whole;
a release record that is not JSON ends `tfxp edge versions` with one message naming it."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edge.errors import EdgeError
from edge.runtime import read_tflite
from foundation.contract import EDGE_MODEL_FILE
from pipeline.cli import app


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, " ".join(result.output.split())


def test_a_large_file_that_is_not_tflite_is_refused_after_its_first_bytes(tmp_path: Path) -> None:
    video = tmp_path / "clip.tflite"
    with video.open("wb") as handle:
        handle.write(b"\x00\x00\x00\x18ftypmp42")
        handle.truncate(256 * 1024 * 1024)  # sparse: 256 MiB to a reader that reads it whole
    tracemalloc.start()
    try:
        with pytest.raises(EdgeError, match=r"is not a TFLite model .no `TFL3` flatbuffer identifier"):
            read_tflite(video)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    code, output = _invoke("edge", "inspect", str(video))
    assert code == 2 and f"{video} is not a TFLite model" in output


@pytest.mark.parametrize(
    "record",
    ['{"mode": "int8", "sha', "[" * 200_000 + "]" * 200_000],
    ids=["cut-off", "nested-200000-deep"],  # the second ended in a RecursionError traceback (second adversarial pass)
)
def test_a_damaged_release_record_is_one_message_naming_it(tmp_path: Path, record: str) -> None:
    version = tmp_path / "edge" / "digits" / "1"
    version.mkdir(parents=True)
    (version / EDGE_MODEL_FILE).write_bytes(b"\x1c\x00\x00\x00TFL3")
    (version / "release.json").write_text(record)
    code, output = _invoke("edge", "versions", str(tmp_path))
    assert code == 2, output
    assert f"release record {version}/release.json is not JSON" in output
    assert "Traceback" not in output


_RELEASE = {
    "input": {"dtype": "uint8", "shape": [1, 16, 16, 3]},
    "accuracy": {"mediapipe_agreement": None, "host_litert": 0.9},
    "mode": "int8",
    "size_bytes": 1,
    "sha256": "ab",
    "min_litert_version": None,
}


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({}, "mode: Field required"),  # a KeyError traceback before (third adversarial pass, B4)
        ({**_RELEASE, "accuracy": {"host_litert": "0.9"}}, "accuracy.host_litert: Input should be a valid number"),
        ({**_RELEASE, "size_bytes": 1e999}, "size_bytes: Input should be a valid integer"),
        ({**_RELEASE, "size_bytes": 10**4000}, "size_bytes: Input should be less than or equal to"),  # N4
        ([1], "the document: Input should be a valid dictionary"),
    ],
    ids=["empty", "text-accuracy", "infinite-size", "huge-size", "list"],
)
def test_a_release_record_of_another_shape_is_one_message_naming_the_field(
    tmp_path: Path, record: object, field: str
) -> None:
    version = tmp_path / "edge" / "digits" / "1"
    version.mkdir(parents=True)
    (version / EDGE_MODEL_FILE).write_bytes(b"\x1c\x00\x00\x00TFL3")
    (version / "release.json").write_text(json.dumps(record))
    code, output = _invoke("edge", "versions", str(tmp_path))
    assert code == 2, output
    assert f"release record {version}/release.json is not a record as tfxp writes one ({field}" in output
    assert "restore it, or remove it" in output and "Traceback" not in output


def test_a_release_record_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    version = tmp_path / "edge" / "digits" / "1"
    version.mkdir(parents=True)
    (version / EDGE_MODEL_FILE).write_bytes(b"\x1c\x00\x00\x00TFL3")
    os.mkfifo(version / "release.json")  # a plain read blocks until a writer opens it: forever
    code, output = _invoke("edge", "versions", str(tmp_path))
    assert code == 2, output
    assert f"cannot read release record {version}/release.json (not a regular file)" in output


def test_a_release_record_as_tfxp_writes_it_is_listed(tmp_path: Path) -> None:
    version = tmp_path / "edge" / "digits" / "1"
    version.mkdir(parents=True)
    (version / EDGE_MODEL_FILE).write_bytes(b"\x1c\x00\x00\x00TFL3")
    (version / "release.json").write_text(json.dumps({**_RELEASE, "format": "tfxp.edge-release/1"}))
    code, output = _invoke("edge", "versions", str(tmp_path))
    assert code == 0, output
    assert "uint8 1×16×16×3" in output and "0.9000" in output


def _saved_model_with(tmp_path: Path, special: str | None) -> Path:
    """A SavedModel-shaped directory (files as a tfxp export has them) with `special` a FIFO or a link to one."""
    model = tmp_path / "model"
    for name in ("saved_model.pb", "fingerprint.pb", "assets/labels.txt", "variables/variables.index"):
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        (model / name).write_bytes(b"x")
    if special is None:
        return model
    (model / special).unlink(missing_ok=True)
    if special.endswith(".link"):
        os.mkfifo(tmp_path / "fifo")
        (model / special).symlink_to(tmp_path / "fifo")
    else:
        os.mkfifo(model / special)
    return model


@pytest.mark.parametrize(
    "special",
    ["assets/preprocessing.json", "variables/variables.data-00000-of-00001", "saved_model.pb", "assets/x.link"],
)
def test_a_saved_model_with_a_fifo_among_its_files_is_refused_before_tensorflow_opens_it(
    tmp_path: Path, special: str
) -> None:
    # N7 (fourth adversarial pass): `tfxp edge convert` blocked forever on a FIFO assets/preprocessing.json (the
    # TFLite converter copies the assets). The check runs before the model is loaded or converted.
    from edge.camera import refuse_special_files

    model = _saved_model_with(tmp_path, special)
    with pytest.raises(EdgeError, match=f"{model / special} in the SavedModel {model} is not a regular file"):
        refuse_special_files(model)
    refuse_special_files(_saved_model_with(tmp_path / "clean", None))  # regular files only: passes


def test_edge_convert_of_a_saved_model_with_a_fifo_asset_is_one_message(tmp_path: Path) -> None:
    model = _saved_model_with(tmp_path, "assets/preprocessing.json")
    code, output = _invoke("edge", "convert", str(model), "--mode", "none", "--out", str(tmp_path / "m.tflite"))
    assert code == 2 and output.count("error:") == 1, output
    assert f"{model}/assets/preprocessing.json in the SavedModel {model} is not a regular file" in output
    assert "export the model again" in output
