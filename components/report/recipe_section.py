"""The Training section's recipe and diagnosis: how the Trainer trained, and whether it says the model is broken.

Both come from `training_metrics.json` (`components/trainer/training.py`, `collect_metrics`): `recipe` holds the
optimizer, the schedule with its curve (step → rate, about 200 points), the loss and the crops as they ran;
`diagnosis` the Trainer's own check of the trained model (`components.report.diagnosis` words it). A file from a
Trainer before either was recorded has neither: the section says the recipe is not recorded and shows no alert.

Example:
    blocks = [*diagnosis_blocks(training), ..., *recipe_blocks(training)]
"""

from __future__ import annotations

import math
from typing import Any

from components.report import diagnosis, plots, text
from components.report.page import Alert, Block, Facts, Figure, Missing, Paragraph

NOT_RECORDED = (
    "The recipe is not recorded: this run's training_metrics.json is from a Trainer that did not yet write its "
    "optimizer, schedule and crops there."
)


def diagnosis_blocks(training: dict[str, Any]) -> list[Block]:
    """The alert when the Trainer's diagnosis says the model is broken; nothing otherwise."""
    broken = diagnosis.broken_diagnosis(training)
    if broken is None:
        return []
    return [Alert(*diagnosis.page_text(broken))]


def recipe_blocks(training: dict[str, Any]) -> list[Block]:
    """The recipe's one-line description, its facts and the learning-rate schedule as a plot."""
    recipe = training.get("recipe")
    if not isinstance(recipe, dict) or not recipe:
        return [Missing(NOT_RECORDED)]
    blocks: list[Block] = []
    if recipe.get("description"):
        blocks.append(Paragraph(f"Recipe: {recipe['description']}."))
    curve = _curve(recipe.get("curve"))
    blocks.append(Facts(recipe_facts(recipe, curve)))
    if len(curve) >= 2:
        blocks.append(_schedule_figure(recipe, curve))
    else:
        blocks.append(Missing("No learning-rate plot: the recipe records no schedule curve."))
    return blocks


def _curve(value: Any) -> list[tuple[float, float]]:
    """The recorded curve as (step, rate), in step order; points that are not two finite numbers left out."""
    points = []
    for point in value if isinstance(value, list) else []:
        if isinstance(point, list | tuple) and len(point) == 2 and all(_finite(number) for number in point):
            points.append((float(point[0]), float(point[1])))
    return sorted(points)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _rate(value: Any) -> str:
    """A learning rate or a decay: four significant digits (2.048, 3.05e-05); `—` when not known."""
    return f"{value:.4g}" if _finite(value) else text.NOT_KNOWN


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def recipe_facts(recipe: dict[str, Any], curve: list[tuple[float, float]]) -> tuple[tuple[str, str], ...]:
    """Label → value: model, optimizer, weight decay, schedule, peak, warmup, end rate, loss, crops."""
    optimizer, schedule = _dict(recipe.get("optimizer")), _dict(recipe.get("schedule"))
    model = str(recipe.get("model") or text.NOT_KNOWN)
    if recipe.get("zero_gamma"):
        model += " (each residual block's last BatchNorm γ starts at 0)"
    augment = [str(name) for name in recipe.get("augment") or []]
    smoothing = recipe.get("label_smoothing")
    return (
        ("model", model),
        ("optimizer", _optimizer(optimizer, recipe.get("optimizer_class"))),
        ("weight decay", _weight_decay(optimizer, recipe.get("decayed_in_loss"))),
        ("schedule", _schedule(schedule)),
        ("peak learning rate", _peak(recipe, schedule)),
        ("warmup", _warmup(recipe)),
        ("end learning rate", f"{_rate(curve[-1][1])} at step {curve[-1][0]:,.0f}" if curve else text.NOT_KNOWN),
        ("label smoothing", _rate(smoothing) if smoothing else "none"),
        ("augmentation", ", ".join(augment) or "none"),
        ("training crop", _training_crop(recipe, augment)),
        ("eval crop", _eval_crop(recipe.get("eval_crop"))),
    )


def _optimizer(optimizer: dict[str, Any], class_name: Any) -> str:
    name = str(optimizer.get("name") or text.NOT_KNOWN)
    words = [name + (f" ({class_name})" if class_name else "")]
    if name in ("sgd", "lars"):
        words.append(f"momentum {_rate(optimizer.get('momentum'))}")
        if optimizer.get("nesterov"):
            words.append("Nesterov")
    if name == "lars":
        words.append(f"trust coefficient η {_rate(optimizer.get('lars_eta'))}")
    if name in ("adam", "adamw"):
        words += [f"{key} {_rate(optimizer.get(field))}" for key, field in (("β₁", "beta_1"), ("β₂", "beta_2"))]
        words.append(f"ε {_rate(optimizer.get('epsilon'))}")
    return ", ".join(words)


