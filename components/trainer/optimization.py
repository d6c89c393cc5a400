"""Builds the recipe that `trainer.optimizer` and `trainer.schedule` name: optimizer, schedule, weight decay, loss.

Two registries, names → builders, as Model Garden's `official/modeling/optimization/optimizer_factory.py`
(`OPTIMIZERS_CLS`, `LR_CLS`): `OPTIMIZERS` (`sgd`, `lars`, `adamw`, `adam`) and `DECAYS` (`cosine`,
`stepwise`, `polynomial`, `constant`). The names are declared without TensorFlow in `recipe.py`; a test keeps the
two in step. Weight decay follows each recipe: coupled L2 added to the loss for `sgd` and `adam` (NVIDIA's and
Model Garden's), inside the update for `lars` (MLPerf's), decoupled for `adamw`; one rule (`decays`) says which
variables it applies to.

Example:
    recipe = build_recipe(trainer, global_batch=2048, num_classes=1000)
    model.compile(optimizer=recipe.optimizer, loss=recipe.loss)
    add_weight_decay(model, trainer.optimizer)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf
import tf_keras as keras

from components.trainer.options import TrainerOptions
from components.trainer.recipe import (
    DECAY_EXCLUSIONS,
    OPTIMIZER_NAMES,
    SCHEDULE_NAMES,
    OptimizerOptions,
    ScheduleOptions,
    scaled_learning_rate,
    warmup_steps,
)

# The last part of a variable's name, for each kind `optimizer.decay_exclude` names: BatchNormalization's γ and
# β, and every layer's bias.
EXCLUDED_NAMES = {"batch_norm": ("gamma", "beta"), "bias": ("bias",)}


def variable_kind_name(name: str) -> str:
    """`stage1_bn1/gamma:0` → `gamma`: a variable's own name, without its layer path or output index."""
    return name.rsplit("/", 1)[-1].split(":", 1)[0]


def decays(name: str, exclude: Sequence[str] = DECAY_EXCLUSIONS) -> bool:
    """Whether weight decay (and LARS's trust ratio) applies to the variable called `name`.

    Example:
        decays("conv1/kernel:0")  # True
        decays("conv1_bn/gamma:0"), decays("logits/bias:0")  # False, False
    """
    excluded = {part for kind in exclude for part in EXCLUDED_NAMES[kind]}
    return variable_kind_name(name) not in excluded


def decayed_variables(model: keras.Model, exclude: Sequence[str]) -> list[tf.Variable]:
    """The model's trainable variables that `decays`."""
    return [variable for variable in model.trainable_variables if decays(variable.name, exclude)]


# --- schedules ---------------------------------------------------------------------------------------------

# A decay: (step, peak, warmup steps, total steps, options) → the rate after the warmup.
Decay = Callable[[tf.Tensor, float, int, int, ScheduleOptions], tf.Tensor]


def _progress(step: tf.Tensor, warmup: int, total: int) -> tf.Tensor:
    return tf.clip_by_value((step - warmup) / float(max(total - warmup, 1)), 0.0, 1.0)


def _cosine(step: tf.Tensor, peak: float, warmup: int, total: int, options: ScheduleOptions) -> tf.Tensor:
    return 0.5 * peak * (1.0 + tf.cos(math.pi * _progress(step, warmup, total)))


def _stepwise(step: tf.Tensor, peak: float, warmup: int, total: int, options: ScheduleOptions) -> tf.Tensor:
    rate = tf.constant(peak, tf.float32)
    for boundary, factor in zip(boundary_steps(options, total), options.factors, strict=True):
        rate = tf.where(step >= boundary, tf.constant(peak * factor, tf.float32), rate)
    return rate


def _polynomial(step: tf.Tensor, peak: float, warmup: int, total: int, options: ScheduleOptions) -> tf.Tensor:
    remaining = 1.0 - _progress(step, warmup, total)
    return (peak - options.end_learning_rate) * tf.pow(remaining, options.power) + options.end_learning_rate


def _constant(step: tf.Tensor, peak: float, warmup: int, total: int, options: ScheduleOptions) -> tf.Tensor:
    return tf.fill(tf.shape(step), tf.constant(peak, tf.float32))


DECAYS: dict[str, Decay] = {
    "cosine": _cosine,
    "stepwise": _stepwise,
    "polynomial": _polynomial,
    "constant": _constant,
}


def boundary_steps(options: ScheduleOptions, total_steps: int) -> list[int]:
    """`stepwise`: the steps at which each factor starts (`boundaries` are fractions of the run)."""
    return [round(boundary * total_steps) for boundary in options.boundaries]


