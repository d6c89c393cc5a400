"""The EdgeExporter's MediaPipe check feeds the eval images as apps do, at their own size and at a camera size
(MediaPipe resizes them itself), reports both and gates on them with the accuracy gate's rule."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from edge import app_client
from edge.app_client import ClientResult
from edge.data import LabeledImages
from edge.gate import SizeReference, check_app_client
from edge.options import EdgeOptions
from foundation.preprocessing_spec import PreprocessingSpec

LABELS = [str(digit) for digit in range(10)]
SPEC = PreprocessingSpec(image_size=16, channels=1)


def _eval_data(count: int = 20) -> LabeledImages:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(count, 8, 8, 1), dtype=np.uint8)
    return LabeledImages(
        images=np.zeros((count, 16, 16, 1), np.float32),
        labels=np.arange(count, dtype=np.int64) % 10,
        frames=np.zeros((count, 16, 16, 3), np.uint8),
        encoded=tuple(tf.io.encode_png(image).numpy() for image in pixels),
    )


class _FakeMediaPipe:
    """Answers like MediaPipe: right on every frame, except `wrong` frames of the named sets; records the shapes."""

    def __init__(self, data: LabeledImages, wrong: Mapping[str, int]) -> None:
        self.data, self.wrong, self.shapes = data, wrong, {}

    def __call__(
        self,
        tflite: bytes,
        sets: Mapping[str, Iterable[Sequence[np.ndarray]]],
        spec: PreprocessingSpec | None,
        already_cropped: Sequence[str] = (),
    ) -> dict[str, ClientResult]:
        self.already_cropped = tuple(already_cropped)
        answers = {}
        for name, chunks in sets.items():
            frames = [frame for chunk in chunks for frame in chunk]
            self.shapes[name] = {frame.shape for frame in frames}
            indices = self.data.labels.copy()
            indices[: self.wrong.get(name, 0)] = (indices[: self.wrong.get(name, 0)] + 1) % 10
            labels = tuple(LABELS[index] for index in indices)
            answers[name] = ClientResult(indices, np.ones(len(indices), np.float32), labels, "1.2.2")
        return answers


def _check(monkeypatch: pytest.MonkeyPatch, wrong: Mapping[str, int], **options: object):  # type: ignore[no-untyped-def]
    data = _eval_data()
    fake = _FakeMediaPipe(data, wrong)
    monkeypatch.setattr("edge.gate.classify_sets", fake)
    check = check_app_client(b"tflite", data, data.labels, LABELS, EdgeOptions(**options), SizeReference(1.0, SPEC))
    return check, fake


def test_mediapipe_gets_the_eval_images_at_the_models_size_their_own_and_a_camera_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check, fake = _check(monkeypatch, {})
    assert fake.shapes == {"model": {(16, 16, 3)}, "own": {(8, 8, 3)}, "camera": {(240, 240, 3)}}
    assert fake.already_cropped == ("model",)  # a central crop is MediaPipe's region of interest on the others only
    assert check.passed
    sizes = check.to_json()["sizes"]
    assert sizes["own"]["accuracy"] == sizes["camera"]["accuracy"] == 1.0
    assert sizes["camera"]["frame_size"] == [240, 240] and sizes["own"]["frame_size"] == "own"
    assert "accuracy 1.0000 on frames at their own size (MediaPipe resizes them)" in check.reason

    _, vga = _check(monkeypatch, {}, app_frame_size=(480, 640))
    assert vga.shapes["camera"] == {(480, 640, 3)}


@pytest.mark.parametrize(("size", "words"), [("own", "at their own size"), ("camera", "at 240×240")])
def test_accuracy_on_resized_frames_below_the_savedmodels_by_more_than_max_app_accuracy_drop_blocks_the_push(
    monkeypatch: pytest.MonkeyPatch, size: str, words: str
) -> None:
    check, _ = _check(monkeypatch, {size: 2})  # 2 of 20 wrong: 10 points below the SavedModel's 1.0

    assert not check.passed and check.reason.endswith("not pushed")
    assert check.details["agreement"] == 1.0  # at the model's size MediaPipe and LiteRT still agree
    assert (
        f"accuracy 0.9000 on frames {words} (MediaPipe resizes them), 10.00 points below the SavedModel's, beyond "
        "edge.max_app_accuracy_drop 2.00 points"
    ) in check.reason
    recorded = check.to_json()["sizes"][size]
    assert (recorded["accuracy"], recorded["drop"], recorded["passed"]) == (
        pytest.approx(0.9),
        pytest.approx(0.1),
        False,
    )
    loose, _ = _check(monkeypatch, {size: 2}, max_app_accuracy_drop=0.1)
    assert loose.passed


def test_the_camera_size_and_the_limit_are_typed_keys() -> None:
    assert EdgeOptions().app_frame_size == (240, 240) and EdgeOptions().max_app_accuracy_drop == 0.02
    assert EdgeOptions(app_frame_size=[480, 640]).app_frame_size == (480, 640)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="app_frame_size"):
        EdgeOptions(app_frame_size=(0, 640))


def test_whole_frames_get_the_central_square_as_region_of_interest_and_cropped_ones_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manifests = []

    def guest(arguments: Sequence[str], what: str) -> str:
        _, _, manifest, out = arguments
        manifests.append(json.loads(Path(manifest).read_text()))
        sets = {name: {"indices": [0], "scores": [1.0], "labels": ["0"]} for name in manifests[-1]["sets"]}
        Path(out).write_text(json.dumps({"sets": sets, "mediapipe": "1.2.2"}))
        return ""

    monkeypatch.setattr(app_client, "_run", guest)
    cropped = PreprocessingSpec(image_size=16, channels=1, central_crop=0.875)
    sets = {"model": [[np.zeros((16, 16, 3), np.uint8)]], "camera": [[np.zeros((480, 640, 3), np.uint8)]]}
    app_client.classify_sets(b"tflite", sets, cropped, already_cropped=("model",))

    (chunk,) = manifests[-1]["sets"]["model"]
    assert chunk["rois"] is None
    (chunk,) = manifests[-1]["sets"]["camera"]
    assert chunk["rois"] == [pytest.approx(list(app_client.central_square_roi(480, 640, 0.875, 16)))]


def test_the_run_summary_reports_mediapipes_accuracy_at_both_sizes(tmp_path: Path) -> None:
    from components.edge_exporter.summary import edge_summary

    sizes = {"own": {"accuracy": 0.9916, "frame_size": "own"}, "camera": {"accuracy": 0.9889, "frame_size": [240, 240]}}
    metadata = {
        "blessed": True,
        "pushed_path": str(tmp_path / "edge" / "digits" / "1"),
        "mode": "int8",
        "accuracy": {"tflite": 0.99, "saved_model": 0.99, "drop": 0.0},
        "size_bytes": 1,
        "latency": {"p50_ms": 0.1, "p99_ms": 0.2},
        "app_client": {"accuracy": 0.99, "agreement": 1.0, "sizes": sizes},
    }
    (tmp_path / "edge_metadata.json").write_text(json.dumps(metadata))

    metrics = edge_summary(tmp_path)["metrics"]
    assert metrics["edge_mediapipe_accuracy_own_size"] == 0.9916
    assert metrics["edge_mediapipe_accuracy_camera_size"] == 0.9889
