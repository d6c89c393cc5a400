"""The `trainer` config section, and what the Trainer's `run_fn` reads from its `custom_config`.

`TrainerOptions` *is* the `trainer` section: `pipeline/config.py` composes it, and the pipeline passes it to the
TFX Trainer as plain data inside `custom_config`, which `parse_custom_config` validates with the same model:

    {"trainer": {<the trainer section>}, "labels_path": str, "label_offset": int, "warmup_requests": int,
     "serving_base": str}

Example:
    run = parse_custom_config({"trainer": {"train_steps": 50}, "labels_path": "data/digits/labels.txt"})
    run.trainer.epochs  # 1
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from components.multinode.settings import TfJobLaunch
from components.trainer.recipe import OptimizerOptions, ScheduleOptions
from foundation.config_section import ConfigSection, describe_errors, refuse_moved_keys, registered
from foundation.errors import TfxpError
from foundation.image_formats import DEFAULT_MAX_IMAGE_PIXELS
from foundation.preprocessing_spec import MAX_IMAGE_SIZE

# The model registry's names, declared here without Keras so the config checks `trainer.model` when it loads.
# components/trainer/models.py registers one builder under each name and refuses any other.
# TFX's TrainArgs.num_steps and EvalArgs.num_steps are uint32.
MAX_STEPS = 2**32 - 1
# A TFJob's replicas field is an int32; thousands of nodes is far past any cluster tfxp targets.
MAX_WORKERS = 1024
MODEL_NAMES = ("small_resnet", "resnet50", "resnet50_v1", "mobilenet_v2")
ModelName = Annotated[str, registered("model", MODEL_NAMES)]
# Keras mixed-precision policies; components/trainer/precision.py resolves `auto` and notes on the others.
Precision = Literal["auto", "float32", "mixed_float16", "mixed_bfloat16"]
# Keys that moved, and where to: refused under the old name (in YAML and `--set` alike) with the new one named.
MOVED_KEYS = {
    "learning_rate": "schedule.learning_rate",
    "base_batch_size": "schedule.base_batch_size",
    "warmup_steps": "schedule.warmup_steps",
}


class TrainerConfigError(TfxpError, ValueError):
    """The Trainer's custom_config is malformed: names the key, the value and what is expected."""


