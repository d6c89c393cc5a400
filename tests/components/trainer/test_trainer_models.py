"""Model registry and models: float32 head under mixed precision, normalisation inside, registry errors."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tf_keras as keras

from components.trainer.models import ModelSpec, build_model, register_model, registered_models
from components.trainer.options import MODEL_NAMES


@pytest.fixture
def bfloat16_policy() -> Iterator[None]:
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    yield
    keras.mixed_precision.set_global_policy(previous)


def test_registry_has_the_documented_models() -> None:
    assert set(registered_models()) >= {"small_resnet", "resnet50", "resnet50_v1", "mobilenet_v2"}


def test_unknown_model_lists_the_registered_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown model 'resnet18' \(trainer.model\); registered models: .*small_resnet"
    ):
        build_model("resnet18", ModelSpec(32, 3, 10, 16))


def test_registering_a_name_twice_fails() -> None:
    with pytest.raises(ValueError, match="model 'small_resnet' is already registered"):
        register_model("small_resnet")(lambda spec: keras.Sequential())


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("small_resnet", ModelSpec(image_size=16, channels=1, num_classes=10, width=8)),
        ("mobilenet_v2", ModelSpec(image_size=32, channels=3, num_classes=5, width=16)),
        ("resnet50", ModelSpec(image_size=32, channels=3, num_classes=7, width=64)),
        ("resnet50_v1", ModelSpec(image_size=32, channels=3, num_classes=7, width=64)),
    ],
)
def test_mixed_precision_keeps_head_and_softmax_float32(bfloat16_policy: None, name: str, spec: ModelSpec) -> None:
    model = build_model(name, spec)
    assert model.get_layer("logits").dtype_policy.name == "float32"
    assert model.get_layer("probabilities").dtype_policy.name == "float32"
    assert model.get_layer("normalise").compute_dtype == "bfloat16"
    images = np.random.default_rng(0).random((2, spec.image_size, spec.image_size, spec.channels), dtype=np.float32)
    probabilities = model(images, training=False)
    assert probabilities.dtype == "float32"
    assert probabilities.shape == (2, spec.num_classes)
    np.testing.assert_allclose(probabilities.numpy().sum(axis=-1), 1.0, atol=1e-5)


def test_small_resnet_width_scales_filters_and_normalises_inside() -> None:
    narrow = build_model("small_resnet", ModelSpec(16, 1, 10, width=4))
    wide = build_model("small_resnet", ModelSpec(16, 1, 10, width=8))
    assert narrow.get_layer("stem_conv").filters == 4 and wide.get_layer("stage3_conv2").filters == 32
    assert narrow.count_params() < wide.count_params()
    normalise = narrow.get_layer("normalise")
    np.testing.assert_allclose(normalise(np.array([0.0, 0.5, 1.0], dtype=np.float32)).numpy(), [-1.0, 0.0, 1.0])


def test_mobilenet_width_is_the_first_conv_filters() -> None:
    model = build_model("mobilenet_v2", ModelSpec(32, 3, 4, width=16))
    first_conv = next(layer for layer in model.get_layer("mobilenetv2_0.50_32").layers if "Conv1" in layer.name)
    assert first_conv.filters == 16


def test_every_declared_model_name_has_exactly_one_builder() -> None:
    # MODEL_NAMES is what `trainer.model` accepts when the config loads; the builders must be keyed by the same names.
    assert registered_models() == sorted(MODEL_NAMES)


def test_an_undeclared_name_cannot_be_registered() -> None:
    with pytest.raises(ValueError, match=r"model 'resnet18' is not declared in components/trainer/options.py"):
        register_model("resnet18")


def test_small_resnet_zero_gamma_zeroes_each_blocks_last_batch_norm() -> None:
    model = build_model("small_resnet", ModelSpec(16, 1, 10, width=4, zero_gamma=True))
    gammas = {
        layer.name: layer.gamma.numpy() for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)
    }
    last = {f"stage{stage}_bn2" for stage in (1, 2, 3)}
    assert all((gammas[name] == 0).all() for name in last)
    assert all((gamma == 1).all() for name, gamma in gammas.items() if name not in last)
