"""The Trainer's typed options, read from the `custom_config` dict the pipeline passes to the TFX Trainer.

Components cannot import `pipeline.config`, so the pipeline passes plain data:

    {"trainer": {<the trainer section as a dict>}, "labels_path": str, "label_offset": int, "warmup_requests": int}

and this module validates it into frozen dataclasses. Unknown keys are errors naming the valid ones, so a
config key added on one side and not the other fails loudly instead of being ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar


class TrainerConfigError(ValueError):
    """The Trainer's custom_config is malformed: names the key, the value and what is expected."""


@dataclass(frozen=True)
class TrainerOptions:
    """Mirrors the `trainer` config section (see pipeline/config.py for each key's meaning)."""

    model: str = "small_resnet"
    train_steps: int = 600
    steps_per_epoch: int = 100
    eval_steps: int = 0
    batch_size: int = 64
    learning_rate: float = 0.002
    base_batch_size: int = 64
    warmup_steps: int = 50
    precision: str = "auto"
    xla: str = "auto"
    strategy: str = "auto"
    image_size: int = 32
    channels: int = 1
    width: int = 16
    gpu_memory: str = "growth"
    cache: bool = True
    shuffle_buffer: int = 2048
    augment: tuple[str, ...] = ()
    deterministic: bool = False
    profile_steps: str = ""
    seed: int = 42

    @property
    def epochs(self) -> int:
        """Keras epochs; the last one may stop early so exactly `train_steps` steps run."""
        return -(-self.train_steps // self.epoch_steps)

    @property
    def epoch_steps(self) -> int:
        """Steps per Keras epoch (an epoch is the checkpoint/backup interval)."""
        return min(self.steps_per_epoch, self.train_steps)

    @property
    def profile_window(self) -> tuple[int, int] | None:
        """The profiler's (start, stop) step window, or None when profiling is off."""
        if not self.profile_steps:
            return None
        start, stop = (int(part) for part in self.profile_steps.split(","))
        return start, stop


@dataclass(frozen=True)
class RunOptions:
    """Everything `run_fn` reads from `custom_config`.

    Attributes:
        trainer: The trainer section.
        labels_path: The label map file (one class name a line); its line count is the number of classes.
        label_offset: Subtracted from `image/class/label`.
        warmup_requests: PredictionLog warmup records to write into `assets.extra/`.
    """

    trainer: TrainerOptions
    labels_path: str
    label_offset: int = 0
    warmup_requests: int = 4


_T = TypeVar("_T")


def _build(cls: type[_T], values: Mapping[str, Any], where: str) -> _T:
    fields = {field.name: field for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise TrainerConfigError(
            f"Trainer custom_config{where}: unknown key(s) {unknown}; valid keys: {', '.join(fields)}. "
            "The pipeline and components/trainer/options.py must agree on the trainer section."
        )
    missing = [name for name, field in fields.items() if name not in values and _is_required(field)]
    if missing:
        raise TrainerConfigError(f"Trainer custom_config{where}: missing key(s) {missing}")
    converted = {}
    for name, value in values.items():
        default = fields[name].default
        if isinstance(default, tuple):
            value = tuple(value)
        elif type(default) is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        expected = type(default) if _has_default(fields[name]) else None
        if expected is not None and not isinstance(value, expected):
            raise TrainerConfigError(
                f"Trainer custom_config{where}: `{name}` = {value!r} should be {expected.__name__}"
            )
        converted[name] = value
    return cls(**converted)


def _has_default(field: dataclasses.Field[Any]) -> bool:
    return field.default is not dataclasses.MISSING


def _is_required(field: dataclasses.Field[Any]) -> bool:
    return not _has_default(field) and field.default_factory is dataclasses.MISSING


def parse_custom_config(custom_config: Mapping[str, Any] | None) -> RunOptions:
    """Validates the Trainer's `custom_config` into `RunOptions`.

    Raises:
        TrainerConfigError: missing or unknown keys, or values of the wrong type.
    """
    if not custom_config:
        raise TrainerConfigError(
            "Trainer custom_config is empty; the pipeline must pass "
            '{"trainer": {...}, "labels_path": ..., "label_offset": ..., "warmup_requests": ...}'
        )
    values = dict(custom_config)
    trainer_values = values.pop("trainer", None)
    if not isinstance(trainer_values, Mapping):
        raise TrainerConfigError(
            f"Trainer custom_config: `trainer` must be the trainer config section as a dict, got {trainer_values!r}"
        )
    trainer = _build(TrainerOptions, trainer_values, "['trainer']")
    return _build(RunOptions, {**values, "trainer": trainer}, "")
