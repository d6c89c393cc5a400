"""The Trainer's model phases, after the runtime set-up: build the inputs, build and compile, fit, evaluate.

Like Model Garden's `Task` (`build_inputs`, `build_model`, `train_step`), each phase is a plain function of
the options and the `TrainingRuntime`, so tests run one phase without the others. `training.py` calls them in
order and adds the file-facing phases (export, metrics).

Example:
    runtime = set_up_runtime(run.trainer)
    compiled = build_and_compile(run.trainer, runtime, num_classes=10)
    fitted = fit(compiled, build_inputs(run, train_files, runtime, training=True), run.trainer, runtime, log_dir)
    evaluation = evaluate(compiled, run, eval_files, runtime)
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf
import tf_keras as keras

from components.trainer.callbacks import ProfilerWindow, StopAtStep, ThroughputCallback
from components.trainer.eval_metrics import TopPredictedShare
from components.trainer.input_pipeline import InputOptions, make_dataset
from components.trainer.models import ModelSpec, build_model
from components.trainer.optimization import Recipe, add_weight_decay, build_recipe
from components.trainer.options import RunOptions, TrainerOptions
from components.trainer.recipe import check_recipe
from components.trainer.runtime import TrainingRuntime
from foundation.errors import TfxpError

logger = logging.getLogger(__name__)


def build_inputs(
    run: RunOptions, file_patterns: Sequence[str], runtime: TrainingRuntime, training: bool
) -> tf.data.Dataset:
    """The train or eval split as a dataset of global batches.

    Args:
        run: The Trainer's options (`trainer` input settings and `label_offset`).
        file_patterns: The split's gzip TFRecord patterns.
        runtime: Gives the global batch and, for training, this worker's shard.
        training: Shuffle, repeat, augment and shard over workers; the eval split is read whole, once.
    """
    trainer = run.trainer
    workers, index = (runtime.workers, runtime.worker_index) if training else (1, 0)
    options = InputOptions(
        image_size=trainer.image_size,
        channels=trainer.channels,
        batch_size=runtime.global_batch,
        training=training,
        label_offset=run.label_offset,
        cache=trainer.cache,
        shuffle_buffer=trainer.shuffle_buffer,
        augment=trainer.augment,
        crop_area=trainer.crop_area,
        crop_aspect=trainer.crop_aspect,
        scale_range=trainer.scale_range,
        central_crop=trainer.eval_crop,
        deterministic=trainer.deterministic,
        seed=trainer.seed,
        num_workers=workers,
        worker_index=index,
    )
    return make_dataset(file_patterns, options)


@dataclass(frozen=True)
class CompiledModel:
    """The model ready to fit, and what rebuilding it takes.

    Attributes:
        model: Built and compiled in the strategy's scope, under the runtime's precision policy.
        name: Its registry name (`trainer.model`).
        spec: Input size, channels, classes and width.
        recipe: The optimizer, schedule and loss it was compiled with.
        decayed_variables: Variables whose weight decay is in the loss (coupled L2; 0 for LARS and AdamW).
    """

    model: keras.Model
    name: str
    spec: ModelSpec
    recipe: Recipe
    decayed_variables: int = 0

    @property
    def peak_learning_rate(self) -> float:
        """The schedule's peak, scaled with the global batch."""
        return self.recipe.peak_learning_rate

    @property
    def loss_scaling(self) -> bool:
        """Whether Keras wrapped the optimizer for float16 loss scaling."""
        return isinstance(self.model.optimizer, keras.mixed_precision.LossScaleOptimizer)


def build_and_compile(trainer: TrainerOptions, runtime: TrainingRuntime, num_classes: int) -> CompiledModel:
    """Builds `trainer.model` for `num_classes` classes and compiles it with the configured recipe.

    The optimizer, schedule, weight decay and label smoothing are `trainer.optimizer`, `trainer.schedule` and
    `trainer.label_smoothing` (`optimization.build_recipe`); the peak learning rate follows the linear scaling
    rule from `trainer.schedule.base_batch_size` to the runtime's global batch.

    Raises:
        RecipeError: the recipe is known not to train at the runtime's global batch (`recipe.recipe_problems`).
        ValueError: an unknown model name.
    """
    check_recipe(trainer, runtime.global_batch)
    spec = ModelSpec(trainer.image_size, trainer.channels, num_classes, trainer.width, trainer.zero_gamma)
    with runtime.strategy.scope():
        model = build_model(trainer.model, spec)
        recipe = build_recipe(trainer, runtime.global_batch, num_classes)
        decayed = add_weight_decay(model, trainer.optimizer)
        _compile(model, recipe.optimizer, recipe.loss, runtime)
    return CompiledModel(model, trainer.model, spec, recipe, decayed)