class TrainerOptions(ConfigSection):
    """The `trainer` config section.

    Attributes:
        model: Model registry name (`small_resnet`, `resnet50` (v1.5), `resnet50_v1`, `mobilenet_v2`).
        train_steps: Optimizer steps in total.
        steps_per_epoch: Steps between checkpoints/backups and metric logs.
        eval_steps: Evaluation batches after training; 0 = the whole eval split.
        batch_size: Batch size per replica; global batch = batch_size × replicas.
        optimizer: The optimizer and its weight decay (`components/trainer/recipe.py`, `OptimizerOptions`).
        schedule: The learning-rate schedule: peak per base batch, warmup, decay (`ScheduleOptions`).
        label_smoothing: Label smoothing ε of the cross-entropy (the ImageNet recipes: 0.1); 0 = none.
        images_per_epoch: Images in one pass over the train split (ImageNet: 1,281,167); converts
            `schedule.warmup_epochs` into steps with the global batch. 0 = not given.
        zero_gamma: Start each residual block's last BatchNorm γ at 0 (Goyal et al.; for large batches).
        precision: `auto`, `float32`, `mixed_float16` or `mixed_bfloat16`.
        xla: `auto`, `on` or `off` (Keras `jit_compile`).
        strategy: `auto`, `default`, `mirrored` or `multi_worker`.
        workers: Training processes (nodes) that train together; above 1, `auto` is MultiWorkerMirroredStrategy
            (NCCL collectives on GPUs, ring on CPU) and the global batch counts every replica of every worker.
            Locally they are processes on this host; on Kubeflow, the pods of a Training Operator TFJob.
        collective_timeout_seconds: With several workers, how long a collective may wait for a peer before every
            worker fails (so a lost worker restarts the job instead of blocking the others forever).
        image_size: Square input size in pixels (images are resized to it).
        channels: 1 (grayscale) or 3 (RGB).
        max_image_pixels: Largest width x height the exported model decodes: it reads each image's header
            first and refuses larger ones (INVALID_ARGUMENT) before allocating them, in TF Serving too.
        width: Width multiplier / base filters of the model.
        gpu_memory: `growth`, `default` or `limit_mb:<N>`.
        cache: Cache decoded images in memory (small data sets).
        shuffle_buffer: Shuffle buffer in examples.
        augment: Augmentations applied per batch: any of `flip`, `crop`, `scale`, `translate`. Defaults to
            `[scale]`, so the device model holds up to the resizing apps do (docs/edge.md); `[]` for none.
        crop_area: `crop`: the range of the crop's share of the image's area (Inception-style random-resized
            crop; the ImageNet recipes: 0.08–1).
        crop_aspect: `crop`: the range of the crop's width / height (the recipes: 3/4–4/3).
        scale_range: `scale`: the range of the zoom factor, the image placed at a random offset (Model Garden's
            scale jitter, `aug_scale_min`/`aug_scale_max`; its RetinaNet COCO recipe: 0.8–1.2). Makes the model
            hold up to the resizing apps do to camera frames (docs/edge.md).
        eval_crop: The central crop's share of the image's shorter side before the resize, in evaluation, the
            serving signatures and the device model alike (Model Garden: 0.875); 1 = the whole image, squashed.
        init_weights: Initial weights: a Keras weights file (`.h5`/`.weights.h5`), a TF2 checkpoint prefix or a
            SavedModel directory, local or on a bucket; the head is new when the classes differ. "" = random
            (`components/trainer/init_weights.py`).
        freeze_backbone_steps: Before the `train_steps`, train only the classification head for this many steps
            (the rest frozen, BatchNorm statistics included), as fine-tuning a pretrained backbone usually starts.
        deterministic: Deterministic input order and ops (tests); slower.
        profile_steps: Profiler step window `start,stop`; empty = off.
        seed: Random seed.
        warm_start: `none` (random initial weights) or `served` (start from the served model's weights when its
            architecture and classes match this model's; otherwise train from scratch and say why).
    """

    model: ModelName = "small_resnet"
    train_steps: int = Field(300, ge=1, le=MAX_STEPS)
    steps_per_epoch: int = Field(100, ge=1)
    eval_steps: int = Field(0, ge=0, le=MAX_STEPS)
    batch_size: int = Field(64, ge=1)
    optimizer: OptimizerOptions = OptimizerOptions()
    schedule: ScheduleOptions = ScheduleOptions()
    label_smoothing: float = Field(0.0, ge=0, lt=1)
    images_per_epoch: int = Field(0, ge=0)
    zero_gamma: bool = False
    precision: Precision = "auto"
    xla: Literal["auto", "on", "off"] = "auto"
    strategy: Literal["auto", "default", "mirrored", "multi_worker"] = "auto"
    workers: int = Field(1, ge=1, le=MAX_WORKERS)
    collective_timeout_seconds: int = Field(600, ge=1)
    image_size: int = Field(16, ge=8, le=MAX_IMAGE_SIZE)
    channels: Literal[1, 3] = 1
    max_image_pixels: int = Field(DEFAULT_MAX_IMAGE_PIXELS, ge=1)
    width: int = Field(16, ge=1)
    gpu_memory: str = Field("growth", pattern=r"^(growth|default|limit_mb:[1-9][0-9]*)$")
    cache: bool = True
    shuffle_buffer: int = Field(2048, ge=1)
    augment: tuple[Literal["flip", "crop", "scale", "translate"], ...] = ("scale",)
    crop_area: tuple[float, float] = (0.08, 1.0)
    crop_aspect: tuple[float, float] = (0.75, 4 / 3)
    scale_range: tuple[float, float] = (0.8, 1.25)
    eval_crop: float = Field(1.0, gt=0, le=1)
    init_weights: str = ""
    freeze_backbone_steps: int = Field(0, ge=0, le=MAX_STEPS)
    deterministic: bool = False
    profile_steps: str = Field("", pattern=r"^$|^[0-9]+,[0-9]+$")
    seed: int = 42
    warm_start: Literal["none", "served"] = "none"

    @model_validator(mode="before")
    @classmethod
    def _refuse_moved_keys(cls, values: Any) -> Any:
        return refuse_moved_keys(values, "trainer", MOVED_KEYS, 'docs/training.md, "The recipe"')

    @model_validator(mode="after")
    def _check_ranges(self) -> TrainerOptions:
        ranges = (("crop_area", self.crop_area), ("crop_aspect", self.crop_aspect), ("scale_range", self.scale_range))
        for key, (low, high) in ranges:
            if not 0 < low <= high or (key == "crop_area" and high > 1):
                raise ValueError(
                    f"trainer.{key} = [{low}, {high}]: expected [low, high] with 0 < low <= high"
                    + (" <= 1" if key == "crop_area" else "")
                    + ", e.g. [0.08, 1.0] for crop_area, [0.75, 1.3333] for crop_aspect, [0.8, 1.25] for scale_range"
                )
        return self

    @model_validator(mode="after")
    def _check_freeze(self) -> TrainerOptions:
        if self.freeze_backbone_steps and not self.init_weights and self.warm_start == "none":
            raise ValueError(
                f"trainer.freeze_backbone_steps={self.freeze_backbone_steps} freezes a pretrained backbone, but "
                "trainer.init_weights is empty and trainer.warm_start is none: a random backbone would stay random. "
                "Set trainer.init_weights, or drop freeze_backbone_steps"
            )
        return self

    @model_validator(mode="after")
    def _check_workers(self) -> TrainerOptions:
        if self.workers > 1 and self.strategy in ("default", "mirrored"):
            raise ValueError(
                f"trainer.strategy={self.strategy} trains on one node, but trainer.workers={self.workers}; "
                "use trainer.strategy=auto (MultiWorkerMirroredStrategy across the workers) or set trainer.workers=1"
            )
        return self

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