@keras.utils.register_keras_serializable(package="tfxp")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from peak/warmup to `peak` over `warmup_steps`, then the decay `options.name` names.

    Example:
        schedule = WarmupSchedule(0.8, warmup_steps=50, total_steps=600, options=ScheduleOptions())
        float(schedule(49))  # 0.8: the warmup's last step reaches the peak
    """

    def __init__(self, peak: float, warmup_steps: int, total_steps: int, options: ScheduleOptions) -> None:
        super().__init__()
        if total_steps < 1 or warmup_steps < 0:
            raise ValueError(f"need total_steps ≥ 1 and warmup_steps ≥ 0, got {total_steps} and {warmup_steps}")
        self.peak = peak
        self.warmup_steps = min(warmup_steps, total_steps)
        self.total_steps = total_steps
        self.options = options
        self._decay = DECAYS[options.name]

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        warmup = float(max(self.warmup_steps, 1))
        # Warmup starts at peak/warmup (not 0) so the very first step updates the weights.
        linear = self.peak * tf.minimum(step + 1.0, warmup) / warmup
        decayed = self._decay(step, self.peak, self.warmup_steps, self.total_steps, self.options)
        return tf.where(step < self.warmup_steps, linear, decayed)

    def get_config(self) -> dict[str, Any]:
        return {
            "peak": self.peak,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "options": self.options.model_dump(mode="json"),
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> WarmupSchedule:
        return cls(**{**config, "options": ScheduleOptions.model_validate(config["options"])})


def schedule_curve(schedule: WarmupSchedule, points: int = 200) -> list[tuple[int, float]]:
    """(step, rate) at `points` steps spread over the run, the warmup's end and the boundaries included."""
    total = schedule.total_steps
    steps = {round(index * (total - 1) / max(points - 1, 1)) for index in range(points)}
    steps |= {max(schedule.warmup_steps - 1, 0), schedule.warmup_steps, total - 1}
    if schedule.options.name == "stepwise":
        steps |= {max(boundary - 1, 0) for boundary in boundary_steps(schedule.options, total)}
        steps |= set(boundary_steps(schedule.options, total))
    ordered = sorted(step for step in steps if 0 <= step < total)
    rates = schedule(tf.constant(ordered, tf.float32)).numpy().tolist()
    return [(step, float(rate)) for step, rate in zip(ordered, rates, strict=True)]


# --- optimizers --------------------------------------------------------------------------------------------


@keras.utils.register_keras_serializable(package="tfxp")
class Lars(keras.optimizers.Optimizer):
    """LARS (You et al. 2017) as MLPerf's ResNet-50 reference applies it.

    For a variable that `decays`: the trust ratio η·‖w‖ / (‖g‖ + λ·‖w‖ + ε) (1 when either norm is 0) scales
    the rate, then g ← g + λ·w; the others (BatchNorm γ/β, biases) get plain momentum SGD without decay. Then
    v ← m·v + rate·g and w ← w − v (mlcommons/training, image_classification/tensorflow2/lars_optimizer.py,
    `compute_lr` and `apply_gradients`). Under float16 loss scaling Keras's LossScaleOptimizer unscales the
    gradients before this optimizer sees them, so the trust ratio is computed on the true gradients.
    """

    def __init__(
        self,
        learning_rate: Any = 0.1,
        momentum: float = 0.9,
        eta: float = 0.001,
        weight_decay_rate: float = 0.0,
        exclude: Sequence[str] = DECAY_EXCLUSIONS,
        epsilon: float = 1e-7,
        name: str = "LARS",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        self._learning_rate = self._build_learning_rate(learning_rate)
        self.momentum = momentum
        self.eta = eta
        self.weight_decay_rate = weight_decay_rate
        self.exclude = tuple(exclude)
        self.epsilon = epsilon

    def build(self, var_list: list[tf.Variable]) -> None:
        super().build(var_list)
        if getattr(self, "_built", False):
            return
        self.velocities = [self.add_variable_from_reference(variable, "velocity") for variable in var_list]
        self._built = True

    def update_step(self, gradient: tf.Tensor, variable: tf.Variable) -> None:
        rate = tf.cast(self.learning_rate, variable.dtype)
        velocity = self.velocities[self._index_dict[self._var_key(variable)]]
        if decays(variable.name, self.exclude):
            weight_norm, gradient_norm = tf.norm(variable), tf.norm(gradient)
            trust = self.eta * weight_norm / (gradient_norm + self.weight_decay_rate * weight_norm + self.epsilon)
            trust = tf.where(tf.logical_and(weight_norm > 0, gradient_norm > 0), trust, tf.ones_like(trust))
            gradient = gradient + self.weight_decay_rate * variable
            rate = rate * trust
        velocity.assign(self.momentum * velocity + rate * gradient)
        variable.assign_sub(velocity)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            learning_rate=self._serialize_hyperparameter(self._learning_rate),
            momentum=self.momentum,
            eta=self.eta,
            weight_decay_rate=self.weight_decay_rate,
            exclude=list(self.exclude),
            epsilon=self.epsilon,
        )
        return config


OptimizerBuilder = Callable[[OptimizerOptions, keras.optimizers.schedules.LearningRateSchedule], Any]