HEAD_LAYERS = ("logits", "probabilities")


def train_head_first(
    compiled: CompiledModel, train_data: tf.data.Dataset, trainer: TrainerOptions, runtime: TrainingRuntime
) -> int:
    """`trainer.freeze_backbone_steps`: trains only the classification head for that many steps, before `fit`.

    Every other layer is made non-trainable (in tf_keras a frozen BatchNormalization also keeps its statistics), the
    model is compiled with a head-only copy of the recipe (its own warmup and decay over these steps), trained, then
    unfrozen and compiled again with the run's own optimizer, so `fit` trains everything for `train_steps` steps
    from the head this left. The usual fine-tuning order: a new head first, so its random gradients do not wreck
    pretrained features.

    Returns:
        The steps it trained (0 when `freeze_backbone_steps` is 0).
    """
    steps = trainer.freeze_backbone_steps
    if not steps:
        return 0
    model = compiled.model
    frozen = [layer for layer in model.layers if layer.name not in HEAD_LAYERS and layer.trainable]
    head_only = trainer.model_copy(update={"train_steps": steps})
    with runtime.strategy.scope():
        for layer in frozen:
            layer.trainable = False
        recipe = build_recipe(head_only, runtime.global_batch, compiled.spec.num_classes)
        _compile(model, recipe.optimizer, recipe.loss, runtime)
    model.fit(train_data, epochs=1, steps_per_epoch=steps, verbose=2)
    with runtime.strategy.scope():
        for layer in frozen:
            layer.trainable = True
        _compile(model, compiled.recipe.optimizer, compiled.recipe.loss, runtime)
    logger.info("trainer: trained the head alone for %d steps (trainer.freeze_backbone_steps), then everything", steps)
    return steps


def _compile(model: keras.Model, optimizer: Any, loss: keras.losses.Loss, runtime: TrainingRuntime) -> None:
    model.compile(
        optimizer=optimizer,
        loss=loss,
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=runtime.jit_compile,
    )


@dataclass(frozen=True)
class FitResult:
    """What training leaves to report.

    Attributes:
        history: Keras's per-epoch logs (`History.history`), e.g. `{"loss": [...], "accuracy": [...]}`.
        throughput: `ThroughputCallback.summary()`: images/s, step-time percentiles, steps, fit seconds.
        start_epoch: The first epoch this process ran; above 0 when it resumed from a backup.
    """

    history: dict[str, list[float]]
    throughput: dict[str, float | int]
    start_epoch: int | None


def fit(
    compiled: CompiledModel,
    train_data: tf.data.Dataset,
    trainer: TrainerOptions,
    runtime: TrainingRuntime,
    log_dir: str,
    backup_dir: str | None = None,
    extra_callbacks: Sequence[keras.callbacks.Callback] = (),
) -> FitResult:
    """Trains for exactly `trainer.train_steps` steps, resuming from `backup_dir` when a killed run left one.

    Args:
        compiled: The model to train.
        train_data: The repeated train split (`build_inputs(..., training=True)`).
        trainer: Steps, epochs and the profiler window.
        runtime: The global batch (for images/s) and whether this task is the chief.
        log_dir: TensorBoard scalars and profiler traces.
        backup_dir: BackupAndRestore checkpoints, one per epoch; the chief removes them when training ends.
            None = no backup.
        extra_callbacks: Further callbacks, after the Trainer's own (tests and benchmarks).
    """
    throughput = ThroughputCallback(runtime.global_batch)
    callbacks: list[keras.callbacks.Callback] = [throughput, StopAtStep(trainer.train_steps)]
    callbacks += _tensorboard(log_dir)
    if trainer.profile_window:
        callbacks.append(ProfilerWindow(log_dir, *trainer.profile_window))
    callbacks += extra_callbacks
    alone = runtime.workers == 1
    if backup_dir:
        # First, so the model is restored before any other callback sees it. With several workers the chief's
        # BackupAndRestore would delete the backup directory when it ends training while a slower worker still
        # writes its last backup into it (seen here: NotFoundError on workertemp_1/checkpoint.tmp…), so the
        # chief removes it only once every worker has passed the barrier below.
        callbacks.insert(0, keras.callbacks.BackupAndRestore(backup_dir, delete_checkpoint=alone))
    history = compiled.model.fit(
        train_data, epochs=trainer.epochs, steps_per_epoch=trainer.epoch_steps, callbacks=callbacks, verbose=2
    )
    if not alone:
        wait_for_every_worker(runtime.strategy)
    if backup_dir and runtime.chief:
        _remove_backup(backup_dir)
    return FitResult(dict(history.history), throughput.summary(), throughput.start_epoch)


