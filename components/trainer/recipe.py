"""The training recipe as configuration: `trainer.optimizer` and `trainer.schedule`, and the checks on them.

Declared here without TensorFlow, so a config that cannot train is refused when it loads (`tfxp run`,
`tfxp compile`), not hours later in a pod. `components/trainer/optimization.py` builds what these name, through
registries keyed by the same names (as Model Garden's `official/modeling/optimization/optimizer_factory.py`
looks optimizers and schedules up by name).

Conventions (those of the recipes cited in docs/training.md, "The ImageNet recipe"):
- `schedule.learning_rate` is the peak rate for a global batch of `schedule.base_batch_size`; the run's peak is
  scaled linearly to its global batch (Goyal et al. 2017), for every optimizer.
- `optimizer.weight_decay` is λ in the gradient term λ·w (PyTorch's `weight_decay`, NVIDIA's 3.05e-5; a Keras
  `l2(λ/2)` kernel regulariser, Model Garden's `l2(1e-4 / 2)`, is λ = 1e-4). SGD and Adam add it to the
  loss (coupled L2), LARS inside its update (MLPerf), AdamW decoupled (Loshchilov & Hutter).
- Warmup is linear from peak/warmup to the peak; it may be given in steps, epochs (converted with
  `trainer.images_per_epoch` and the global batch) or a fraction of the run.

Example:
    trainer = TrainerOptions()
    recipe_problems(trainer, global_batch(trainer, gpus_per_worker=8))  # []: the digits default on 8 GPUs
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import Field, model_validator

from foundation.config_section import ConfigSection
from foundation.errors import TfxpError

OPTIMIZER_NAMES = ("sgd", "lars", "adamw", "adam")
SCHEDULE_NAMES = ("cosine", "stepwise", "polynomial", "constant")
# Kinds of variable the recipes leave out of weight decay (and LARS out of its trust ratio).
DecayExclusion = Literal["batch_norm", "bias"]
DECAY_EXCLUSIONS: tuple[DecayExclusion, ...] = ("batch_norm", "bias")

# Adam's and AdamW's update is normalised per weight, so its step is about the learning rate itself: above
# ~1e-2 ResNets diverge or collapse (the digits experiment in issue 32: Adam at 6.4 stuck at chance, ln 10).
ADAM_MAX_PEAK = 1e-2
# SGD with momentum and the linear scaling rule holds up to a global batch of 8k (Goyal et al. 2017, Figure 1:
# error rises past 8k); beyond it the published recipes switch to LARS (You et al. 2017; MLPerf).
SGD_MAX_GLOBAL_BATCH = 8192


class OptimizerOptions(ConfigSection):
    """The `trainer.optimizer` section.

    Attributes:
        name: `sgd` (momentum SGD), `lars` (layer-wise adaptive rate scaling, MLPerf's), `adamw` or `adam`.
        momentum: Momentum of `sgd` and `lars` (NVIDIA 0.875, Model Garden and MLPerf 0.9).
        nesterov: Nesterov momentum (`sgd` only).
        weight_decay: λ of the gradient term λ·w; 0 = none.
        decay_exclude: Variable kinds without weight decay (and, for `lars`, without the trust ratio):
            any of `batch_norm` (γ and β), `bias`.
        lars_eta: LARS trust coefficient η (MLPerf's `eeta`, 0.001).
        beta_1: Adam/AdamW first-moment decay.
        beta_2: Adam/AdamW second-moment decay.
        epsilon: Adam/AdamW ε.
    """

    name: Literal["sgd", "lars", "adamw", "adam"] = "sgd"
    momentum: float = Field(0.9, ge=0, lt=1)
    nesterov: bool = False
    weight_decay: float = Field(0.0, ge=0, lt=1)
    decay_exclude: tuple[DecayExclusion, ...] = DECAY_EXCLUSIONS
    lars_eta: float = Field(0.001, gt=0)
    beta_1: float = Field(0.9, ge=0, lt=1)
    beta_2: float = Field(0.999, ge=0, lt=1)
    epsilon: float = Field(1e-7, gt=0)

    @model_validator(mode="after")
    def _check_nesterov(self) -> OptimizerOptions:
        if self.nesterov and self.name != "sgd":
            raise ValueError(
                f"trainer.optimizer.nesterov applies to sgd only, not to trainer.optimizer.name={self.name}"
            )
        return self


class ScheduleOptions(ConfigSection):
    """The `trainer.schedule` section: linear warmup, then the named decay.

    Attributes:
        name: `cosine` (to 0 at the last step), `stepwise` (the rate times `factors[i]` from
            `boundaries[i]` on), `polynomial` (to `end_learning_rate` with `power`) or `constant`.
        learning_rate: Peak rate for a global batch of `base_batch_size` (scaled linearly to the run's).
        base_batch_size: The global batch `learning_rate` is given for.
        warmup_steps: Warmup in optimizer steps.
        warmup_epochs: Warmup in epochs of `trainer.images_per_epoch` images (converted with the global batch).
        warmup_fraction: Warmup as a fraction of `trainer.train_steps` (the default, 0.1, gives way when steps or
            epochs are given). At most one of the three is non-zero.
        boundaries: `stepwise`: where each factor starts, as fractions of the run, increasing.
        factors: `stepwise`: the multiplier of the peak from each boundary on (one per boundary).
        power: `polynomial`: the decay's exponent (MLPerf's LARS: 2).
        end_learning_rate: `polynomial`: the rate at the last step (not scaled with the batch).
    """

    name: Literal["cosine", "stepwise", "polynomial", "constant"] = "cosine"
    learning_rate: float = Field(0.1, gt=0)
    base_batch_size: int = Field(64, ge=1)
    warmup_steps: int = Field(0, ge=0)
    warmup_epochs: float = Field(0.0, ge=0)
    warmup_fraction: float = Field(0.1, ge=0, lt=1)
    boundaries: tuple[float, ...] = ()
    factors: tuple[float, ...] = ()
    power: float = Field(2.0, gt=0)
    end_learning_rate: float = Field(0.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _one_warmup(cls, values: Any) -> Any:
        # The default warmup is a fraction; giving steps or epochs replaces it instead of clashing with it.
        given = isinstance(values, Mapping) and (values.get("warmup_steps") or values.get("warmup_epochs"))
        if given and "warmup_fraction" not in values:
            return {**values, "warmup_fraction": 0.0}
        return values

    @model_validator(mode="after")
    def _check_shape(self) -> ScheduleOptions:
        given = [key for key in ("warmup_steps", "warmup_epochs", "warmup_fraction") if getattr(self, key)]
        if len(given) > 1:
            raise ValueError(
                f"set one warmup, not {' and '.join('trainer.schedule.' + key for key in given)}; the others stay 0"
            )
        if self.name == "stepwise":
            if not self.boundaries or len(self.boundaries) != len(self.factors):
                raise ValueError(
                    "trainer.schedule.name=stepwise needs trainer.schedule.boundaries (fractions of the run) and "
                    f"as many trainer.schedule.factors; got {len(self.boundaries)} boundaries and "
                    f"{len(self.factors)} factors, e.g. boundaries [0.333, 0.667, 0.889], factors [0.1, 0.01, 0.001]"
                )
            if any(not 0 < b < 1 for b in self.boundaries) or list(self.boundaries) != sorted(set(self.boundaries)):
                raise ValueError(
                    f"trainer.schedule.boundaries {list(self.boundaries)} must increase strictly, each between 0 "
                    "and 1 (fractions of trainer.train_steps)"
                )
            if any(factor <= 0 for factor in self.factors):
                raise ValueError(f"trainer.schedule.factors {list(self.factors)} must be positive")
        elif self.boundaries or self.factors:
            raise ValueError(f"trainer.schedule.boundaries and factors apply to name=stepwise, not to name={self.name}")
        return self


class TrainerRecipe(Protocol):
    """What the recipe's checks read of the trainer section (`components.trainer.options.TrainerOptions`)."""

    @property
    def batch_size(self) -> int: ...
    @property
    def workers(self) -> int: ...
    @property
    def train_steps(self) -> int: ...
    @property
    def images_per_epoch(self) -> int: ...
    @property
    def label_smoothing(self) -> float: ...
    @property
    def optimizer(self) -> OptimizerOptions: ...
    @property
    def schedule(self) -> ScheduleOptions: ...


def scaled_learning_rate(schedule: ScheduleOptions, global_batch: int) -> float:
    """The run's peak rate: `learning_rate` × global batch / `base_batch_size` (Goyal et al. 2017)."""
    return schedule.learning_rate * global_batch / schedule.base_batch_size


def epoch_steps(images_per_epoch: int, global_batch: int) -> float:
    """Optimizer steps of one pass over `images_per_epoch` images at `global_batch` (fractional)."""
    return images_per_epoch / global_batch


def warmup_steps(trainer: TrainerRecipe, global_batch: int) -> int:
    """The warmup in optimizer steps, from whichever of the three units the schedule uses.

    Raises:
        ValueError: `warmup_epochs` without `trainer.images_per_epoch`.
    """
    schedule = trainer.schedule
    if schedule.warmup_epochs:
        if not trainer.images_per_epoch:
            raise ValueError(
                f"trainer.schedule.warmup_epochs={schedule.warmup_epochs} needs trainer.images_per_epoch (the train "
                "split's size, e.g. 1281167 for ImageNet) to convert epochs into steps; set it, or use "
                "trainer.schedule.warmup_steps or warmup_fraction"
            )
        return round(schedule.warmup_epochs * epoch_steps(trainer.images_per_epoch, global_batch))
    if schedule.warmup_fraction:
        return round(schedule.warmup_fraction * trainer.train_steps)
    return schedule.warmup_steps


def global_batch(trainer: TrainerRecipe, gpus_per_worker: int) -> int:
    """`batch_size` × replicas per worker (at least 1) × `workers`: what one optimizer step sees."""
    return trainer.batch_size * max(gpus_per_worker, 1) * trainer.workers


def recipe_problems(trainer: TrainerRecipe, batch: int) -> list[str]:
    """What in the recipe is known not to train at the run's global batch, one sentence each, naming the keys.

    Args:
        trainer: The trainer section.
        batch: The run's global batch: `global_batch(trainer, gpus_per_worker)` when a config is checked
            (`kubeflow.trainer_accelerator.count` GPUs per worker), the runtime's when the Trainer runs.
    """
    devices = max(batch // (trainer.batch_size * trainer.workers), 1)
    where = f"global batch {batch} = trainer.batch_size {trainer.batch_size} × {devices} device(s)"
    where += f" × trainer.workers {trainer.workers}"
    optimizer, schedule = trainer.optimizer, trainer.schedule
    peak = scaled_learning_rate(schedule, batch)
    problems = []
    if optimizer.name in ("adam", "adamw") and peak > ADAM_MAX_PEAK:
        problems.append(
            f"trainer.optimizer.name={optimizer.name} with a peak learning rate of {peak:.4g} "
            f"(trainer.schedule.learning_rate {schedule.learning_rate} per trainer.schedule.base_batch_size "
            f"{schedule.base_batch_size}, {where}): Adam's steps are about the rate itself, and above "
            f"{ADAM_MAX_PEAK:g} ResNets collapse to one class. Use trainer.optimizer.name=sgd or lars (the rates "
            "of Goyal et al. and MLPerf are theirs), or lower trainer.schedule.learning_rate to at most "
            f"{ADAM_MAX_PEAK * schedule.base_batch_size / batch:.3g}"
        )
    if optimizer.name == "sgd" and batch > SGD_MAX_GLOBAL_BATCH:
        problems.append(
            f"trainer.optimizer.name=sgd at a {where}: momentum SGD with linear scaling loses accuracy past "
            f"{SGD_MAX_GLOBAL_BATCH} (Goyal et al. 2017); use trainer.optimizer.name=lars (MLPerf's recipe, "
            "configs/imagenet_a100_multinode.yaml) or a smaller trainer.batch_size"
        )
    try:
        warmup = warmup_steps(trainer, batch)
    except ValueError as error:
        return [*problems, str(error)]
    if warmup >= trainer.train_steps:
        epochs_hint = ""
        if schedule.warmup_epochs and trainer.images_per_epoch:
            epochs_hint = f" (trainer.images_per_epoch {trainer.images_per_epoch}: is it the train split's size?)"
        problems.append(
            f"the warmup ({_warmup_keys(schedule)}: {warmup} steps at the {where}){epochs_hint} is as long as the run "
            f"(trainer.train_steps {trainer.train_steps}): the rate would peak at the last step, with BatchNorm "
            "statistics that never catch up. Shorten the warmup (e.g. trainer.schedule.warmup_fraction=0.1) or "
            "train longer"
        )
    if schedule.name == "polynomial" and schedule.end_learning_rate >= peak:
        problems.append(
            f"trainer.schedule.end_learning_rate {schedule.end_learning_rate:g} is not below the peak {peak:.4g}: "
            "the polynomial schedule would not decay"
        )
    return problems


class RecipeError(TfxpError, ValueError):
    """The training recipe is known not to train at the run's global batch (`recipe_problems`)."""


def check_recipe(trainer: TrainerRecipe, batch: int) -> None:
    """Raises RecipeError listing `recipe_problems`, if any."""
    problems = recipe_problems(trainer, batch)
    if problems:
        raise RecipeError("the training recipe would not train: " + "; ".join(problems))


def describe(trainer: TrainerRecipe, global_batch_size: int) -> str:
    """One line: the optimizer, the schedule and the peak, as the run summary and the logs say it."""
    optimizer, schedule = trainer.optimizer, trainer.schedule
    parts: list[str] = [optimizer.name]
    if optimizer.name in ("sgd", "lars"):
        parts.append(f"momentum {optimizer.momentum:g}" + (" nesterov" if optimizer.nesterov else ""))
    if optimizer.weight_decay:
        excluded = ", ".join(optimizer.decay_exclude) or "nothing"
        parts.append(f"weight decay {optimizer.weight_decay:g} (not on {excluded})")
    warmup = warmup_steps(trainer, global_batch_size)
    peak = scaled_learning_rate(schedule, global_batch_size)
    parts.append(
        f"{schedule.name} schedule, peak {peak:.4g} at global batch {global_batch_size}, warmup {warmup} steps"
    )
    if trainer.label_smoothing:
        parts.append(f"label smoothing {trainer.label_smoothing:g}")
    return ", ".join(parts)


def _warmup_keys(schedule: ScheduleOptions) -> str:
    for key in ("warmup_epochs", "warmup_fraction"):
        if getattr(schedule, key):
            return f"trainer.schedule.{key}={getattr(schedule, key)}"
    return f"trainer.schedule.warmup_steps={schedule.warmup_steps}"
