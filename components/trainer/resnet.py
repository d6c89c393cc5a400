"""ResNet-50 v1.5: the ResNet-50 that published training throughput and accuracy are measured on.

v1.5 differs from the original v1 (He et al. 2015, and keras.applications' `ResNet50`) in one place: a block
that downsamples strides on its 3×3 convolution instead of its first 1×1, so that 1×1 no longer skips three
quarters of its input positions. The weights have the same shapes (25,557,032 parameters with a 1,000-class
head, torchvision's count); NVIDIA measures ~0.5% better top-1 for ~5% fewer images/s (NGC model card
"ResNet v1.5 TensorFlow checkpoint trained with AMP").

The definition follows NVIDIA DeepLearningExamples, `TensorFlow/Classification/ConvNets/model/resnet.py`
(`ResnetModel.build_model`, `model_architectures["resnet50"]`) and `model/blocks/resnet_bottleneck_block.py`,
and TF Model Garden, `official/legacy/image_classification/resnet/resnet_model.py` ("ResNet model version 1.5"):

- stem: 7×7/2 convolution with 64 filters, BatchNorm, ReLU, 3×3/2 max pooling;
- four stages of [3, 4, 6, 3] bottleneck blocks with 64, 128, 256 and 512 filters (the output has 4× as many):
  1×1 → 3×3 → 1×1, each followed by BatchNorm, ReLU after the first two and after the sum; the first block of
  stages 2-4 strides 2 on its 3×3; the first block of every stage has a 1×1 projection shortcut (with the
  stride) and BatchNorm, the others the identity;
- no convolution has a bias (each feeds a BatchNorm, whose β is the bias); BatchNorm momentum 0.9, epsilon 1e-5
  (both sources);
- kernels: VarianceScaling(scale=2, fan_out, truncated normal), NVIDIA's (`conv2d_hparams`, `weight_init=
  'fan_out'`); Model Garden's legacy model uses `he_normal` (the same with fan_in);
- "same" padding everywhere (NVIDIA's `mode='SAME'`); global average pooling at the end.

Zero-γ (Goyal et al. 2017, "Accurate, Large Minibatch SGD", §5.1): each block's last BatchNorm starts with γ = 0,
so every block starts as the identity; the projection shortcut's BatchNorm keeps γ = 1.

Layer names: `stem_conv`, `stem_bn`, `stem_relu`, `stem_pool`, then `stage{1-4}_block{n}_` + `conv1`/`bn1`/
`relu1`, `conv2`/`bn2`/`relu2`, `conv3`/`bn3`, `proj`/`proj_bn` (the shortcut), `add`, `out`. So a variable's
name says what it is (`stage2_block1_bn3/gamma:0`, `stage2_block1_conv2/kernel:0`) for the weight-decay
exclusions, and none is a name of keras.applications' v1 ResNet50, whose weights have the same shapes: v1
weights (a served `resnet50` from before v1.5, a keras.applications weights file) are refused by name instead
of loading into the other architecture.

Example:
    inputs = keras.Input((224, 224, 3))
    features = resnet50_v15(inputs, zero_gamma=True)  # (None, 2048)
    model = keras.Model(inputs, keras.layers.Dense(1000)(features))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tf_keras as keras

if TYPE_CHECKING:
    import tensorflow as tf

# NVIDIA's `batch_norm_hparams` (decay=0.9, epsilon=1e-5) and Model Garden's `batch_norm_decay`/`_epsilon`.
BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5
# (blocks, bottleneck filters) per stage: NVIDIA's `model_architectures["resnet50"]`; the output has 4× the filters.
STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))
EXPANSION = 4


def _kernel_initializer() -> keras.initializers.Initializer:
    # He et al. 2015 ("Delving deep into rectifiers") with fan_out, as NVIDIA's weight_init='fan_out'. A new
    # instance per layer: one unseeded tf_keras initializer called twice returns the same values both times.
    return keras.initializers.VarianceScaling(scale=2.0, mode="fan_out", distribution="truncated_normal")


def _conv(x: tf.Tensor, filters: int, kernel_size: int, stride: int, name: str) -> tf.Tensor:
    return keras.layers.Conv2D(
        filters,
        kernel_size,
        strides=stride,
        padding="same",
        use_bias=False,
        kernel_initializer=_kernel_initializer(),
        name=name,
    )(x)


def _batch_norm(x: tf.Tensor, name: str, zero_gamma: bool = False) -> tf.Tensor:
    return keras.layers.BatchNormalization(
        momentum=BN_MOMENTUM,
        epsilon=BN_EPSILON,
        gamma_initializer="zeros" if zero_gamma else "ones",
        name=name,
    )(x)


def bottleneck_block(x: tf.Tensor, filters: int, stride: int, zero_gamma: bool, name: str) -> tf.Tensor:
    """One v1.5 bottleneck block: 1×1 (`filters`) → 3×3 (`filters`, `stride`) → 1×1 (4×`filters`) + shortcut.

    Args:
        x: The block's input, NHWC.
        filters: Filters of the 1×1 and 3×3 convolutions; the block outputs 4× as many.
        stride: 1, or 2 to halve the height and width (on the 3×3 and on the projection shortcut).
        zero_gamma: Start the last BatchNorm's γ at 0.
        name: Prefix of the block's layer names.

    Returns:
        The block's output, NHWC with 4×`filters` channels.
    """
    shortcut = x
    if stride != 1 or x.shape[-1] != filters * EXPANSION:
        shortcut = _conv(x, filters * EXPANSION, 1, stride, name=f"{name}_proj")
        shortcut = _batch_norm(shortcut, name=f"{name}_proj_bn")
    y = _conv(x, filters, 1, 1, name=f"{name}_conv1")
    y = _batch_norm(y, name=f"{name}_bn1")
    y = keras.layers.ReLU(name=f"{name}_relu1")(y)
    y = _conv(y, filters, 3, stride, name=f"{name}_conv2")  # v1.5: the stride is here, not on conv1
    y = _batch_norm(y, name=f"{name}_bn2")
    y = keras.layers.ReLU(name=f"{name}_relu2")(y)
    y = _conv(y, filters * EXPANSION, 1, 1, name=f"{name}_conv3")
    y = _batch_norm(y, name=f"{name}_bn3", zero_gamma=zero_gamma)
    y = keras.layers.Add(name=f"{name}_add")([shortcut, y])
    return keras.layers.ReLU(name=f"{name}_out")(y)


def resnet50_v15(x: tf.Tensor, zero_gamma: bool = False) -> tf.Tensor:
    """The ResNet-50 v1.5 backbone on `x`, up to and including global average pooling.

    Args:
        x: Normalised images, NHWC, at least 32×32 (the network downsamples by 32).
        zero_gamma: Start each block's last BatchNorm γ at 0 (Goyal et al.). Default False.

    Returns:
        The pooled features, (batch, 2048).

    Example:
        features = resnet50_v15(keras.Input((224, 224, 3)))
    """
    x = _conv(x, 64, 7, 2, name="stem_conv")
    x = _batch_norm(x, name="stem_bn")
    x = keras.layers.ReLU(name="stem_relu")(x)
    x = keras.layers.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(x)
    for stage, (blocks, filters) in enumerate(STAGES, start=1):
        for block in range(1, blocks + 1):
            stride = 2 if block == 1 and stage > 1 else 1
            x = bottleneck_block(x, filters, stride, zero_gamma, name=f"stage{stage}_block{block}")
    return keras.layers.GlobalAveragePooling2D(name="pool")(x)
