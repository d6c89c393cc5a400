"""The device model as apps load it: TFLite Model Metadata inside it, and MediaPipe's ImageClassifier on it.

Both run `edge/mediapipe_guest.py` in the MediaPipe venv (`.venv-mediapipe`, made by `make setup` from
`constraints-mediapipe.txt`; `$TFXP_MEDIAPIPE_PYTHON` names another interpreter): MediaPipe 1.2.2 needs
absl-py ~= 2.3, TFX pins absl-py < 2. The metadata is written with tflite-support's maintained writer for image
classifiers (the label file, normalization, color space, name, version, description), so MediaPipe reads the
labels and the input handling from the model itself; `classify` is the client check the EdgeExporter gates on.

A model trained with a central crop (`PreprocessingSpec.central_crop` < 1) is fed as TF Serving feeds its
SavedModel when the app passes MediaPipe the central square as its region of interest (`central_square_roi`):
MediaPipe crops that region and resizes it to the model input (docs/edge.md, "The central crop").

Example:
    with_metadata = with_model_metadata(tflite, labels, MetadataSpec(name="digits", version="...", description="..."))
    top1 = classify(with_metadata, eval_data.frames).indices  # MediaPipe's top-1 per frame
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge.errors import EdgeError
from foundation.bounded import parse_json, read_document
from foundation.contract import LABELS_FILE, write_label_map
from foundation.preprocessing_spec import PreprocessingSpec, central_square

GUEST = Path(__file__).with_name("mediapipe_guest.py")
MEDIAPIPE_VENV = Path(__file__).resolve().parents[1] / ".venv-mediapipe"
PYTHON_ENV = "TFXP_MEDIAPIPE_PYTHON"
# The model's input takes frames as they are: scaling and gray conversion are in its graph (edge.camera).
IDENTITY_NORMALIZATION = {"norm_mean": [0.0], "norm_std": [1.0]}
_TIMEOUT_S = 600


class AppClientUnavailableError(EdgeError):
    """The MediaPipe venv is not there (or its interpreter does not start)."""


@dataclass(frozen=True)
class MetadataSpec:
    """What the metadata says besides the labels and the input normalization.

    Attributes:
        name: Model name (e.g. `digits`).
        version: Where it came from (tfxp version, the SavedModel, the edge mode).
        description: What it does and how well (dataset, host accuracy).
        input_description: How to feed it (frame size, type, pixel range).
        author: Defaults to `tfxp`.
    """

    name: str
    version: str
    description: str
    input_description: str
    author: str = "tfxp"


@dataclass(frozen=True)
class ClientResult:
    """MediaPipe ImageClassifier's answer per frame.

    Attributes:
        indices: Top-1 class index per frame.
        scores: Its score.
        labels: Its label, as MediaPipe read it from the model's metadata.
        version: The mediapipe package version.
    """

    indices: np.ndarray
    scores: np.ndarray
    labels: tuple[str, ...]
    version: str


def mediapipe_python() -> str:
    """The MediaPipe venv's interpreter.

    Raises:
        AppClientUnavailableError: neither `$TFXP_MEDIAPIPE_PYTHON` nor `.venv-mediapipe/bin/python` exists.
    """
    configured = os.environ.get(PYTHON_ENV)
    python = Path(configured) if configured else MEDIAPIPE_VENV / "bin" / "python"
    if not python.is_file():
        raise AppClientUnavailableError(
            f"no MediaPipe venv at {python}: run `make setup` (it creates .venv-mediapipe from "
            f"constraints-mediapipe.txt), or point ${PYTHON_ENV} at a Python with mediapipe and tflite-support; "
            "or set edge.app_client=none to export without metadata and without the MediaPipe check"
        )
    return str(python)


def _run(arguments: Sequence[str], what: str) -> str:
    command = [mediapipe_python(), str(GUEST), *arguments]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AppClientUnavailableError(f"cannot run the MediaPipe venv's Python ({command[0]}): {error}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        if "ModuleNotFoundError" in last:
            raise AppClientUnavailableError(f"{command[0]} lacks a package ({last}); run `make setup` again")
        raise EdgeError(f"{what} failed in MediaPipe's venv: {last}")
    return done.stdout


def with_model_metadata(tflite: bytes, labels: Sequence[str], spec: MetadataSpec) -> bytes:
    """The model with TFLite Model Metadata: `labels.txt` packed in, identity normalization, RGB, `spec`.

    Raises:
        AppClientUnavailableError: no MediaPipe venv. EdgeError: the writer refused the model.
    """
    with tempfile.TemporaryDirectory(prefix="tfxp-metadata-") as work:
        root = Path(work)
        (root / "model.tflite").write_bytes(tflite)
        write_label_map(root / LABELS_FILE, list(labels))
        writer_spec = {**asdict(spec), **IDENTITY_NORMALIZATION, "labels_file": str(root / LABELS_FILE)}
        (root / "spec.json").write_text(json.dumps(writer_spec))
        _run(
            ["write", str(root / "model.tflite"), str(root / "out.tflite"), "--spec", str(root / "spec.json")],
            "writing the model metadata",
        )
        return (root / "out.tflite").read_bytes()


def read_metadata(tflite: bytes) -> dict[str, Any]:
    """{`metadata`: the model's metadata as JSON, `files`: {name: {`bytes`, `lines`}}} of the packed files.

    Raises:
        AppClientUnavailableError: no MediaPipe venv. EdgeError: the model has no metadata.
    """
    with tempfile.TemporaryDirectory(prefix="tfxp-metadata-") as work:
        path = Path(work) / "model.tflite"
        path.write_bytes(tflite)
        return dict(parse_json(_run(["inspect", str(path)], "reading the model metadata")))


def describe_metadata(found: Mapping[str, Any], where: str) -> list[str]:
    """`read_metadata`'s answer as lines for people: name and version, description, each input's colour space and
    normalisation, each output's label files, and the labels packed in each file; `where` names the model."""
    metadata = found["metadata"]
    (graph,) = metadata.get("subgraph_metadata", [{}])
    lines = [f"{where}: {metadata.get('name', '')} ({metadata.get('version', '')})", metadata.get("description", "")]
    for tensor in graph.get("input_tensor_metadata", []):
        units = [unit.get("options", {}) for unit in tensor.get("process_units", [])]
        color = tensor.get("content", {}).get("content_properties", {}).get("color_space", "")
        lines.append(
            f"input {tensor.get('name')}: {tensor.get('description', '')} color space {color}, normalization {units}"
        )
    for tensor in graph.get("output_tensor_metadata", []):
        files = [entry.get("name") for entry in tensor.get("associated_files", [])]
        lines.append(f"output {tensor.get('name')}: {tensor.get('description', '')} labels in {files}")
    for name, packed in found["files"].items():
        lines.append(f"{name} ({len(packed['lines'])} lines): {', '.join(packed['lines'])}")
    return lines


def central_square_roi(height: int, width: int, fraction: float, image_size: int) -> tuple[float, float, float, float]:
    """MediaPipe's region of interest for a height × width frame: (left, top, right, bottom) in [0, 1].

    It covers the square the serving signatures keep (`foundation.preprocessing_spec.central_square`: side
    ⌊fraction · min(h, w)⌋ at the centre), so that MediaPipe, which crops the region and resizes it to the
    `image_size` model input, feeds the model what TF Serving feeds the SavedModel. An app computes it once per
    camera resolution and passes it as `ImageProcessingOptions(region_of_interest=RectF(...))`.

    The square is moved by (scale − 1) / 2 frame pixels right and down (scale = side / image_size): MediaPipe's CPU
    resize (`cv::warpPerspective`, INTER_LINEAR, from the region's corners to the tensor's; mediapipe
    calculators/tensor/image_to_tensor_converter_opencv.cc:135-158 at 85c0cdc) samples output pixel j at
    left + j · scale, TensorFlow's half-pixel bilinear resize at left + (j + 0.5) · scale − 0.5; moved, both
    sample the same points. The move stays inside the frame's margin whenever image_size > fraction / (1 −
    fraction) (8 for 0.875); otherwise it is cut to the margin.

    Example:
        central_square_roi(480, 640, 0.875, 224)  # the 420 × 420 square at (110, 30), moved by 0.44 px
    """
    top, left, side = central_square(height, width, fraction)
    shift = (side / image_size - 1) / 2
    dy = min(max(shift, -top), height - top - side)
    dx = min(max(shift, -left), width - left - side)
    return (left + dx) / width, (top + dy) / height, (left + dx + side) / width, (top + dy + side) / height


def classify(tflite: bytes, frames: np.ndarray, spec: PreprocessingSpec | None = None) -> ClientResult:
    """MediaPipe ImageClassifier's top-1 for each RGB uint8 frame [N, H, W, 3].

    Args:
        tflite: The model, with metadata.
        frames: Frames at the model's size already cropped as serving crops (`edge.data`'s frames: MediaPipe
            then neither crops nor resizes, and sees exactly what LiteRT saw), or whole camera frames of any
            size with `spec`.
        spec: The model's preprocessing, for whole frames: with `central_crop` < 1, MediaPipe is given
            `central_square_roi` of the frames as its region of interest. Defaults to None: the whole frame.

    Raises:
        AppClientUnavailableError: no MediaPipe venv. EdgeError: MediaPipe cannot load or run the model.
    """
    return classify_sets(tflite, {"frames": [list(frames)]}, spec)["frames"]


def classify_sets(
    tflite: bytes,
    sets: Mapping[str, Iterable[Sequence[np.ndarray]]],
    spec: PreprocessingSpec | None = None,
    already_cropped: Collection[str] = (),
) -> dict[str, ClientResult]:
    """MediaPipe ImageClassifier's top-1 for each frame of each named set, in one run of the MediaPipe venv.

    Args:
        tflite: The model, with metadata.
        sets: Name → chunks of RGB uint8 frames [H, W, 3], of any size: MediaPipe resizes each to the model input
            itself, as in an app. The chunks are written one at a time, so a set of large frames is never whole
            in memory.
        spec: As in `classify`: with `central_crop` < 1, each frame's central square is its region of interest.
        already_cropped: Sets whose frames are cropped as serving crops already (no region of interest).

    Raises:
        AppClientUnavailableError: no MediaPipe venv. EdgeError: MediaPipe cannot load or run the model.
    """
    crop = spec is not None and spec.central_crop < 1.0
    with tempfile.TemporaryDirectory(prefix="tfxp-mediapipe-") as work:
        root = Path(work)
        (root / "model.tflite").write_bytes(tflite)
        manifest: dict[str, list[dict[str, Any]]] = {}
        for name, chunks in sets.items():
            manifest[name] = []
            for number, chunk in enumerate(chunks):
                path = root / f"{name}-{number:05d}.npz"
                np.savez(path, *(np.asarray(frame, np.uint8) for frame in chunk))  # arr_0, arr_1, …
                rois = None
                if crop and spec is not None and name not in already_cropped:
                    shapes = [frame.shape for frame in chunk]
                    rois = [central_square_roi(h, w, spec.central_crop, spec.image_size) for h, w, *_ in shapes]
                manifest[name].append({"frames": str(path), "rois": rois})
        (root / "manifest.json").write_text(json.dumps({"sets": manifest}))
        _run(
            ["classify", str(root / "model.tflite"), str(root / "manifest.json"), str(root / "out.json")],
            "MediaPipe ImageClassifier",
        )
        result = parse_json(read_document(root / "out.json", f"{root}/out.json"))
    return {
        name: ClientResult(
            indices=np.asarray(answer["indices"], np.int64),
            scores=np.asarray(answer["scores"], np.float32),
            labels=tuple(answer["labels"]),
            version=str(result["mediapipe"]),
        )
        for name, answer in result["sets"].items()
    }


def agreement(ours: np.ndarray, theirs: np.ndarray) -> float:
    """Fraction of frames whose top-1 class is the same in both (1.0 for none)."""
    return float(np.mean(np.asarray(ours) == np.asarray(theirs))) if len(ours) else 1.0