class EmptyEvalSplitError(TfxpError, ValueError):
    """The eval split holds no records."""


@dataclass(frozen=True)
class Evaluation:
    """The served model and its eval-split result.

    Attributes:
        model: The float32 copy of the trained model: what was evaluated and what gets exported.
        loss: Sparse categorical cross-entropy on the eval split.
        accuracy: Top-1 accuracy on the eval split.
        top_predicted_share: The share of eval images given the most often predicted class (`diagnosis`).
    """

    model: keras.Model
    loss: float
    accuracy: float
    top_predicted_share: float | None = None


def evaluate(
    compiled: CompiledModel, run: RunOptions, file_patterns: Sequence[str], runtime: TrainingRuntime
) -> Evaluation:
    """Evaluates the float32 copy of the trained model on one device.

    The accuracy reported is then the served model's, and no replica gets an empty final eval batch (which
    breaks Conv2D under MirroredStrategy).

    Args:
        compiled: The trained model.
        run: The Trainer's options (`trainer.eval_steps`: 0 = the whole split).
        file_patterns: The eval split.
        runtime: Gives the batch size.

    Raises:
        EmptyEvalSplitError: the eval split gave no batch (the ExampleValidator stops empty splits first; this
            is the second line, for a Trainer run outside the pipeline).
    """
    served = float32_copy(compiled)
    served.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            TopPredictedShare(compiled.spec.num_classes),
        ],
    )
    eval_data = build_inputs(run, file_patterns, runtime, training=False)
    result = served.evaluate(eval_data, steps=run.trainer.eval_steps or None, return_dict=True, verbose=0)
    if "loss" not in result:  # Keras returns {} when the data yields no batch
        raise EmptyEvalSplitError(
            f"the eval split has no records ({', '.join(file_patterns) or 'no files'}), so the trained model "
            "cannot be evaluated; `tfxp data inspect DIR` counts the records per split: write the eval split again"
        )
    return Evaluation(served, float(result["loss"]), float(result["accuracy"]), float(result["top_predicted_share"]))


def float32_copy(compiled: CompiledModel) -> keras.Model:
    """The trained model rebuilt in float32 with the same weights.

    Mixed-precision variables are float32 already, so this loses nothing; the exported graph then has no
    float16/bfloat16 ops, which CPU serving and TFLite conversion handle poorly.
    """
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        copy = build_model(compiled.name, compiled.spec)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    copy.set_weights(compiled.model.get_weights())
    return copy


def wait_for_every_worker(strategy: tf.distribute.Strategy) -> None:
    """Returns once every worker of the cluster got here: a one-number all-reduce across them."""
    strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)


def _remove_backup(backup_dir: str) -> None:
    # BackupAndRestore deletes its checkpoint files but leaves the directory: a finished run leaves none.
    try:
        if tf.io.gfile.exists(backup_dir):
            tf.io.gfile.rmtree(backup_dir)
    except tf.errors.NotFoundError:
        pass  # a worker removed its own temp backup at the same moment


def _tensorboard(log_dir: str) -> list[keras.callbacks.Callback]:
    # TensorFlow 2.21 no longer depends on the tensorboard package, without which summaries cannot be written.
    if importlib.util.find_spec("tensorboard") is None:
        logger.warning("trainer: the tensorboard package is not installed, so no TensorBoard scalars are written")
        return []
    # profile_batch=0: ProfilerWindow profiles, also without the tensorboard package.
    return [keras.callbacks.TensorBoard(log_dir=log_dir, write_graph=False, profile_batch=0)]
