"""Runs in the MediaPipe venv (`.venv-mediapipe`, made by `make setup`): writes, reads and uses TFLite Model Metadata.

`edge.app_client` starts it as a subprocess: MediaPipe 1.2.2 needs absl-py ~= 2.3 and TFX pins absl-py < 2, so
the two cannot share a venv. It imports only the standard library, numpy, tflite-support and mediapipe.

- `write`: puts metadata into a model with tflite-support's maintained writer for image classifiers
  (`tflite_support.metadata_writers.image_classifier`): the label file, the input normalization, name, version,
  description, author. MediaPipe 1.2.2's own writer (`mediapipe.tasks.python.metadata.metadata_writers`) cannot
  run from its wheel: its `metadata.py` imports `_pywrap_metadata_version`, which the 1.2.x wheels do not ship.
- `inspect`: prints the model's metadata (JSON) and its packed files as JSON.
- `classify`: MediaPipe Tasks' ImageClassifier, the API Android, iOS and web apps use, on sets of frames of any
  size (a JSON manifest of .npz chunks); writes the top-1 index and score of each frame (labels come from the
  model's own metadata). MediaPipe resizes each frame to the model input itself; with a region of interest
  (normalised left, top, right, bottom) per frame it crops that first: how an app feeds a model trained with a
  central crop (`edge.app_client.central_square_roi`).

Example (what `edge.app_client` runs):
    .venv-mediapipe/bin/python edge/mediapipe_guest.py write in.tflite out.tflite --spec spec.json
    .venv-mediapipe/bin/python edge/mediapipe_guest.py classify out.tflite manifest.json result.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def write(model: Path, out: Path, spec: dict[str, Any]) -> None:
    """Writes `model` with metadata as `spec` says (`edge.app_client.MetadataSpec.to_json`) to `out`."""
    from tflite_support import metadata_schema_py_generated as schema
    from tflite_support.metadata_writers import image_classifier, metadata_info, writer_utils

    labels = Path(spec["labels_file"])
    content = writer_utils.load_file(str(model))
    writer = image_classifier.MetadataWriter.create_from_metadata_info(
        model_buffer=content,
        general_md=metadata_info.GeneralMd(
            name=spec["name"], version=spec["version"], description=spec["description"], author=spec["author"]
        ),
        input_md=metadata_info.InputImageTensorMd(
            name="image",
            description=spec["input_description"],
            norm_mean=spec["norm_mean"],
            norm_std=spec["norm_std"],
            color_space_type=schema.ColorSpaceType.RGB,
            tensor_type=writer_utils.get_input_tensor_types(content)[0],
        ),
        output_md=metadata_info.ClassificationTensorMd(
            name="probabilities",
            description="Probability of each class, in the order of the label file.",
            label_files=[metadata_info.LabelFileMd(file_path=str(labels))],
            tensor_type=writer_utils.get_output_tensor_types(content)[0],
        ),
    )
    out.write_bytes(writer.populate())


def inspect(model: Path) -> dict[str, Any]:
    """The metadata (as tflite-support's displayer gives it) and the packed files' names, sizes and lines."""
    from tflite_support import metadata

    displayer = metadata.MetadataDisplayer.with_model_file(str(model))
    files = {}
    for name in displayer.get_packed_associated_file_list():
        content = displayer.get_associated_file_buffer(name)
        files[name] = {"bytes": len(content), "lines": content.decode("utf-8", "replace").splitlines()}
    return {"metadata": json.loads(displayer.get_metadata_json()), "files": files}


def classify(model: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """MediaPipe ImageClassifier's top-1 index, score and label for each frame of each set of the manifest.

    The manifest (`edge.app_client.classify_sets`) is {`sets`: {name: [{`frames`: .npz of RGB uint8 frames
    `arr_0`, `arr_1`, … of any size, `rois`: one (left, top, right, bottom) in [0, 1] per frame, or null}]}}: each set's
    chunks are read one at a time, and MediaPipe crops each frame's region of interest, when given, and resizes
    it to the model input itself, as in an app."""
    import mediapipe as mp
    import numpy as np
    from mediapipe.tasks.python import BaseOptions, vision
    from mediapipe.tasks.python.components.containers.rect import RectF

    options = vision.ImageClassifierOptions(base_options=BaseOptions(model_asset_path=str(model)), max_results=1)
    answers: dict[str, dict[str, list[Any]]] = {}
    with vision.ImageClassifier.create_from_options(options) as classifier:
        for name, chunks in manifest["sets"].items():
            answer: dict[str, list[Any]] = {"indices": [], "scores": [], "labels": []}
            for chunk in chunks:
                with np.load(chunk["frames"]) as frames:
                    for index in range(len(frames.files)):
                        frame = np.ascontiguousarray(frames[f"arr_{index}"], dtype=np.uint8)
                        image = mp.Image(image_format=mp.ImageFormat.SRGB, data=frame)
                        region = None
                        if chunk["rois"] is not None:
                            left, top, right, bottom = chunk["rois"][index]
                            rect = RectF(left=left, top=top, right=right, bottom=bottom)
                            region = vision.ImageProcessingOptions(region_of_interest=rect)
                        (head,) = classifier.classify(image, region).classifications
                        best = head.categories[0]
                        answer["indices"].append(int(best.index))
                        answer["scores"].append(float(best.score))
                        answer["labels"].append(best.category_name)
            answers[name] = answer
    return {"sets": answers, "mediapipe": mp.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    write_parser = commands.add_parser("write")
    write_parser.add_argument("model", type=Path)
    write_parser.add_argument("out", type=Path)
    write_parser.add_argument("--spec", type=Path, required=True, help="JSON: labels_file, name, version, ...")
    inspect_parser = commands.add_parser("inspect")
    inspect_parser.add_argument("model", type=Path)
    classify_parser = commands.add_parser("classify")
    classify_parser.add_argument("model", type=Path)
    classify_parser.add_argument("manifest", type=Path, help="JSON: the frame sets, their .npz chunks and regions")
    classify_parser.add_argument("out", type=Path, help="JSON with the top-1 of each frame of each set")
    args = parser.parse_args(argv)
    if args.command == "write":
        write(args.model, args.out, json.loads(args.spec.read_text()))
    elif args.command == "inspect":
        print(json.dumps(inspect(args.model), indent=2))
    else:
        args.out.write_text(json.dumps(classify(args.model, json.loads(args.manifest.read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
