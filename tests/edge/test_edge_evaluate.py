"""edge.runtime, evaluate, benchmark, export, gate and publish: accuracy, latency, the gate and the push."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from edge_fixtures import LABELS, SPEC, synthetic_images, write_split

from edge.benchmark import LatencyStats, benchmark
from edge.data import LabeledImages, load_split
from edge.errors import EdgeError
from edge.evaluate import accuracy_of, evaluate, evaluate_saved_model
from edge.export import EdgeExport, export_edge_model
from edge.gate import GateResult, accuracy_gate
from edge.held import held_releases, hold_edge_model, settle_held
from edge.inputs import edge_inputs, read_labels, read_preprocessing
from edge.options import EdgeOptions
from edge.publish import EDGE_FILES, push_edge_model, write_edge_model
from edge.quantize import convert
from edge.runtime import TfliteModel, read_tflite
from foundation.contract import SAVED_MODEL_FILE
from foundation.model_identity import model_identity
from foundation.publish import PUSH_RECORD, find_published, list_versions, publish_version


@pytest.fixture(scope="module")
def eval_data(data_dir: Path) -> LabeledImages:
    return load_split(data_dir, "eval", SPEC)


@pytest.fixture(scope="module")
def int8_model(saved_model: Path, data_dir: Path) -> bytes:
    calibration = load_split(data_dir, "train", SPEC, limit=100, shuffle=True).frames
    return convert(saved_model, "int8", calibration, io_dtype="uint8")


def test_accuracy_of_counts_per_class_and_marks_absent_classes() -> None:
    probabilities = np.eye(3)[[0, 0, 1, 2, 1]]
    labels = np.array([0, 1, 1, 1, 1])

    result = accuracy_of(probabilities, labels)

    assert result.accuracy == pytest.approx(3 / 5)
    assert result.per_class_accuracy == (1.0, 0.5, None)
    assert result.per_class_by_name(["a", "b", "c"]) == {"a": 1.0, "b": 0.5, "c": None}


def test_accuracy_of_rejects_labels_outside_the_model_classes() -> None:
    with pytest.raises(EdgeError, match=r"labels span 0..4 but the model has 3 classes; check data.label_offset"):
        accuracy_of(np.eye(3)[[0, 1]], np.array([0, 4]))


def test_int8_model_matches_the_saved_model_on_eval(saved_model: Path, int8_model: bytes, eval_data) -> None:
    reference = evaluate_saved_model(saved_model, eval_data)
    result = evaluate(TfliteModel(int8_model, threads=2), eval_data)

    assert reference.count == result.count == 120
    assert reference.accuracy >= 0.95  # the fixture model learned the task
    assert abs(reference.accuracy - result.accuracy) <= 0.02
    assert all(value is not None and value >= 0.8 for value in result.per_class_accuracy)


def test_quantized_predictions_track_float_probabilities(saved_model: Path, int8_model: bytes, eval_data) -> None:
    float_probabilities = TfliteModel(convert(saved_model, "none")).predict(eval_data.frames[:16])
    int8_probabilities = TfliteModel(int8_model).predict(eval_data.frames[:16], batch_size=5)

    assert int8_probabilities.dtype == np.float32
    np.testing.assert_allclose(int8_probabilities, float_probabilities, atol=0.05)


def test_predict_rejects_images_of_another_size(int8_model: bytes) -> None:
    with pytest.raises(EdgeError, match=r"images of shape \[2, 8, 8, 3\] do not fit the TFLite input \[1, 16, 16, 3\]"):
        TfliteModel(int8_model).predict(np.zeros((2, 8, 8, 3), np.uint8))


def test_a_file_that_is_not_tflite_is_rejected(tmp_path: Path) -> None:
    not_tflite = tmp_path / "model.tflite"
    not_tflite.write_bytes(b"PK\x03\x04 this is a zip file, not a flatbuffer")

    with pytest.raises(EdgeError, match=r"model.tflite is not a TFLite model \(no `TFL3` .*tfxp edge convert"):
        TfliteModel.load(not_tflite)
    with pytest.raises(EdgeError, match=r"cannot read TFLite model .*missing.tflite"):
        read_tflite(tmp_path / "missing.tflite")


def test_a_truncated_tflite_file_is_rejected(int8_model: bytes) -> None:
    with pytest.raises(EdgeError, match=r"LiteRT cannot load the given bytes"):
        TfliteModel(int8_model[: len(int8_model) // 2], where="the given bytes")


def test_benchmark_reports_ordered_percentiles_and_the_size(int8_model: bytes) -> None:
    result = benchmark(TfliteModel(int8_model, threads=2), runs=30, warmup=3)

    assert result.size_bytes == len(int8_model)
    assert result.threads == 2
    assert result.latency.runs == 30
    assert 0 < result.latency.p50_ms <= result.latency.p99_ms
    assert result.to_json()["batch"] == 1


def test_latency_stats_are_percentiles_in_milliseconds() -> None:
    stats = LatencyStats.of([0.001] * 98 + [0.010, 0.020])

    assert stats.p50_ms == pytest.approx(1.0)
    assert 10.0 <= stats.p99_ms <= 20.0
    with pytest.raises(EdgeError, match="no latency samples"):
        LatencyStats.of([])


def test_accuracy_gate_blesses_within_the_limit_and_says_by_how_much_otherwise() -> None:
    assert accuracy_gate(0.95, 0.945, max_drop=0.01).blessed
    assert accuracy_gate(0.95, 0.94, max_drop=0.01).blessed  # exactly at the limit
    refused = accuracy_gate(0.95, 0.90, max_drop=0.01)

    assert not refused.blessed
    assert refused.drop == pytest.approx(0.05)
    assert "accuracy drop 5.00 points" in refused.reason
    assert "exceeds edge.max_accuracy_drop 1.00 points, by 4.00 points; not pushed" in refused.reason


def test_read_preprocessing_falls_back_to_the_signature_shape(saved_model: Path, tmp_path: Path) -> None:
    assert read_preprocessing(saved_model) == SPEC
    without_asset = tmp_path / "model"
    shutil.copytree(saved_model, without_asset)
    (without_asset / "assets" / "preprocessing.json").unlink()

    assert read_preprocessing(without_asset) == SPEC


@pytest.mark.parametrize(
    ("size", "message"),
    [
        # A hand-edited asset: 3e9 made, exit 0, a device model declaring [1, 3e9, 3e9, 3] frames.
        (3_000_000_000, r"preprocessing.json: PreprocessingSpec.image_size must be an int in 1\.\.4096"),
        # Within the bound, but not what the model takes (its signature takes 16).
        (
            32,
            r"preprocessing.json says image_size 32 and channels 1, but the model's `serving_preprocessed` "
            r"signature takes \[None, 16, 16, 1\]",
        ),
    ],
)
def test_a_preprocessing_asset_that_the_signature_contradicts_is_refused(
    saved_model: Path, tmp_path: Path, size: int, message: str
) -> None:
    edited = shutil.copytree(saved_model, tmp_path / "model")
    asset = edited / "assets" / "preprocessing.json"
    asset.write_text(json.dumps({**json.loads(asset.read_text()), "image_size": size}))

    with pytest.raises(EdgeError, match=message):
        read_preprocessing(edited)


def test_export_measures_gates_and_writes_the_edge_model(saved_model: Path, data_dir: Path, tmp_path: Path) -> None:
    options = EdgeOptions(mode="int8", io_dtype="int8", representative_samples=64, app_client="none")
    export = export_edge_model(saved_model, data_dir, options, benchmark_runs=10)
    write_edge_model(export, tmp_path / "edge")

    metadata = json.loads((tmp_path / "edge" / "edge_metadata.json").read_text())
    assert export.blessed
    assert (tmp_path / "edge" / "labels.txt").read_text().split() == LABELS
    assert (tmp_path / "edge" / "model.tflite").read_bytes() == export.tflite
    assert metadata["input"]["dtype"] == "int8"
    assert metadata["input"]["quantization"]["zero_point"] == -128
    assert metadata["input"]["shape"] == [1, 16, 16, 3]
    assert metadata["normalization"]["pixel_range"] == [0.0, 255.0]
    assert metadata["normalization"]["color_space"] == "RGB"
    assert metadata["made_from"]["options"]["mode"] == "int8"
    assert metadata["identity"].startswith("edge:")
    assert metadata["representative_samples"] == 64
    assert metadata["accuracy"]["eval_examples"] == 120
    assert metadata["accuracy"]["drop"] == pytest.approx(
        metadata["accuracy"]["saved_model"] - metadata["accuracy"]["tflite"]
    )
    assert set(metadata["accuracy"]["per_class_tflite"]) == set(LABELS)
    assert metadata["size_bytes"] == len(export.tflite)
    assert metadata["latency"]["runs"] == 10
    assert metadata["pushed_path"] is None


def _blessed_export(int8_model: bytes, made_from: bytes = b"what went into the model") -> EdgeExport:
    metadata = {
        "identity": "edge:" + hashlib.sha256(made_from).hexdigest(),
        "mode": "int8",
        "input": TfliteModel(int8_model).input.to_json(),
        "accuracy": {"tflite": 0.99, "saved_model": 1.0, "eval_examples": 120},
    }
    return EdgeExport(tflite=int8_model, labels=LABELS, metadata=metadata, gate=GateResult(True, 0.0, "within"))


def test_push_is_a_complete_new_version_and_a_repush_reuses_it(int8_model: bytes, tmp_path: Path) -> None:
    export = _blessed_export(int8_model)
    identity, metadata, gate = export.metadata["identity"], export.metadata, export.gate
    base = tmp_path / "edge" / "digits"

    target = push_edge_model(export, tmp_path / "artifact", base)
    again = push_edge_model(export, tmp_path / "rerun", base)

    assert again == target and list_versions(base) == [target]  # no staging left behind, no duplicate
    assert sorted(path.name for path in Path(target).iterdir()) == sorted([*EDGE_FILES, PUSH_RECORD, "release.json"])
    release = json.loads((Path(target) / "release.json").read_text())
    assert release["sha256"] == hashlib.sha256(int8_model).hexdigest() and release["size_bytes"] == len(int8_model)
    assert release["input"]["shape"] == [1, 16, 16, 3] and release["input"]["dtype"] == "uint8"
    assert release["labels"]["sha256"] == hashlib.sha256(b"top\nbottom\nleft\nright\n").hexdigest()
    assert release["min_litert_version"] and release["min_litert_version"][0].isdigit()
    assert release["accuracy"]["host_litert"] == 0.99
    assert (Path(target) / "model.tflite").read_bytes() == int8_model
    for pushed in (Path(target), tmp_path / "artifact", tmp_path / "rerun"):
        assert json.loads((pushed / "edge_metadata.json").read_text())["pushed_path"] == target
    assert find_published(base, identity) == target
    # The same bytes from other inputs are another version: the identity is what went in, not the bytes.
    other = EdgeExport(
        tflite=int8_model, labels=LABELS, metadata={**metadata, "identity": "edge:" + "0" * 64}, gate=gate
    )
    assert int(Path(push_edge_model(other, tmp_path / "other", base)).name) > int(Path(target).name)


def test_the_saved_models_label_map_follows_the_one_rule(tmp_path: Path) -> None:
    (tmp_path / "assets").mkdir()
    with pytest.raises(EdgeError, match=r"assets/labels.txt does not exist; the model contract puts the label map"):
        read_labels(tmp_path)
    (tmp_path / "assets" / "labels.txt").write_text("cat\n\ndog\n")
    with pytest.raises(EdgeError, match=r"assets/labels.txt has a blank line at line 2"):
        read_labels(tmp_path)


def test_the_device_models_identity_follows_the_saved_models_content_not_its_path(
    saved_model: Path, data_dir: Path, tmp_path: Path
) -> None:
    options = EdgeOptions(mode="none")
    here = edge_inputs(saved_model, data_dir, options)
    moved = edge_inputs(Path(shutil.copytree(saved_model, tmp_path / "moved")), data_dir, options)
    assert moved.identity == here.identity  # the same model from another path: the same device model
    assert here.recipe["saved_model"]["identity"] == model_identity(saved_model)
    assert here.recipe["saved_model"]["path"] == str(saved_model)  # recorded, not hashed
    renamed = Path(shutil.copytree(saved_model, tmp_path / "renamed"))
    (renamed / "assets" / "labels.txt").write_text("".join(f"class {name}\n" for name in LABELS))
    assert edge_inputs(renamed, data_dir, options).identity != here.identity


def test_an_eval_subset_is_a_sample_across_classes(saved_model: Path, tmp_path: Path) -> None:
    images, labels = synthetic_images(120, seed=7)
    order = np.argsort(labels, kind="stable")  # a class-sorted shard: its first 40 records are all class 0
    write_split(tmp_path / "Split-eval" / "data_tfrecord-00000-of-00001.gz", images[order], labels[order])

    export = export_edge_model(saved_model, tmp_path, EdgeOptions(mode="none", eval_samples=40), benchmark_runs=2)

    assert export.metadata["accuracy"]["eval_examples"] == 40
    assert None not in export.metadata["accuracy"]["per_class_tflite"].values()


def _serving_version(serving_base: Path, saved_model: str, model: str | None = None) -> int:
    """A serving version published from `saved_model` holding the model `model`, as the Pusher writes it (with
    `model` None, as it wrote it before the model identity: the path as the identity)."""
    source = serving_base.parent / f"model-{hashlib.sha256(f'{saved_model}{model}'.encode()).hexdigest()[:8]}"
    source.mkdir(parents=True)
    (source / SAVED_MODEL_FILE).write_bytes(b"")
    if model is None:
        return int(Path(publish_version(source, serving_base, identity=saved_model, last_file=SAVED_MODEL_FILE)).name)
    extra = {"saved_model": saved_model}
    version = publish_version(source, serving_base, identity=model, last_file=SAVED_MODEL_FILE, record_extra=extra)
    return int(Path(version).name)


def test_a_held_release_is_published_once_its_saved_model_is_stable(int8_model: bytes, tmp_path: Path) -> None:
    edge_base, serving_base = tmp_path / "edge" / "digits", tmp_path / "serving" / "digits"
    first, second = "/runs/Trainer/model/7/Format-Serving", "/runs/Trainer/model/9/Format-Serving"
    v1, v2 = _serving_version(serving_base, first, "model:1"), _serving_version(serving_base, second, "model:2")
    hold_edge_model(_blessed_export(int8_model, b"one"), tmp_path / "artifact-1", edge_base, first, model="model:1")
    hold_edge_model(_blessed_export(int8_model, b"two"), tmp_path / "artifact-2", edge_base, second, model="model:2")
    assert list_versions(edge_base) == [] and sorted(held_releases(edge_base)) == [first, second]

    # v2 is the canary: only stable v1's release goes out, with its version in its metadata.
    (done,) = settle_held(edge_base, serving_base, stable=v1, rolled_back=())
    assert (done.action, done.saved_model, done.model_identity) == ("published", first, "model:1")
    assert list_versions(edge_base) == [done.version_dir]
    published = Path(str(done.version_dir))
    assert json.loads((published / "edge_metadata.json").read_text())["pushed_path"] == done.version_dir
    assert (published / "release.json").is_file() and (published / "model.tflite").read_bytes() == int8_model
    assert list(held_releases(edge_base)) == [second]
    assert settle_held(edge_base, serving_base, stable=v1, rolled_back=()) == []  # idempotent

    # v2 rolled back: its release is dropped, never published.
    (dropped,) = settle_held(edge_base, serving_base, stable=v1, rolled_back=(v2,))
    assert (dropped.action, dropped.version_dir) == ("dropped", None)
    assert held_releases(edge_base) == {} and list_versions(edge_base) == [done.version_dir]


def test_held_releases_follow_the_model_not_the_path_it_was_trained_at(int8_model: bytes, tmp_path: Path) -> None:
    """The pipeline root removed, execution ids restart: a new model comes from the path of an earlier one. Each
    held release waits for the serving version holding its own model."""
    edge_base, serving_base = tmp_path / "edge" / "digits", tmp_path / "serving" / "digits"
    path = "/runs/Trainer/model/7/Format-Serving"
    v1, v2 = _serving_version(serving_base, path, "model:old"), _serving_version(serving_base, path, "model:new")
    hold_edge_model(_blessed_export(int8_model, b"old"), tmp_path / "a", edge_base, path, model="model:old")
    hold_edge_model(_blessed_export(int8_model, b"new"), tmp_path / "b", edge_base, path, model="model:new")

    (done,) = settle_held(edge_base, serving_base, stable=v2, rolled_back=())

    assert (done.action, done.model_identity) == ("published", "model:new")
    release = json.loads((Path(str(done.version_dir)) / "release.json").read_text())
    assert release["identity"] == _blessed_export(int8_model, b"new").metadata["identity"]
    (dropped,) = settle_held(edge_base, serving_base, stable=v2, rolled_back=(v1,))
    assert (dropped.action, dropped.model_identity) == ("dropped", "model:old")


def test_a_release_held_before_the_model_identity_waits_for_its_saved_models_path(
    int8_model: bytes, tmp_path: Path
) -> None:
    edge_base, serving_base = tmp_path / "edge" / "digits", tmp_path / "serving" / "digits"
    path = "/runs/Trainer/model/7/Format-Serving"
    held = hold_edge_model(_blessed_export(int8_model, b"one"), tmp_path / "a", edge_base, path, model="model:1")
    Path(f"{held}.json").write_text(json.dumps({"saved_model": path, "identity": "edge:1"}))  # as written before
    version = _serving_version(serving_base, path)  # a push record of then: the path as the identity

    (done,) = settle_held(edge_base, serving_base, stable=version, rolled_back=())

    assert (done.action, done.saved_model, done.model_identity) == ("published", path, "")


def test_holding_again_from_the_same_saved_model_replaces_the_held_release(int8_model: bytes, tmp_path: Path) -> None:
    edge_base = tmp_path / "edge" / "digits"
    saved_model = "/runs/Trainer/model/7/Format-Serving"
    first = hold_edge_model(_blessed_export(int8_model, b"one"), tmp_path / "a", edge_base, saved_model, model="m:1")
    again = hold_edge_model(
        _blessed_export(int8_model, b"one again"), tmp_path / "b", edge_base, saved_model, model="m:1"
    )
    assert first == again and list(held_releases(edge_base)) == [saved_model]
    assert not json.loads((tmp_path / "a" / "edge_metadata.json").read_text())["pushed_path"]


@pytest.mark.parametrize("record", ["{bad", '{"x": 1}', '["a"]', '{"saved_model": ""}'])
def test_a_damaged_held_record_is_refused_naming_the_file(tmp_path: Path, record: str) -> None:
    held = tmp_path / "edge" / "digits" / "tfxp_held"
    held.mkdir(parents=True)
    (held / "abc.json").write_text(record)
    with pytest.raises(EdgeError, match=r"tfxp_held/abc.json is not a held edge release's record.*remove it"):
        held_releases(tmp_path / "edge" / "digits")
