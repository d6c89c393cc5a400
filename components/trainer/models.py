"""Model registry: `trainer.model` names a builder that returns a tf_keras classifier.

The names are declared once, without Keras, in `components.trainer.options.MODEL_NAMES` (so the config checks
`trainer.model` when it loads); each has exactly one builder here, and `register_model` refuses other names.

Every model takes float32 images in [0, 1] (the output of the shared preprocessing), normalises them inside the
model (so the SavedModel signatures and the TFLite model share the normalisation), and ends in a classification
head whose Dense layer and softmax run in float32 whatever the mixed-precision policy is.

Example:
    model = build_model("small_resnet", ModelSpec(image_size=32, channels=1, num_classes=10, width=16))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tf_keras as keras

from components.trainer.options import MODEL_NAMES
from components.trainer.resnet import resnet50_v15


@dataclass(frozen=True)
class ModelSpec:
    """What every model builder receives.

    Attributes:
        image_size: Square input size in pixels.
        channels: Input channels (1 or 3).
        num_classes: Classes of the softmax head.
        width: Width of the model; each builder documents how it reads it.
        zero_gamma: Start each residual block's last BatchNorm γ at 0 (`trainer.zero_gamma`). Default False.
            The ResNets (`small_resnet`, `resnet50`, `resnet50_v1`) honour it; `mobilenet_v2` ignores it.
    """

    image_size: int
    channels: int
    num_classes: int
    width: int
    zero_gamma: bool = False


# Faster-moving BatchNorm statistics than Keras's 0.99: short runs (hundreds of steps) otherwise evaluate with
# statistics that lag the weights.
_BN_MOMENTUM = 0.9

ModelBuilder = Callable[[ModelSpec], keras.Model]

_MODELS: dict[str, ModelBuilder] = {}


def register_model(name: str) -> Callable[[ModelBuilder], ModelBuilder]:
    """Registers a model builder under `name` (the value of `trainer.model`).

    Raises:
        ValueError: `name` is not declared in `MODEL_NAMES`, or is already registered.
    """
    if name not in MODEL_NAMES:
        raise ValueError(
            f"model {name!r} is not declared in components/trainer/options.py MODEL_NAMES "
            f"({', '.join(MODEL_NAMES)}); declare it there so `trainer.model` accepts it"
        )

    def decorator(builder: ModelBuilder) -> ModelBuilder:
        if name in _MODELS:
            raise ValueError(f"model {name!r} is already registered (by {_MODELS[name].__qualname__})")
        _MODELS[name] = builder
        return builder

    return decorator


def registered_models() -> list[str]:
    """Names accepted by `build_model`, sorted."""
    return sorted(_MODELS)


def build_model(name: str, spec: ModelSpec) -> keras.Model:
    """Builds the registered model `name` under the current Keras dtype policy and distribution strategy.

    Raises:
        ValueError: no model is registered under `name` (the message lists the registered ones).
    """
    try:
        builder = _MODELS[name]
    except KeyError:
        raise ValueError(
            f"unknown model {name!r} (trainer.model); registered models: {', '.join(registered_models())}"
        ) from None
    return builder(spec)


def _inputs_normalised(spec: ModelSpec) -> tuple[keras.Input, keras.layers.Layer]:
    # Inputs stay float32 (the preprocessing's dtype); the rescaling layer casts to the compute dtype.
    inputs = keras.Input(shape=(spec.image_size, spec.image_size, spec.channels), dtype="float32", name="images")
    normalised = keras.layers.Rescaling(2.0, offset=-1.0, name="normalise")(inputs)  # [0, 1] → [-1, 1]
    return inputs, normalised


def _classification_head(features: keras.layers.Layer, num_classes: int) -> keras.layers.Layer:
    # float32 logits and softmax: float16/bfloat16 softmax loses precision and can overflow.
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(features)
    return keras.layers.Activation("softmax", dtype="float32", name="probabilities")(logits)


def _residual_block(
    x: keras.layers.Layer, filters: int, stride: int, name: str, zero_gamma: bool = False
) -> keras.layers.Layer:
    shortcut = x
    if stride != 1 or x.shape[-1] != filters:
        shortcut = keras.layers.Conv2D(filters, 1, strides=stride, use_bias=False, name=f"{name}_proj")(x)
        shortcut = keras.layers.BatchNormalization(momentum=_BN_MOMENTUM, name=f"{name}_proj_bn")(shortcut)
    y = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=f"{name}_conv1")(x)
    y = keras.layers.BatchNormalization(momentum=_BN_MOMENTUM, name=f"{name}_bn1")(y)
    y = keras.layers.ReLU(name=f"{name}_relu1")(y)
    y = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False, name=f"{name}_conv2")(y)
    y = keras.layers.BatchNormalization(
        momentum=_BN_MOMENTUM, gamma_initializer="zeros" if zero_gamma else "ones", name=f"{name}_bn2"
    )(y)
    y = keras.layers.Add(name=f"{name}_add")([shortcut, y])
    return keras.layers.ReLU(name=f"{name}_out")(y)


@register_model("small_resnet")
def small_resnet(spec: ModelSpec) -> keras.Model:
    """A small residual CNN (the default, for digits-sized data).

    A 3×3 stem with `width` filters, then three stages of one residual block each with `width`, 2×`width` and
    4×`width` filters (the last two downsample by 2), global average pooling and the float32 head.
    """
    inputs, x = _inputs_normalised(spec)
    x = keras.layers.Conv2D(spec.width, 3, padding="same", use_bias=False, name="stem_conv")(x)
    x = keras.layers.BatchNormalization(momentum=_BN_MOMENTUM, name="stem_bn")(x)
    x = keras.layers.ReLU(name="stem_relu")(x)
    for stage, (multiplier, stride) in enumerate([(1, 1), (2, 2), (4, 2)], start=1):
        x = _residual_block(x, spec.width * multiplier, stride, name=f"stage{stage}", zero_gamma=spec.zero_gamma)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(inputs, _classification_head(x, spec.num_classes), name="small_resnet")


@register_model("resnet50")
def resnet50(spec: ModelSpec) -> keras.Model:
    """ResNet-50 v1.5 (`components/trainer/resnet.py`, random init) for ImageNet-sized data.

    The ResNet-50 that NVIDIA's and Model Garden's recipes train: the stride of a downsampling block sits on its
    3×3 convolution. Always the canonical network (25,557,032 parameters with 1,000 classes), so its throughput
    compares like for like with published numbers: NVIDIA publishes AMP+XLA training throughput on one A100 for
    v1.5 (DeepLearningExamples, ResNet-50 v1.5 for TensorFlow). `width` does not apply; `zero_gamma` does.
    Needs `image_size` ≥ 32.
    """
    inputs, x = _inputs_normalised(spec)
    features = resnet50_v15(x, zero_gamma=spec.zero_gamma)
    return keras.Model(inputs, _classification_head(features, spec.num_classes), name="resnet50")


@register_model("resnet50_v1")
def resnet50_v1(spec: ModelSpec) -> keras.Model:
    """ResNet-50 v1 (keras.applications, random init): the stride of a downsampling block is on its first 1×1.

    Kept because keras.applications' ImageNet weights are v1's. Not like for like with published ResNet-50
    throughput, which is v1.5's (`resnet50`): v1 trains ~5% more images/s than v1.5 (NVIDIA). Its convolutions
    have biases (25,583,592 trainable parameters with 1,000 classes, 26,560 more than v1.5).
    `width` does not apply; `zero_gamma` starts each block's last BatchNorm (`conv*_block*_3_bn`) γ at 0.
    Needs `image_size` ≥ 32.
    """
    inputs, x = _inputs_normalised(spec)
    backbone = keras.applications.ResNet50(
        include_top=False, weights=None, input_shape=(spec.image_size, spec.image_size, spec.channels), pooling="avg"
    )
    if spec.zero_gamma:
        for layer in backbone.layers:
            if layer.name.endswith("_3_bn"):  # keras.applications names a block's last BatchNorm conv{s}_block{b}_3_bn
                layer.gamma.assign(keras.backend.zeros_like(layer.gamma))
    return keras.Model(inputs, _classification_head(backbone(x), spec.num_classes), name="resnet50_v1")


@register_model("mobilenet_v2")
def mobilenet_v2(spec: ModelSpec) -> keras.Model:
    """MobileNetV2 (keras.applications, random init), edge-friendly.

    `width` is the first convolution's filters, 32 × alpha: width 32 → alpha 1.0, 16 → 0.5, 48 → 1.5.
    Needs `image_size` ≥ 32.
    """
    inputs, x = _inputs_normalised(spec)
    backbone = keras.applications.MobileNetV2(
        include_top=False,
        weights=None,
        input_shape=(spec.image_size, spec.image_size, spec.channels),
        alpha=spec.width / 32,
        pooling="avg",
    )
    return keras.Model(inputs, _classification_head(backbone(x), spec.num_classes), name="mobilenet_v2")