def _sgd(options: OptimizerOptions, schedule: keras.optimizers.schedules.LearningRateSchedule) -> Any:
    return keras.optimizers.SGD(schedule, momentum=options.momentum, nesterov=options.nesterov)


def _lars(options: OptimizerOptions, schedule: keras.optimizers.schedules.LearningRateSchedule) -> Any:
    return Lars(
        schedule,
        momentum=options.momentum,
        eta=options.lars_eta,
        weight_decay_rate=options.weight_decay,
        exclude=options.decay_exclude,
        epsilon=options.epsilon,
    )


def _adam(options: OptimizerOptions, schedule: keras.optimizers.schedules.LearningRateSchedule) -> Any:
    return keras.optimizers.Adam(schedule, beta_1=options.beta_1, beta_2=options.beta_2, epsilon=options.epsilon)


def _adamw(options: OptimizerOptions, schedule: keras.optimizers.schedules.LearningRateSchedule) -> Any:
    optimizer = keras.optimizers.AdamW(
        schedule,
        weight_decay=options.weight_decay,
        beta_1=options.beta_1,
        beta_2=options.beta_2,
        epsilon=options.epsilon,
    )
    # Keras matches these against each variable's name; `decays` is the same rule.
    excluded = [part for kind in options.decay_exclude for part in EXCLUDED_NAMES[kind]]
    optimizer.exclude_from_weight_decay(var_names=[f"/{part}:" for part in excluded])
    return optimizer


OPTIMIZERS: dict[str, OptimizerBuilder] = {"sgd": _sgd, "lars": _lars, "adamw": _adamw, "adam": _adam}
# Which optimizers take weight decay in the loss (coupled L2); the others apply it in their update.
COUPLED_DECAY = ("sgd", "adam")

if set(OPTIMIZERS) != set(OPTIMIZER_NAMES) or set(DECAYS) != set(SCHEDULE_NAMES):
    raise RuntimeError("components/trainer/recipe.py declares other names than optimization.py builds")


@keras.utils.register_keras_serializable(package="tfxp")
class SmoothedCrossentropy(keras.losses.Loss):
    """Sparse labels, smoothed: cross-entropy against (1 − ε)·one_hot + ε / classes (Szegedy et al. 2016)."""

    def __init__(self, num_classes: int, label_smoothing: float, name: str = "smoothed_crossentropy", **kwargs: Any):
        super().__init__(name=name, **kwargs)
        self.num_classes = num_classes
        self.label_smoothing = label_smoothing

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        labels = tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), tf.int32), self.num_classes, dtype=y_pred.dtype)
        return keras.losses.categorical_crossentropy(labels, y_pred, label_smoothing=self.label_smoothing)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_classes": self.num_classes, "label_smoothing": self.label_smoothing}


@dataclass(frozen=True)
class Recipe:
    """What `model.compile` takes, and what the run reports of it.

    Attributes:
        optimizer: The Keras optimizer `trainer.optimizer.name` names, on `schedule`.
        schedule: Warmup, then the decay.
        loss: Cross-entropy, smoothed when `trainer.label_smoothing` > 0.
        peak_learning_rate: The schedule's peak at the run's global batch.
        warmup_steps: The warmup in steps.
    """

    optimizer: Any
    schedule: WarmupSchedule
    loss: keras.losses.Loss
    peak_learning_rate: float
    warmup_steps: int


def build_recipe(trainer: TrainerOptions, global_batch: int, num_classes: int) -> Recipe:
    """The optimizer, schedule and loss of `trainer` at `global_batch` (call inside the strategy's scope).

    Raises:
        ValueError: `schedule.warmup_epochs` without `trainer.images_per_epoch`.
    """
    peak = scaled_learning_rate(trainer.schedule, global_batch)
    warmup = warmup_steps(trainer, global_batch)
    schedule = WarmupSchedule(peak, warmup, trainer.train_steps, trainer.schedule)
    optimizer = OPTIMIZERS[trainer.optimizer.name](trainer.optimizer, schedule)
    loss: keras.losses.Loss = (
        SmoothedCrossentropy(num_classes, trainer.label_smoothing)
        if trainer.label_smoothing
        else keras.losses.SparseCategoricalCrossentropy()
    )
    return Recipe(optimizer, schedule, loss, peak, warmup)


def add_weight_decay(model: keras.Model, options: OptimizerOptions) -> int:
    """Adds λ/2·Σ‖w‖² over the decayed variables to the model's loss, for the optimizers that take it there.

    Returns:
        How many variables decay through the loss (0 for `lars` and `adamw`, which decay in their update, and
        without weight decay).
    """
    if not options.weight_decay or options.name not in COUPLED_DECAY:
        return 0
    variables = decayed_variables(model, options.decay_exclude)
    rate = options.weight_decay

    def penalty() -> tf.Tensor:
        return rate * tf.add_n([tf.nn.l2_loss(tf.cast(variable, tf.float32)) for variable in variables])

    model.add_loss(penalty)
    return len(variables)
