"""`tfxp edge convert | eval | inspect | bench` through Typer's CliRunner."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from edge_fixtures import MEDIAPIPE_PYTHON, needs_mediapipe
from typer.testing import CliRunner

from pipeline.cli import app

runner = CliRunner()


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)  # rich wraps long error paragraphs


def test_convert_eval_and_bench_an_int8_model(saved_model: Path, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "device" / "model.tflite"

    converted = runner.invoke(
        app,
        [
            "edge",
            "convert",
            str(saved_model),
            "--mode",
            "int8",
            "--examples",
            str(data_dir),
            "--samples",
            "50",
            "--io-dtype",
            "uint8",
            "--no-metadata",
            "--out",
            str(out),
        ],
    )
    assert converted.exit_code == 0, converted.output
    assert "calibrated on 50 train images" in converted.output
    assert out.read_bytes()[4:8] == b"TFL3"

    evaluated = runner.invoke(app, ["edge", "eval", str(out), "--examples", str(data_dir), "--threads", "1"])
    assert evaluated.exit_code == 0, evaluated.output
    assert "(eval, 120 examples)" in _flat(evaluated.output)
    overall = float(re.search(r"│ all\s+│\s+([0-9.]+)", evaluated.output).group(1))  # type: ignore[union-attr]
    assert overall >= 0.9
    assert "left" in evaluated.output  # class names from the data dir's labels.txt

    benched = runner.invoke(app, ["edge", "bench", str(out), "--runs", "20", "--warmup", "2"])
    assert benched.exit_code == 0, benched.output
    assert re.search(
        r"input uint8 \[1, 16, 16, 3\]; batch 1, 2 threads, 20 runs: p50 [0-9.]+ ms", _flat(benched.output)
    )


@needs_mediapipe
def test_convert_writes_metadata_that_inspect_prints_and_mediapipe_agrees_in_eval(
    saved_model: Path, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "model.tflite"
    arguments = ["edge", "convert", str(saved_model), "--mode", "int8", "--examples", str(data_dir), "--out", str(out)]
    assert (converted := runner.invoke(app, arguments)).exit_code == 0, converted.output

    inspected = runner.invoke(app, ["edge", "inspect", str(out)])
    assert inspected.exit_code == 0, inspected.output
    text = _flat(inspected.output)
    assert "labels.txt (4 lines): top, bottom, left, right" in text
    assert "color space RGB" in text and "'mean': [0.0], 'std': [1.0]" in text

    evaluated = runner.invoke(app, ["edge", "eval", str(out), "--examples", str(data_dir), "--client", "mediapipe"])
    assert evaluated.exit_code == 0, evaluated.output
    assert re.search(
        r"MediaPipe 1\.2\.2 ImageClassifier: top-1 agrees with LiteRT on 1[12]\d/120", _flat(evaluated.output)
    )
    assert "labels from the model's metadata: bottom, left, right, top" in _flat(evaluated.output)


def test_inspect_of_a_model_without_metadata_says_so(tmp_path: Path, saved_model: Path) -> None:
    out = tmp_path / "bare.tflite"
    converted = runner.invoke(
        app, ["edge", "convert", str(saved_model), "--mode", "none", "--no-metadata", "--out", str(out)]
    )
    assert converted.exit_code == 0, converted.output
    if not MEDIAPIPE_PYTHON.is_file():
        pytest.skip(f"no MediaPipe venv ({MEDIAPIPE_PYTHON}); `make setup` creates .venv-mediapipe")

    result = runner.invoke(app, ["edge", "inspect", str(out)])
    assert result.exit_code == 2
    assert "does not have metadata" in _flat(result.output)


def test_convert_int8_without_examples_explains_the_fix(saved_model: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["edge", "convert", str(saved_model), "--mode", "int8", "--out", str(tmp_path / "m")])

    assert result.exit_code == 2
    assert "needs representative data" in _flat(result.output)
    assert "--examples DIR" in _flat(result.output)
    assert not (tmp_path / "m").exists()


def test_convert_unknown_mode_lists_the_modes(saved_model: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["edge", "convert", str(saved_model), "--mode", "int4", "--out", str(tmp_path / "m")])

    assert result.exit_code == 2
    assert "unknown quantization mode 'int4'" in _flat(result.output)
    assert "'float16'" in _flat(result.output)


@pytest.mark.parametrize("command", ["eval", "bench"])
def test_eval_and_bench_reject_a_file_that_is_not_tflite(command: str, data_dir: Path, tmp_path: Path) -> None:
    fake = tmp_path / "model.tflite"
    fake.write_text("definitely not a flatbuffer")
    extra = ["--examples", str(data_dir)] if command == "eval" else []

    result = runner.invoke(app, ["edge", command, str(fake), *extra])

    assert result.exit_code == 2
    assert "is not a TFLite model" in _flat(result.output)
