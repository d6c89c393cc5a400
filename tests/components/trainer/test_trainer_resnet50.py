"""ResNet-50 v1.5 (`resnet50`) against its definition, and `resnet50_v1` kept apart from it.

The 224×224 model is built once per module and inspected without running it; the tests that run a model use 64×64.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tf_keras as keras

from components.trainer.models import ModelSpec, build_model
from components.trainer.optimization import decays

IMAGENET = ModelSpec(image_size=224, channels=3, num_classes=1000, width=64)
SMALL = ModelSpec(image_size=64, channels=3, num_classes=5, width=64)
# The downsampling blocks: the first of stages 2-4 (conv3_x, conv4_x, conv5_x of He et al.).
DOWNSAMPLING = ("stage2_block1", "stage3_block1", "stage4_block1")
BLOCKS = [
    f"stage{stage}_block{block}" for stage, blocks in enumerate((3, 4, 6, 3), start=1) for block in range(1, blocks + 1)
]


@pytest.fixture(scope="module", autouse=True)
def float32_policy() -> Iterator[None]:
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy(previous)


@pytest.fixture(scope="module")
def imagenet_model(float32_policy: None) -> keras.Model:
    return build_model("resnet50", IMAGENET)


def _layers(model: keras.Model, kind: type) -> list[keras.layers.Layer]:
    return [layer for layer in model.layers if isinstance(layer, kind)]


def _gammas(model: keras.Model) -> dict[str, np.ndarray]:
    return {layer.name: layer.gamma.numpy() for layer in _layers(model, keras.layers.BatchNormalization)}


def test_parameter_count_is_torchvision_resnet50s(imagenet_model: keras.Model) -> None:
    trainable = sum(int(np.prod(weight.shape)) for weight in imagenet_model.trainable_weights)
    assert trainable == 25_557_032
    assert imagenet_model.name == "resnet50"
    assert imagenet_model.output_shape == (None, 1000)
    assert imagenet_model.get_layer("pool").output_shape == (None, 2048)


def test_stem_is_7x7_stride_2_then_3x3_stride_2_max_pool(imagenet_model: keras.Model) -> None:
    stem = imagenet_model.get_layer("stem_conv")
    assert (stem.filters, stem.kernel_size, stem.strides) == (64, (7, 7), (2, 2))
    pool = imagenet_model.get_layer("stem_pool")
    assert isinstance(pool, keras.layers.MaxPooling2D)
    assert (pool.pool_size, pool.strides) == ((3, 3), (2, 2))
    assert pool.output_shape == (None, 56, 56, 64)


def test_downsampling_blocks_stride_on_the_3x3_not_the_first_1x1(imagenet_model: keras.Model) -> None:
    for block in DOWNSAMPLING:
        first, middle = imagenet_model.get_layer(f"{block}_conv1"), imagenet_model.get_layer(f"{block}_conv2")
        assert (first.kernel_size, first.strides) == ((1, 1), (1, 1)), block
        assert (middle.kernel_size, middle.strides) == ((3, 3), (2, 2)), block
        projection = imagenet_model.get_layer(f"{block}_proj")
        assert (projection.kernel_size, projection.strides) == ((1, 1), (2, 2)), block
    # Nothing else downsamples: the stem, then one stride-2 3×3 and its projection per downsampling block.
    strided = {layer.name for layer in _layers(imagenet_model, keras.layers.Conv2D) if layer.strides != (1, 1)}
    assert strided == {"stem_conv"} | {f"{block}_{conv}" for block in DOWNSAMPLING for conv in ("conv2", "proj")}
    sizes = [imagenet_model.get_layer(f"stage{stage}_block1_out").output_shape for stage in (1, 2, 3, 4)]
    assert sizes == [(None, 56, 56, 256), (None, 28, 28, 512), (None, 14, 14, 1024), (None, 7, 7, 2048)]


def test_blocks_are_3_4_6_3_bottlenecks_with_projection_only_in_each_stages_first(imagenet_model: keras.Model) -> None:
    adds = [layer.name.removesuffix("_add") for layer in _layers(imagenet_model, keras.layers.Add)]
    assert adds == BLOCKS
    projections = {layer.name.removesuffix("_proj") for layer in _layers(imagenet_model, keras.layers.Conv2D)}
    assert projections & set(BLOCKS) == {"stage1_block1", *DOWNSAMPLING}
    block = [imagenet_model.get_layer(f"stage3_block2_conv{i}") for i in (1, 2, 3)]
    assert [(conv.kernel_size, conv.filters) for conv in block] == [((1, 1), 256), ((3, 3), 256), ((1, 1), 1024)]


def test_no_convolution_has_a_bias(imagenet_model: keras.Model) -> None:
    convolutions = _layers(imagenet_model, keras.layers.Conv2D)
    assert len(convolutions) == 53  # the stem, 16 blocks × 3, 4 projections
    assert not [conv.name for conv in convolutions if conv.use_bias]
    assert [weight.name for weight in imagenet_model.weights if "bias" in weight.name] == ["logits/bias:0"]


def test_batch_norm_momentum_and_epsilon(imagenet_model: keras.Model) -> None:
    norms = _layers(imagenet_model, keras.layers.BatchNormalization)
    assert len(norms) == 53  # one after every convolution
    assert {(norm.momentum, norm.epsilon) for norm in norms} == {(0.9, 1e-5)}


def test_weight_decay_sees_conv_kernels_and_skips_batch_norm(imagenet_model: keras.Model) -> None:
    decayed = [weight.name for weight in imagenet_model.trainable_weights if decays(weight.name)]
    assert len(decayed) == 54 and all(name.endswith("/kernel:0") for name in decayed)  # 53 convolutions + logits
    skipped = {weight.name.rsplit("/", 1)[-1] for weight in imagenet_model.trainable_weights} - {"kernel:0"}
    assert skipped == {"gamma:0", "beta:0", "bias:0"}


def test_gammas_start_at_one_without_zero_gamma(imagenet_model: keras.Model) -> None:
    assert all((gamma == 1).all() for gamma in _gammas(imagenet_model).values())


def test_zero_gamma_zeroes_each_blocks_last_batch_norm_only() -> None:
    model = build_model("resnet50", ModelSpec(64, 3, 5, 64, zero_gamma=True))
    gammas = _gammas(model)
    last = {f"{block}_bn3" for block in BLOCKS}
    assert last <= set(gammas)
    assert all((gammas[name] == 0).all() for name in last)
    assert all((gamma == 1).all() for name, gamma in gammas.items() if name not in last)  # stem, bn1, bn2, proj_bn
    # So each identity block starts as the identity: its output is its input (already ReLU'd).
    probe = keras.Model(
        model.input, [model.get_layer("stage3_block1_out").output, model.get_layer("stage3_block2_out").output]
    )
    before, after = probe(np.random.default_rng(0).random((2, 64, 64, 3), dtype=np.float32), training=False)
    np.testing.assert_allclose(after.numpy(), before.numpy())


def test_builds_at_64_and_trains_one_step_in_float32() -> None:
    model = build_model("resnet50", SMALL)
    assert model.get_layer("stem_conv").compute_dtype == "float32"
    images = np.random.default_rng(1).random((4, 64, 64, 3), dtype=np.float32)
    probabilities = model(images, training=False).numpy()
    assert probabilities.shape == (4, 5)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-5)

    # Eagerly: for one step, tracing the train function costs more than the step.
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", run_eagerly=True)
    kernel = model.get_layer("stage2_block1_conv2").kernel.numpy()
    mean = model.get_layer("stem_bn").moving_mean.numpy()
    loss = model.train_on_batch(images, np.array([0, 1, 2, 3]))
    assert np.isfinite(loss)
    assert not np.allclose(model.get_layer("stage2_block1_conv2").kernel.numpy(), kernel)
    assert not np.allclose(model.get_layer("stem_bn").moving_mean.numpy(), mean)  # training-mode BatchNorm ran


def test_v1_is_registered_apart_and_shares_no_backbone_weight_names() -> None:
    v1 = build_model("resnet50_v1", ModelSpec(32, 3, 5, 64, zero_gamma=True))
    assert v1.name == "resnet50_v1"
    backbone = v1.get_layer("resnet50")
    downsampling = backbone.get_layer("conv3_block1_1_conv")
    assert (downsampling.kernel_size, downsampling.strides) == ((1, 1), (2, 2))  # v1: the stride on the first 1×1
    last = [layer for layer in backbone.layers if layer.name.endswith("_3_bn")]
    assert len(last) == 16 and all((layer.gamma.numpy() == 0).all() for layer in last)
    assert (backbone.get_layer("conv2_block1_0_bn").gamma.numpy() == 1).all()  # the shortcut's keeps γ = 1
    # Same shapes, other names: a served v1 model or a v1 weights file is refused by name, never loaded into v1.5.
    v15 = build_model("resnet50", ModelSpec(32, 3, 5, 64))
    shared = {weight.name for weight in v1.weights} & {weight.name for weight in v15.weights}
    assert shared == {"logits/kernel:0", "logits/bias:0"}