def _weight_decay(optimizer: dict[str, Any], decayed_in_loss: Any) -> str:
    decay = optimizer.get("weight_decay")
    if not decay:
        return "none" if decay is not None else text.NOT_KNOWN
    excluded = [str(kind).replace("_", " ") for kind in optimizer.get("decay_exclude") or []]
    words = [f"λ {_rate(decay)}", f"not on {', '.join(excluded)}" if excluded else "on every variable"]
    if isinstance(decayed_in_loss, int) and decayed_in_loss > 0:
        words.append(f"added to the loss for {decayed_in_loss:,} variables")
    elif decayed_in_loss == 0:
        words.append("applied in the optimizer's update")
    return ", ".join(words)


def _schedule(schedule: dict[str, Any]) -> str:
    """The decay after the warmup, by name, with what shapes it."""
    name = schedule.get("name")
    if name == "cosine":
        return "cosine, from the peak to 0 at the last step"
    if name == "stepwise":
        steps = zip(schedule.get("boundaries") or [], schedule.get("factors") or [], strict=False)
        return "stepwise: " + ", ".join(f"× {_rate(f)} from {b:.0%} of the run" for b, f in steps if _finite(b))
    if name == "polynomial":
        return (
            f"polynomial (power {_rate(schedule.get('power'))}), from the peak to "
            f"{_rate(schedule.get('end_learning_rate'))} at the last step"
        )
    if name == "constant":
        return "constant at the peak"
    return str(name or text.NOT_KNOWN)


def _peak(recipe: dict[str, Any], schedule: dict[str, Any]) -> str:
    peak = _rate(recipe.get("peak_learning_rate"))
    rate, base = schedule.get("learning_rate"), schedule.get("base_batch_size")
    if not (_finite(rate) and _finite(base)):
        return peak
    return f"{peak} (trainer.schedule.learning_rate {_rate(rate)} per {base:,} images, scaled to the global batch)"


def _warmup(recipe: dict[str, Any]) -> str:
    warmup, steps = recipe.get("warmup_steps"), recipe.get("train_steps")
    if not _finite(warmup):
        return text.NOT_KNOWN
    if not warmup:
        return "none"
    if not _finite(steps) or not steps:
        return f"{warmup:,.0f} steps, linear to the peak"
    return f"{warmup:,.0f} of {steps:,.0f} steps ({warmup / steps:.0%} of the run), linear to the peak"


def _range(value: Any, percent: bool) -> str | None:
    if not (isinstance(value, list) and len(value) == 2 and all(_finite(number) for number in value)):
        return None
    low, high = value
    return f"{low:.0%}–{high:.0%}" if percent else f"{low:.3g}–{high:.3g}"


def _training_crop(recipe: dict[str, Any], augment: list[str]) -> str:
    if "crop" not in augment:
        return "none (trainer.augment has no crop)"
    area, aspect = _range(recipe.get("crop_area"), True), _range(recipe.get("crop_aspect"), False)
    return f"random, {area or text.NOT_KNOWN} of the image's area, aspect (width / height) {aspect or text.NOT_KNOWN}"


def _eval_crop(value: Any) -> str:
    if not _finite(value):
        return text.NOT_KNOWN
    if value >= 1:
        return "none: the whole image, resized"
    return f"central, {value:.1%} of the shorter side, then resized"


def _schedule_figure(recipe: dict[str, Any], curve: list[tuple[float, float]]) -> Figure:
    """Rate per optimizer step, with a dotted line where the warmup ends."""
    warmup: Any = recipe.get("warmup_steps")
    marks = {f"warmup ends (step {warmup:,.0f})": float(warmup)} if _finite(warmup) and warmup > 0 else {}
    top_step, top = max(curve, key=lambda point: point[1])
    desc = (
        f"Learning rate at {len(curve)} optimizer steps from {curve[0][0]:,.0f} to {curve[-1][0]:,.0f}: it starts "
        f"at {_rate(curve[0][1])}, peaks at {_rate(top)} at step {top_step:,.0f} and ends at {_rate(curve[-1][1])}"
    )
    if marks:
        desc += f"; the warmup ends at step {warmup:,.0f}"
    schedule = _dict(recipe.get("schedule")).get("name") or "learning-rate"
    svg = plots.line_plot(
        "schedule",
        f"Learning rate per step ({schedule} schedule)",
        desc + ".",
        "optimizer step",
        "learning rate",
        {"learning rate": [list(point) for point in curve]},
        marks,
    )
    return Figure(svg, "The learning rate the optimizer used at each step, as the Trainer's schedule computes it.")
