"""Pretrained weights (`trainer.init_weights`): each format tfxp can write loads back, a new head for other
classes, and weights of another model refused whole (components/trainer/init_weights.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tf_keras as keras

from components.trainer.init_weights import InitWeightsError, load_initial_weights
from components.trainer.models import ModelSpec, build_model

SPEC = ModelSpec(image_size=8, channels=1, num_classes=3, width=4)


def trained_model(spec: ModelSpec = SPEC, name: str = "small_resnet") -> keras.Model:
    keras.utils.set_random_seed(3)
    model = build_model(name, spec)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    model.fit(np.random.rand(16, 8, 8, 1).astype("float32"), np.arange(16) % spec.num_classes, epochs=1, verbose=0)
    return model


def as_saved_model(model: keras.Model, path: Path) -> str:
    model.save(str(path), save_format="tf")
    return str(path)


def as_h5(model: keras.Model, path: Path) -> str:
    model.save_weights(str(path.with_suffix(".h5")))
    return str(path.with_suffix(".h5"))


def as_checkpoint(model: keras.Model, path: Path) -> str:
    model.save_weights(str(path / "ckpt"))
    return str(path / "ckpt")


WRITERS: dict[str, Callable[[keras.Model, Path], str]] = {
    "saved_model": as_saved_model,
    "h5": as_h5,
    "checkpoint": as_checkpoint,
}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_weights_tfxp_wrote_load_back_whole(kind: str, tmp_path: Path) -> None:
    source = trained_model()
    path = WRITERS[kind](source, tmp_path / "weights")
    keras.utils.set_random_seed(9)
    fresh = build_model("small_resnet", SPEC)
    record = load_initial_weights(fresh, path)
    assert (record.format, record.new_head, record.loaded) == (kind, False, len(fresh.weights))
    for mine, theirs in zip(fresh.weights, source.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_other_classes_keep_a_new_head(kind: str, tmp_path: Path) -> None:
    source = trained_model()
    path = WRITERS[kind](source, tmp_path / "weights")
    fresh = build_model("small_resnet", ModelSpec(8, 1, 5, 4))
    head_before = fresh.get_layer("logits").kernel.numpy().copy()
    record = load_initial_weights(fresh, path)
    assert record.new_head and "a new head" in record.reason
    np.testing.assert_array_equal(fresh.get_layer("logits").kernel.numpy(), head_before)
    np.testing.assert_array_equal(
        fresh.get_layer("stem_conv").kernel.numpy(), source.get_layer("stem_conv").kernel.numpy()
    )


def test_weights_of_another_model_are_refused_whole(tmp_path: Path) -> None:
    path = as_h5(trained_model(), tmp_path / "weights")
    wider = build_model("small_resnet", ModelSpec(8, 1, 3, 8))
    before = [weight.numpy().copy() for weight in wider.weights]
    with pytest.raises(
        InitWeightsError, match=r"does not hold this small_resnet model's weights: \d+ of \d+ do not fit"
    ):
        load_initial_weights(wider, path)
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, wider.weights, strict=True))  # untouched


def test_nothing_loadable_names_the_key_and_the_formats(tmp_path: Path) -> None:
    with pytest.raises(InitWeightsError, match=r"trainer.init_weights = .*: no weights there; expected a SavedModel"):
        load_initial_weights(build_model("small_resnet", SPEC), str(tmp_path / "nothing"))
    assert load_initial_weights(build_model("small_resnet", SPEC), "").loaded == 0


def test_the_head_trains_alone_first_then_everything(tmp_path: Path) -> None:
    import tensorflow as tf

    from components.trainer.options import TrainerOptions
    from components.trainer.phases import build_and_compile, train_head_first
    from components.trainer.runtime import set_up_runtime

    trainer = TrainerOptions(
        image_size=8, channels=1, width=4, batch_size=8, train_steps=4, init_weights="x", freeze_backbone_steps=3
    )
    runtime = set_up_runtime(trainer, tf_config="")
    compiled = build_and_compile(trainer, runtime, num_classes=3)
    model = compiled.model
    images = tf.data.Dataset.from_tensors((tf.random.uniform((8, 8, 8, 1)), tf.constant([0, 1, 2, 0, 1, 2, 0, 1])))
    data = images.repeat()
    backbone = {w.name: w.numpy().copy() for w in model.weights if not w.name.startswith("logits/")}
    head = model.get_layer("logits").kernel.numpy().copy()

    assert train_head_first(compiled, data, trainer, runtime) == 3
    # Frozen: every backbone weight, BatchNorm's moving statistics included, is as it was; the head trained.
    assert all(np.array_equal(backbone[w.name], w.numpy()) for w in model.weights if w.name in backbone)
    assert not np.array_equal(head, model.get_layer("logits").kernel.numpy())
    # Then everything trains, under the run's own optimizer (fresh: its schedule starts at step 0).
    assert all(layer.trainable for layer in model.layers) and model.optimizer is compiled.recipe.optimizer
    model.fit(data, epochs=1, steps_per_epoch=1, verbose=0)
    assert not np.array_equal(backbone["stem_conv/kernel:0"], model.get_layer("stem_conv").kernel.numpy())
    keras.mixed_precision.set_global_policy("float32")


def test_freezing_a_random_backbone_is_refused() -> None:
    from components.trainer.options import TrainerOptions

    with pytest.raises(ValueError, match="a random backbone would stay random"):
        TrainerOptions(freeze_backbone_steps=10)
