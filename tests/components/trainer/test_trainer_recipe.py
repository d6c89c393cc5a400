"""The recipe as configuration: the shipped configs against the published recipes, and the checks that refuse
what is known not to train (components/trainer/recipe.py; no TensorFlow)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from config_checks import assert_moved_key_refused

from components.trainer.options import TrainerOptions
from components.trainer.recipe import (
    ScheduleOptions,
    describe,
    global_batch,
    recipe_problems,
    scaled_learning_rate,
    warmup_steps,
)
from pipeline.config import ConfigError, load_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
IMAGENET_TRAIN_IMAGES = 1_281_167


def test_the_one_node_config_is_nvidias_90_epoch_amp_recipe() -> None:
    # NVIDIA DeepLearningExamples RN50 v1.5, DGXA100 AMP 90 epochs (PyTorch/Classification/ConvNets/configs.yml).
    config = load_config(CONFIGS / "imagenet_a100.yaml")
    trainer = config.trainer
    batch = global_batch(trainer, config.kubeflow.trainer_accelerator.count)
    assert batch == 2048
    assert (trainer.model, trainer.optimizer.name, trainer.optimizer.momentum) == ("resnet50", "sgd", 0.875)
    assert trainer.optimizer.weight_decay == 3.0517578125e-05 and "batch_norm" in trainer.optimizer.decay_exclude
    assert trainer.label_smoothing == 0.1 and trainer.schedule.name == "cosine"
    assert scaled_learning_rate(trainer.schedule, batch) == pytest.approx(2.048)  # 0.256 per 256
    steps_per_epoch = IMAGENET_TRAIN_IMAGES / batch
    assert warmup_steps(trainer, batch) == round(8 * steps_per_epoch)  # 8 warmup epochs
    assert trainer.train_steps == pytest.approx(90 * steps_per_epoch, rel=1e-3)  # 90 epochs
    assert ("crop" in trainer.augment and "flip" in trainer.augment) and trainer.crop_area == (0.08, 1.0)
    assert trainer.crop_aspect == pytest.approx((3 / 4, 4 / 3), rel=1e-6) and trainer.eval_crop == 0.875
    assert recipe_problems(trainer, batch) == []


def test_the_multinode_config_is_mlperfs_lars_recipe_at_16k() -> None:
    # mlcommons/training image_classification/tensorflow2: lars_util.py, lars_optimizer.py, README.md.
    config = load_config(CONFIGS / "imagenet_a100_multinode.yaml")
    trainer = config.trainer
    batch = global_batch(trainer, config.kubeflow.trainer_accelerator.count)
    assert batch == 16_384
    optimizer, schedule = trainer.optimizer, trainer.schedule
    assert (optimizer.name, optimizer.momentum, optimizer.lars_eta, optimizer.weight_decay) == (
        "lars",
        0.9,
        0.001,
        2e-4,
    )
    assert (schedule.name, schedule.power, schedule.end_learning_rate) == ("polynomial", 2.0, 1e-4)
    assert scaled_learning_rate(schedule, batch) == pytest.approx(25.0)  # the peak for 16k ≤ batch < 32k
    assert warmup_steps(trainer, batch) == round(5 * IMAGENET_TRAIN_IMAGES / batch)  # 5 warmup epochs
    assert trainer.label_smoothing == 0.1
    assert trainer.train_steps == pytest.approx(42 * IMAGENET_TRAIN_IMAGES / batch, rel=1e-3)


def test_the_digits_default_passes_the_check_on_eight_gpus() -> None:
    trainer = TrainerOptions()
    assert recipe_problems(trainer, global_batch(trainer, gpus_per_worker=8)) == []
    load_config(
        CONFIGS / "default.yaml",
        ["kubeflow.trainer_accelerator.count=8", "kubeflow.trainer_accelerator.type=nvidia.com/gpu"],
    )


def test_adam_on_the_multinode_config_is_refused_naming_the_keys() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(
            CONFIGS / "imagenet_a100_multinode.yaml",
            [
                "trainer.optimizer.name=adam",
                "trainer.schedule.learning_rate=0.1",
                "trainer.schedule.base_batch_size=256",
            ],
        )
    message = str(raised.value)
    assert "trainer.optimizer.name=adam with a peak learning rate of 6.4" in message
    assert "trainer.schedule.learning_rate 0.1 per trainer.schedule.base_batch_size 256" in message
    assert "global batch 16384 = trainer.batch_size 256 × 8 device(s) × trainer.workers 8" in message


def test_a_warmup_as_long_as_the_run_is_refused() -> None:
    # The case: the one-node config shortened to 300 steps keeps its 8 warmup epochs.
    with pytest.raises(ConfigError, match=r"the warmup \(trainer.schedule.warmup_epochs=8.0: 5005 steps"):
        load_config(CONFIGS / "imagenet_a100.yaml", ["trainer.train_steps=300"])
    load_config(
        CONFIGS / "imagenet_a100.yaml",
        ["trainer.train_steps=300", "trainer.schedule.warmup_epochs=0", "trainer.schedule.warmup_fraction=0.1"],
    )


def test_sgd_past_8k_is_refused_towards_lars() -> None:
    with pytest.raises(
        ConfigError, match=r"trainer.optimizer.name=sgd at a global batch 16384 .* use trainer.optimizer"
    ):
        load_config(CONFIGS / "imagenet_a100_multinode.yaml", ["trainer.optimizer.name=sgd"])


@pytest.mark.parametrize("key", ["learning_rate", "base_batch_size", "warmup_steps"])
def test_moved_keys_are_refused_with_the_new_name(key: str, tmp_path: Path) -> None:
    assert_moved_key_refused("trainer", key, f"schedule.{key}", "1", tmp_path)


def test_warmup_units() -> None:
    trainer = TrainerOptions(train_steps=1000, images_per_epoch=6400, schedule=ScheduleOptions(warmup_epochs=2))
    assert warmup_steps(trainer, 64) == 200 and warmup_steps(trainer, 128) == 100  # epochs follow the batch
    assert warmup_steps(TrainerOptions(train_steps=1000), 64) == 100  # the default: 10 % of the run
    assert warmup_steps(TrainerOptions(schedule=ScheduleOptions(warmup_steps=7)), 64) == 7
    epochs_without_size = TrainerOptions(schedule=ScheduleOptions(warmup_epochs=1))
    assert any("needs trainer.images_per_epoch" in problem for problem in recipe_problems(epochs_without_size, 64))


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"warmup_steps": 5, "warmup_fraction": 0.1}, "set one warmup"),
        ({"name": "stepwise"}, "needs trainer.schedule.boundaries"),
        ({"name": "stepwise", "boundaries": [0.6, 0.3], "factors": [0.1, 0.01]}, "must increase strictly"),
        ({"name": "cosine", "boundaries": [0.5], "factors": [0.1]}, "apply to name=stepwise"),
    ],
)
def test_schedule_shape_errors(schedule: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [f"trainer.schedule.{key}={value}" for key, value in schedule.items()])


def test_nesterov_is_sgds_only() -> None:
    with pytest.raises(ConfigError, match="nesterov applies to sgd only"):
        load_config(None, ["trainer.optimizer.name=lars", "trainer.optimizer.nesterov=true"])


def test_describe_names_every_part() -> None:
    config = load_config(CONFIGS / "imagenet_a100.yaml")
    text = describe(config.trainer, 2048)
    assert text.startswith("sgd, momentum 0.875, weight decay 3.05176e-05 (not on batch_norm, bias), cosine")
    assert "peak 2.048 at global batch 2048" in text and "warmup 5005 steps" in text and "label smoothing 0.1" in text
    assert not math.isnan(scaled_learning_rate(config.trainer.schedule, 1))
