"""The recipe built: schedules, LARS, weight decay and its exclusions, label smoothing, the broken-model check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.trainer.diagnosis import diagnose, explain
from components.trainer.eval_metrics import TopPredictedShare
from components.trainer.models import ModelSpec, build_model
from components.trainer.optimization import (
    DECAYS,
    OPTIMIZERS,
    Lars,
    SmoothedCrossentropy,
    WarmupSchedule,
    add_weight_decay,
    build_recipe,
    decayed_variables,
    decays,
    schedule_curve,
)
from components.trainer.options import TrainerOptions
from components.trainer.recipe import OPTIMIZER_NAMES, SCHEDULE_NAMES, OptimizerOptions, ScheduleOptions, global_batch
from components.trainer.training import note_backups
from pipeline.config import load_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


@pytest.fixture(autouse=True)
def float32_policy() -> Iterator[None]:
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


def rates(schedule: WarmupSchedule, steps: list[int]) -> list[float]:
    return [float(schedule(tf.constant(step))) for step in steps]


def test_registries_build_every_declared_name() -> None:
    assert set(OPTIMIZERS) == set(OPTIMIZER_NAMES) and set(DECAYS) == set(SCHEDULE_NAMES)


def test_the_one_node_recipe_at_step_0_warmup_end_midway_and_last() -> None:
    config = load_config(CONFIGS / "imagenet_a100.yaml")
    recipe = build_recipe(config.trainer, global_batch(config.trainer, 8), num_classes=1000)
    peak, warmup, total = 2.048, 5005, 56_340
    assert (recipe.peak_learning_rate, recipe.warmup_steps) == (pytest.approx(peak), warmup)
    first, warmed, midway, last = rates(recipe.schedule, [0, warmup - 1, (warmup + total) // 2, total - 1])
    assert first == pytest.approx(peak / warmup, rel=1e-5)  # linear warmup from peak/warmup
    assert warmed == pytest.approx(peak, rel=1e-6)
    assert midway == pytest.approx(peak / 2, rel=1e-3)  # cosine: half-way down at the middle of the decay
    assert last == pytest.approx(0.0, abs=1e-5)
    assert isinstance(recipe.optimizer, keras.optimizers.SGD) and not recipe.optimizer.nesterov
    assert float(recipe.optimizer.momentum) == pytest.approx(0.875)
    assert isinstance(recipe.loss, SmoothedCrossentropy) and recipe.loss.label_smoothing == 0.1


def test_the_multinode_recipe_is_lars_with_mlperfs_polynomial() -> None:
    config = load_config(CONFIGS / "imagenet_a100_multinode.yaml")
    recipe = build_recipe(config.trainer, global_batch(config.trainer, 8), num_classes=1000)
    warmup, total = recipe.warmup_steps, config.trainer.train_steps
    assert warmup == 391
    first, warmed, midway, last = rates(recipe.schedule, [0, warmup - 1, (warmup + total) // 2, total - 1])
    assert (first, warmed) == (pytest.approx(25.0 / warmup, rel=1e-5), pytest.approx(25.0, rel=1e-6))
    # (peak − end)·(1 − progress)² + end, progress ≈ 0.5 mid-way.
    progress = ((warmup + total) // 2 - warmup) / (total - warmup)
    assert midway == pytest.approx((25.0 - 1e-4) * (1 - progress) ** 2 + 1e-4, rel=1e-4)
    assert last == pytest.approx(1e-4, abs=2e-5)
    assert isinstance(recipe.optimizer, Lars)
    assert (recipe.optimizer.momentum, recipe.optimizer.eta, recipe.optimizer.weight_decay_rate) == (0.9, 0.001, 2e-4)


def test_stepwise_and_constant_schedules() -> None:
    options = ScheduleOptions(name="stepwise", boundaries=(0.5, 0.75), factors=(0.1, 0.01), warmup_steps=10)
    schedule = WarmupSchedule(1.0, 10, 100, options)
    assert rates(schedule, [9, 49, 50, 74, 75, 99]) == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.01, 0.01])
    constant = WarmupSchedule(0.3, 0, 10, ScheduleOptions(name="constant", warmup_fraction=0))
    assert rates(constant, [0, 9]) == pytest.approx([0.3, 0.3])
    restored = WarmupSchedule.from_config(schedule.get_config())
    assert restored.get_config() == schedule.get_config()
    curve = schedule_curve(schedule, points=20)
    assert (9, pytest.approx(1.0)) in curve and (50, pytest.approx(0.1)) in curve and curve[-1][0] == 99


def test_weight_decay_skips_batch_norm_and_biases() -> None:
    assert decays("stage1_conv1/kernel:0") and decays("logits/kernel:0")
    assert not decays("stage1_bn1/gamma:0") and not decays("stage1_bn1/beta:0") and not decays("logits/bias:0")
    assert decays("logits/bias:0", exclude=("batch_norm",))
    model = build_model("small_resnet", ModelSpec(8, 1, 3, 4))
    decayed = {variable.name for variable in decayed_variables(model, ("batch_norm", "bias"))}
    kernels = {
        variable.name
        for layer in model.layers
        if isinstance(layer, keras.layers.Conv2D | keras.layers.Dense)
        for variable in [layer.kernel]
    }
    assert decayed == kernels


def test_coupled_weight_decay_is_half_lambda_times_the_squared_kernels() -> None:
    model = build_model("small_resnet", ModelSpec(8, 1, 3, 4))
    options = OptimizerOptions(name="sgd", weight_decay=1e-3)
    assert add_weight_decay(model, options) == len(decayed_variables(model, options.decay_exclude))
    expected = 1e-3 * 0.5 * sum(float(tf.reduce_sum(v**2)) for v in decayed_variables(model, options.decay_exclude))
    assert float(tf.add_n(model.losses)) == pytest.approx(expected, rel=1e-5)
    # LARS and AdamW decay inside their update, not in the loss.
    assert add_weight_decay(build_model("small_resnet", ModelSpec(8, 1, 3, 4)), OptimizerOptions(name="lars")) == 0


def lars_reference(weights: np.ndarray, gradient: np.ndarray, rate: float, eta: float, decay: float) -> np.ndarray:
    """One LARS step from zero velocity (mlcommons/training lars_optimizer.py:132-160), in NumPy."""
    weight_norm, gradient_norm = np.linalg.norm(weights), np.linalg.norm(gradient)
    trust = eta * weight_norm / (gradient_norm + decay * weight_norm + 1e-7)
    return weights - rate * trust * (gradient + decay * weights)


def test_lars_follows_mlperfs_update_and_skips_excluded_variables() -> None:
    kernel = tf.Variable(np.full((3, 3), 2.0, np.float32), name="conv/kernel")
    gamma = tf.Variable(np.ones(3, np.float32), name="bn/gamma")
    gradient_kernel, gradient_gamma = np.full((3, 3), 0.5, np.float32), np.full(3, 0.25, np.float32)
    optimizer = Lars(learning_rate=1.0, momentum=0.9, eta=0.001, weight_decay_rate=1e-4)
    optimizer.apply_gradients([(tf.constant(gradient_kernel), kernel), (tf.constant(gradient_gamma), gamma)])
    expected = lars_reference(np.full((3, 3), 2.0), gradient_kernel, 1.0, 0.001, 1e-4)
    np.testing.assert_allclose(kernel.numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(gamma.numpy(), 1.0 - 1.0 * gradient_gamma, rtol=1e-6)  # plain SGD, no decay


def test_lars_trust_ratio_sees_unscaled_gradients_under_loss_scaling() -> None:
    def one_step(scaled: bool) -> np.ndarray:
        keras.utils.set_random_seed(1)
        inputs = keras.Input((4,))
        model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs))
        optimizer = Lars(learning_rate=0.5, momentum=0.9, eta=0.01, weight_decay_rate=1e-4)
        if scaled:
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer, dynamic=False, initial_scale=1024.0)
        model.compile(optimizer=optimizer, loss="mse")
        model.train_on_batch(np.ones((8, 4), np.float32), np.zeros((8, 2), np.float32))
        return model.get_layer("dense").kernel.numpy()

    np.testing.assert_allclose(one_step(scaled=True), one_step(scaled=False), rtol=1e-5)


def test_adamw_decays_kernels_but_not_batch_norm() -> None:
    kernel = tf.Variable(np.ones((2, 2), np.float32), name="conv/kernel")
    gamma = tf.Variable(np.ones(2, np.float32), name="bn/gamma")
    trainer = TrainerOptions(
        optimizer=OptimizerOptions(name="adamw", weight_decay=0.1),
        schedule=ScheduleOptions(name="constant", learning_rate=0.01, base_batch_size=1, warmup_fraction=0),
    )
    optimizer = build_recipe(trainer, global_batch=1, num_classes=2).optimizer
    optimizer.apply_gradients([(tf.zeros((2, 2)), kernel), (tf.zeros(2), gamma)])
    assert np.all(kernel.numpy() < 1.0) and np.all(gamma.numpy() == 1.0)


def test_label_smoothing_matches_its_definition() -> None:
    probabilities = tf.constant([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    labels = tf.constant([0, 2])
    smoothed = (1 - 0.1) * tf.one_hot(labels, 3) + 0.1 / 3
    expected = float(tf.reduce_mean(-tf.reduce_sum(smoothed * tf.math.log(probabilities), axis=-1)))
    assert float(SmoothedCrossentropy(3, 0.1)(labels, probabilities)) == pytest.approx(expected, rel=1e-5)


def test_top_predicted_share_counts_the_commonest_answer() -> None:
    metric = TopPredictedShare(3)
    metric.update_state(
        tf.constant([0, 1, 2, 0]), tf.constant([[0.9, 0.1, 0], [0.8, 0.2, 0], [0.6, 0, 0.4], [0, 0, 1]])
    )
    assert float(metric.result()) == pytest.approx(0.75)


def test_the_issues_one_class_model_is_said_broken_with_its_causes() -> None:
    # configs/imagenet_a100.yaml shortened to 300 steps on 3 classes (issue 32): warmup capped at the run's length.
    diagnosis = diagnose(0.95, 0.2, 0.37, 71.8, 3, top_predicted_share=1.0, warmup_steps=300, train_steps=300)
    assert diagnosis["broken"]
    assert diagnosis["symptoms"][:2] == [
        "training accuracy 0.95 but eval accuracy 0.37",
        "answers one class for 100% of the eval images",
    ]
    assert diagnosis["likely_causes"][0].startswith("the schedule: the warmup (300 steps) takes 100% of the run")
    assert any(cause.startswith("BatchNorm statistics") for cause in diagnosis["likely_causes"])
    assert explain(diagnosis).startswith("the trained model looks broken: training accuracy 0.95")
    assert "Likely causes: (1) the schedule: the warmup (300 steps)" in explain(diagnosis)


@pytest.mark.parametrize(
    "measured",
    [
        (0.99, 0.05, 0.98, 0.07, 10, 0.11),  # healthy
        (0.3, 2.0, 0.12, 2.2, 10, 0.3),  # undertrained, not broken: training did not learn either
    ],
)
def test_healthy_or_undertrained_models_are_not_broken(measured: tuple[float, ...]) -> None:
    train_accuracy, train_loss, eval_accuracy, eval_loss, classes, share = measured
    diagnosis = diagnose(train_accuracy, train_loss, eval_accuracy, eval_loss, int(classes), share, 30, 300)
    assert diagnosis == {"broken": False, "symptoms": [], "likely_causes": []} and explain(diagnosis) == ""


def test_a_backup_of_another_optimizer_is_not_resumed_and_said_so(tmp_path: Path) -> None:
    adam = TrainerOptions(optimizer=OptimizerOptions(name="adam"), schedule=ScheduleOptions(learning_rate=1e-3))
    assert note_backups(f"{tmp_path}/backup-aaaa", adam, chief=True) == []
    notes = note_backups(f"{tmp_path}/backup-bbbb", TrainerOptions(), chief=True)
    assert notes == [
        f"trainer: the backup {tmp_path}/backup-aaaa was written under adam, cosine schedule; this run (sgd, cosine "
        "schedule) does not resume it and starts fresh"
    ]