class RunOptions(ConfigSection):
    """Everything `run_fn` reads from `custom_config`.

    Attributes:
        trainer: The trainer section.
        labels_path: The label map file (one class name a line); its line count is the number of classes.
        label_offset: Subtracted from `image/class/label`.
        warmup_requests: PredictionLog warmup records to write into `assets.extra/`.
        serving_base: The TF Serving model base path whose newest version `trainer.warm_start: served` starts
            from; "" when warm start is off.
        tfjob: On Kubeflow with `trainer.workers` > 1, the TFJob that runs the workers; None = local processes.
    """

    trainer: TrainerOptions
    labels_path: str
    label_offset: int = Field(0, ge=0)
    warmup_requests: int = Field(4, ge=0)
    serving_base: str = ""
    tfjob: TfJobLaunch | None = None


def parse_custom_config(custom_config: Mapping[str, Any] | None) -> RunOptions:
    """Validates the Trainer's `custom_config` into `RunOptions`, with the same rules as the config file.

    Raises:
        TrainerConfigError: missing or unknown keys (the message lists the valid ones), or values of the
            wrong type or out of range.
    """
    if not custom_config:
        raise TrainerConfigError(
            "Trainer custom_config is empty; the pipeline must pass "
            '{"trainer": {...}, "labels_path": ..., "label_offset": ..., "warmup_requests": ...}'
        )
    try:
        return RunOptions.model_validate(dict(custom_config))
    except ValidationError as error:
        problems = describe_errors(error, RunOptions)
        raise TrainerConfigError("Trainer custom_config: " + "; ".join(problems)) from None
