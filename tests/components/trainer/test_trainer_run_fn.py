"""run_fn with a fake fn_args on the digits data: the exported SavedModel follows the model contract."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from components.trainer.options import TrainerConfigError
from components.trainer.run_fn import run_fn
from foundation.contract import IMAGE_KEY, LABEL_KEY, LabelMapError
from foundation.preprocessing import preprocess_image_bytes
from foundation.preprocessing_spec import PreprocessingSpec

TINY_TRAINER = {
    "image_size": 8,
    "channels": 1,
    "width": 4,
    "batch_size": 16,
    "train_steps": 7,
    "steps_per_epoch": 3,
    "schedule": {"warmup_steps": 2},
}


def make_fn_args(data_dir: Path, out: Path, trainer: dict[str, Any], **extra: Any) -> types.SimpleNamespace:
    """What the TFX Trainer passes to run_fn, for the data set at `data_dir`."""
    return types.SimpleNamespace(
        train_files=[str(data_dir / "train" / "*")],
        eval_files=[str(data_dir / "eval" / "*")],
        serving_model_dir=str(out / "Model" / "7" / "Format-Serving"),
        model_run_dir=str(out / "model_run" / "8"),
        custom_config={
            "trainer": trainer,
            "labels_path": str(data_dir / "labels.txt"),
            "label_offset": 0,
            "warmup_requests": 3,
            **extra,
        },
    )


@pytest.fixture(scope="module")
def trained(digits_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> types.SimpleNamespace:
    out = tmp_path_factory.mktemp("run_fn")
    fn_args = make_fn_args(digits_dir, out, TINY_TRAINER)
    run_fn(fn_args)
    return fn_args


def _eval_examples(digits_dir: Path, count: int) -> tuple[list[bytes], list[bytes], np.ndarray]:
    files = sorted(str(path) for path in (digits_dir / "eval").iterdir())
    serialized = [record.numpy() for record in tf.data.TFRecordDataset(files, compression_type="GZIP").take(count)]
    images, labels = [], []
    for record in serialized:
        example = tf.train.Example.FromString(record)
        images.append(example.features.feature[IMAGE_KEY].bytes_list.value[0])
        labels.append(example.features.feature[LABEL_KEY].int64_list.value[0])
    return serialized, images, np.array(labels)


def test_three_signatures_agree_and_return_float32(trained: types.SimpleNamespace, digits_dir: Path) -> None:
    loaded = tf.saved_model.load(trained.serving_model_dir)
    assert set(loaded.signatures) >= {"serving_default", "serving_tf_example", "serving_preprocessed"}
    serialized, images, _ = _eval_examples(digits_dir, 5)
    by_bytes = loaded.signatures["serving_default"](image_bytes=tf.constant(images))
    by_example = loaded.signatures["serving_tf_example"](examples=tf.constant(serialized))
    pixels = preprocess_image_bytes(tf.constant(images), PreprocessingSpec(image_size=8, channels=1))
    by_pixels = loaded.signatures["serving_preprocessed"](images=pixels)
    for outputs in (by_bytes, by_example, by_pixels):
        assert outputs["probabilities"].dtype == tf.float32
        assert outputs["probabilities"].shape == (5, 10)
        assert outputs["classes"].dtype == tf.int64
        np.testing.assert_allclose(outputs["probabilities"].numpy(), by_bytes["probabilities"].numpy(), atol=1e-5)
        np.testing.assert_array_equal(outputs["classes"].numpy(), np.argmax(by_bytes["probabilities"], axis=-1))
    np.testing.assert_allclose(by_bytes["probabilities"].numpy().sum(axis=-1), 1.0, atol=1e-5)


def test_signature_input_specs_match_the_contract(trained: types.SimpleNamespace) -> None:
    loaded = tf.saved_model.load(trained.serving_model_dir)
    inputs = {name: loaded.signatures[name].structured_input_signature[1] for name in loaded.signatures}
    assert inputs["serving_default"]["image_bytes"] == tf.TensorSpec([None], tf.string, "image_bytes")
    assert inputs["serving_tf_example"]["examples"] == tf.TensorSpec([None], tf.string, "examples")
    assert inputs["serving_preprocessed"]["images"] == tf.TensorSpec([None, 8, 8, 1], tf.float32, "images")


def test_assets_hold_labels_and_preprocessing(trained: types.SimpleNamespace, digits_dir: Path) -> None:
    assets = Path(trained.serving_model_dir) / "assets"
    assert (assets / "labels.txt").read_text() == (digits_dir / "labels.txt").read_text()
    spec = PreprocessingSpec.from_json((assets / "preprocessing.json").read_text())
    assert spec == PreprocessingSpec(image_size=8, channels=1)


def test_warmup_requests_parse_and_run(trained: types.SimpleNamespace) -> None:
    from tensorflow_serving.apis import prediction_log_pb2

    path = Path(trained.serving_model_dir) / "assets.extra" / "tf_serving_warmup_requests"
    records = [prediction_log_pb2.PredictionLog.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]
    assert len(records) == 3
    loaded = tf.saved_model.load(trained.serving_model_dir)
    for record in records:
        request = record.predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        outputs = loaded.signatures["serving_default"](image_bytes=tf.make_ndarray(request.inputs["image_bytes"]))
        assert outputs["probabilities"].shape == (1, 10)


def test_training_metrics_written_to_run_dir_and_model_artifact(trained: types.SimpleNamespace) -> None:
    model_artifact = Path(trained.serving_model_dir).parent
    written = [
        json.loads((directory / "training_metrics.json").read_text())
        for directory in (Path(trained.model_run_dir), model_artifact)
    ]
    assert written[0] == written[1]
    metrics = written[0]
    assert metrics["steps"] == TINY_TRAINER["train_steps"]  # the last (short) epoch stops at exactly 7 steps
    assert metrics["images_per_second"] > 0
    assert 0 < metrics["step_time_ms_p50"] <= metrics["step_time_ms_p90"] <= metrics["step_time_ms_p99"]
    assert 0.0 <= metrics["final_accuracy"] <= 1.0
    assert np.isfinite(metrics["final_loss"])
    assert metrics["precision"] == "float32" and metrics["strategy"] == "default"


def test_finished_run_leaves_no_backup(trained: types.SimpleNamespace) -> None:
    assert not list(Path(trained.model_run_dir).parent.glob("backup-*"))


@pytest.mark.slow  # trains the digits defaults to accuracy (the full schedule)
def test_default_config_reaches_95_percent_on_digits(digits_dir: Path, tmp_path: Path) -> None:
    """The digits defaults (pipeline/config.py's trainer section) are what `make demo` trains."""
    from pipeline.config import TfxpConfig

    fn_args = make_fn_args(digits_dir, tmp_path, TfxpConfig().trainer.model_dump(mode="json"))
    run_fn(fn_args)
    metrics = json.loads((Path(fn_args.model_run_dir) / "training_metrics.json").read_text())
    assert metrics["final_accuracy"] >= 0.95


@pytest.mark.parametrize(
    ("custom_config", "message"),
    [
        ({}, "custom_config is empty"),
        ({"labels_path": "x"}, "missing key `trainer`"),
        ({"trainer": 3, "labels_path": "x"}, "`trainer` = 3: Input should be a valid dictionary"),
        (
            {"trainer": {"learning_rat": 0.1}, "labels_path": "x"},
            r"unknown key `trainer.learning_rat`; valid keys here: trainer.model, .*trainer.schedule.learning_rate",
        ),
        (
            {"trainer": {}, "labels_path": "x", "colour": 1},
            r"unknown key `colour`; valid keys here: label_offset, labels_path, serving_base, tfjob, trainer, "
            r"warmup_requests",
        ),
        ({"trainer": {}}, r"missing key `labels_path`"),
        ({"trainer": {"train_steps": "many"}, "labels_path": "x"}, "`trainer.train_steps` = 'many': Input should be"),
        ({"trainer": {"model": "resnet5"}, "labels_path": "x"}, "unknown model; registered: mobilenet_v2, resnet50"),
    ],
)
def test_bad_custom_config_is_rejected_clearly(tmp_path: Path, custom_config: dict[str, Any], message: str) -> None:
    fn_args = types.SimpleNamespace(custom_config=custom_config)
    with pytest.raises(TrainerConfigError, match=message):
        run_fn(fn_args)


def test_missing_label_map_names_the_file(digits_dir: Path, tmp_path: Path) -> None:
    fn_args = make_fn_args(digits_dir, tmp_path, TINY_TRAINER)
    fn_args.custom_config["labels_path"] = str(tmp_path / "nope.txt")
    with pytest.raises(LabelMapError, match=r"label map .*nope.txt does not exist; set data.labels"):
        run_fn(fn_args)


def test_warm_start_from_the_served_model_is_recorded(
    trained: types.SimpleNamespace, digits_dir: Path, tmp_path: Path
) -> None:
    import shutil

    metrics_path = Path(trained.serving_model_dir).parent / "training_metrics.json"
    assert json.loads(metrics_path.read_text())["warm_start"] == {
        "applied": False, "reason": "trainer.warm_start is none; trained from scratch", "version": "", "path": "",
    }  # fmt: skip
    serving = tmp_path / "serving" / "digits"
    shutil.copytree(trained.serving_model_dir, serving / "1700000000")
    fn_args = make_fn_args(digits_dir, tmp_path, {**TINY_TRAINER, "warm_start": "served"}, serving_base=str(serving))
    run_fn(fn_args)
    warm = json.loads((Path(fn_args.serving_model_dir).parent / "training_metrics.json").read_text())["warm_start"]
    assert warm["applied"] is True and warm["version"] == "1700000000", warm
    assert warm["reason"].startswith("started from the served version 1700000000 (")
