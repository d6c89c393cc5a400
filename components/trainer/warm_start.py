"""Warm start (`trainer.warm_start: served`): the new model starts from the served model's weights.

Only when everything matches: the same architecture (Keras model name, and every weight by name and shape,
none missing and none extra) and the same classes in the same order (the served model's `assets/labels.txt`
against this run's label map). Otherwise the model keeps its random initial weights and `WarmStart.reason`
says why, so a schedule that changed the model or the classes trains from scratch instead of failing.

The image size may differ: the weights of tfxp's models do not depend on it (global pooling before the head).

Example:
    result = warm_start_from_served(model, "tfxp_output/serving/digits", labels)
    result.applied, result.reason  # (True, "started from the served version 1796083574 (47 weights)")
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import tf_keras as keras

from components.baseline.served import find_served_model
from foundation.contract import LABELS_ASSET, LabelMapError, read_label_map

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WarmStart:
    """What warm start did.

    Attributes:
        applied: Whether the model now holds the served weights.
        reason: One line: what it started from, or why it trained from scratch.
        version: The served version it looked at; "" when none.
        path: That version's directory; "" when none.
    """

    applied: bool
    reason: str
    version: str = ""
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for `training_metrics.json` and the run summary."""
        return asdict(self)


def apply_warm_start(model: keras.Model, setting: str, serving_base: str, labels: Sequence[str]) -> WarmStart:
    """`trainer.warm_start` applied to a freshly built model: `none` leaves it alone, `served` tries the served model.

    Example:
        result = apply_warm_start(model, run.trainer.warm_start, run.serving_base, labels)
    """
    if setting != "served":
        return WarmStart(False, "trainer.warm_start is none; trained from scratch")
    result = warm_start_from_served(model, serving_base, labels)
    logger.info("trainer: warm start: %s", result.reason)
    return result


def warm_start_from_served(model: keras.Model, serving_base: str, labels: Sequence[str]) -> WarmStart:
    """Warm-starts `model` from the newest complete version under `serving_base` (what TF Serving serves).

    Args:
        model: The freshly built model (call outside a distribution strategy's scope: the served model is
            loaded on the default device).
        serving_base: The TF Serving model base path, `<serving base>/<model>`.
        labels: This run's class names, index = class id.

    Returns:
        The result; `applied` is False (with the reason) when nothing is served yet or anything differs.
    """
    served = find_served_model(serving_base) if serving_base else None
    if served is None:
        return WarmStart(
            False, f"nothing is served under {serving_base or '(no serving base)'} yet; trained from scratch"
        )
    return warm_start(model, served.path, labels)


def warm_start(model: keras.Model, saved_model_dir: str, labels: Sequence[str]) -> WarmStart:
    """Sets `model`'s weights to those of the SavedModel in `saved_model_dir` when architecture and classes match.

    Args:
        model: The freshly built model.
        saved_model_dir: A SavedModel exported by tfxp's Trainer (a served version directory).
        labels: This run's class names, index = class id.

    Returns:
        The result; `model` is unchanged unless `applied`.
    """
    path = saved_model_dir.rstrip("/")
    version = path.rsplit("/", 1)[-1]

    def scratch(why: str) -> WarmStart:
        return WarmStart(False, f"the served version {version} {why}; trained from scratch", version, path)

    try:
        served_labels = read_label_map(f"{path}/{LABELS_ASSET}", missing_hint="it was not exported by tfxp")
    except LabelMapError as error:
        return scratch(f"has no readable label map ({error})")
    if list(served_labels) != list(labels):
        return scratch(f"has other classes ({_label_difference(served_labels, labels)})")
    try:
        served = keras.models.load_model(path, compile=False)
    except Exception as error:  # any load failure: not a Keras SavedModel, corrupt variables, unknown layers
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return scratch(f"cannot be loaded as a Keras model ({type(error).__name__}: {first_line})")
    if served.name != model.name:
        return scratch(f"is a {served.name} model, this run trains {model.name}")
    mismatch = _weight_mismatch(served, model)
    if mismatch:
        return scratch(f"has other weights ({mismatch})")
    values = {weight.name: weight.numpy() for weight in served.weights}
    model.set_weights([values[weight.name] for weight in model.weights])
    return WarmStart(True, f"started from the served version {version} ({len(values)} weights)", version, path)


def _weight_mismatch(served: keras.Model, model: keras.Model) -> str:
    """An empty string when both have the same weight names and shapes; else the first differences."""
    served_shapes = {weight.name: tuple(weight.shape) for weight in served.weights}
    shapes = {weight.name: tuple(weight.shape) for weight in model.weights}
    problems = [
        f"{name} is {served_shapes[name]} there and {shape} here"
        for name, shape in shapes.items()
        if name in served_shapes and served_shapes[name] != shape
    ]
    missing = sorted(set(shapes) - set(served_shapes))
    extra = sorted(set(served_shapes) - set(shapes))
    if missing:
        problems.append(f"{len(missing)} weight(s) it lacks, e.g. {missing[0]}")
    if extra:
        problems.append(f"{len(extra)} weight(s) this model lacks, e.g. {extra[0]}")
    if len(problems) > 3:
        problems = [*problems[:3], f"{len(problems) - 3} more"]
    return "; ".join(problems)


def _label_difference(served: Sequence[str], labels: Sequence[str]) -> str:
    if len(served) != len(labels):
        return f"{len(served)} there, {len(labels)} here"
    index = next(i for i, (a, b) in enumerate(zip(served, labels, strict=True)) if a != b)
    return f"class {index} is {served[index]!r} there and {labels[index]!r} here"
