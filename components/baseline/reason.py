"""One line saying why a model was or was not pushed, naming the served version it was compared with.

A pure function of what the run recorded: the blessing, TFMA's accuracies (the candidate's and the served
version's on the same eval split), the baseline artifact's `served_version` and the evaluator section.

Examples of what it writes:
    pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9, no served model yet
    pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9 and 0.004 below the served version 1796083574
        (0.954), within evaluator.max_accuracy_drop 0.01
    not pushed: eval accuracy 0.871 is 0.052 below the served version 1796083574 (0.923);
        evaluator.max_accuracy_drop is 0.01
    no new data, nothing pushed: version 1796083574 already holds this model (eval accuracy 0.95)
    pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9; not compared with the served version 1796083574:
        its label map has 3 classes (cat, dog, eel), this run's 10 (0, 1, 2, 3, 4, ...), so decided by
        evaluator.min_accuracy only
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ACCURACY_EPSILON = 1e-10
"""The gate's float slack: an accuracy drop within this much of `evaluator.max_accuracy_drop` counts as on it.
TFMA's change threshold gets it added (`pipeline.component_settings.eval_config`) and this module's verdict uses it,
so the two agree on a drop exactly at the limit."""


@dataclass(frozen=True)
class Baseline:
    """What the candidate was compared with.

    Attributes:
        mode: `evaluator.baseline`: `served` (the served version) or `none` (compared with nothing).
        version: The served version compared with; "" when nothing was served yet.
        accuracy: TFMA's accuracy of that version on this run's eval split; None when not computed.
        not_compared: Why that version was not compared (its label map is not the run's,
            `components.baseline.comparable`); "" when it was.
    """

    mode: Literal["served", "none"] = "served"
    version: str = ""
    accuracy: float | None = None
    not_compared: str = ""


def blessing_reason(
    blessed: bool,
    accuracy: float | None,
    baseline: Baseline,
    min_accuracy: float,
    max_accuracy_drop: float,
    failures: Sequence[str] = (),
    already_served: str | None = None,
    no_new_data: bool = False,
) -> str:
    """Why the model was pushed or not, in one line that names the served version.

    Args:
        blessed: The Evaluator's verdict.
        accuracy: The candidate's eval accuracy; None when the Evaluator produced none.
        baseline: What the candidate was compared with.
        min_accuracy: `evaluator.min_accuracy`.
        max_accuracy_drop: `evaluator.max_accuracy_drop`.
        failures: TFMA's validation failure messages, shown when the checks above do not explain a refusal.
        already_served: The version that already holds this very model (a rerun without new data); the
            line then says nothing was pushed.
        no_new_data: The model is the one an earlier run trained (the Trainer was cached) and nothing new was
            pushed: the line starts `no new data, nothing pushed` and gives the verdict's reason.

    Returns:
        `pushed: ...`, `not pushed: ...` or `no new data, nothing pushed: ...`.

    Example:
        blessing_reason(False, 0.871, Baseline("served", "1796083574", 0.923), 0.8, 0.01)
        # "not pushed: eval accuracy 0.871 is 0.052 below the served version 1796083574 (0.923);
        #  evaluator.max_accuracy_drop is 0.01"
    """
    if already_served is not None and blessed:
        detail = f" (eval accuracy {_number(accuracy)})" if accuracy is not None else ""
        return f"no new data, nothing pushed: version {already_served} already holds this model{detail}"
    head = "no new data, nothing pushed" if no_new_data else "pushed" if blessed else "not pushed"
    return _verdict(head, blessed, accuracy, baseline, min_accuracy, max_accuracy_drop, failures)


def refused_by_load_check(evaluator_reason: str | None, load_check_reason: str, no_new_data: bool = False) -> str:
    """Why a model the Evaluator blessed was not pushed: the load check refused it (`components.load_check`).

    Args:
        evaluator_reason: The Evaluator's line (`blessing_reason`), whose verdict after its head is kept.
        load_check_reason: The load check's one-line reason.
        no_new_data: The model is an earlier run's (the line starts `no new data, nothing pushed`).

    Example:
        refused_by_load_check("pushed: eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9, no served model yet",
                              "the model did not load: ...")
        # "not pushed: the load check failed: the model did not load: ...; the Evaluator had blessed it
        #  (eval accuracy 0.95 ≥ evaluator.min_accuracy 0.9, no served model yet)"
    """
    head = "no new data, nothing pushed" if no_new_data else "not pushed"
    _, _, verdict = (evaluator_reason or "").partition(": ")
    blessed = f"; the Evaluator had blessed it ({verdict})" if verdict else "; the Evaluator had blessed it"
    return f"{head}: the load check failed: {load_check_reason}{blessed}"


def _verdict(
    head: str,
    blessed: bool,
    accuracy: float | None,
    baseline: Baseline,
    min_accuracy: float,
    max_accuracy_drop: float,
    failures: Sequence[str],
) -> str:
    """`head: ` and the checks that decided, in the order a reader asks: minimum, then the served version."""
    if accuracy is None:
        return _with_failures(f"{head}: the Evaluator produced no accuracy", blessed, failures)
    meets_minimum = accuracy >= min_accuracy - ACCURACY_EPSILON
    minimum = f"eval accuracy {_number(accuracy)} {'≥' if meets_minimum else '<'} evaluator.min_accuracy {min_accuracy}"
    if baseline.mode == "none":
        return _with_failures(
            f"{head}: {minimum}; evaluator.baseline is none, so not compared with the served model", blessed, failures
        )
    if not baseline.version:
        return _with_failures(f"{head}: {minimum}, no served model yet", blessed, failures)
    served = f"the served version {baseline.version}"
    if baseline.not_compared:
        return _with_failures(
            f"{head}: {minimum}; not compared with {served}: {baseline.not_compared}, so decided by "
            "evaluator.min_accuracy only",
            blessed,
            failures,
        )
    if baseline.accuracy is None:
        return _with_failures(f"{head}: {minimum}; {served} has no accuracy on this eval split", blessed, failures)
    served += f" ({_number(baseline.accuracy)})"
    change = accuracy - baseline.accuracy
    within_drop = change >= -max_accuracy_drop - ACCURACY_EPSILON
    drop = f"evaluator.max_accuracy_drop is {max_accuracy_drop}"
    if within_drop:
        if round(change, 3) > 0:
            comparison = f"{_number(change)} above {served}"
        elif round(change, 3) == 0:
            comparison = f"equal to {served}"
        else:
            comparison = f"{_number(-change)} below {served}, within evaluator.max_accuracy_drop {max_accuracy_drop}"
        joiner = " and " if meets_minimum else ", "
        return _with_failures(f"{head}: {minimum}{joiner}{comparison}", blessed, failures, explained=not meets_minimum)
    below = f"{_number(-change)} below {served}; {drop}"
    if meets_minimum:
        return f"{head}: eval accuracy {_number(accuracy)} is {below}"
    return f"{head}: {minimum}, and {below}"


def _with_failures(text: str, blessed: bool, failures: Sequence[str], explained: bool = False) -> str:
    """`text`, plus TFMA's own messages when the model was refused for a reason `text` does not give."""
    if blessed or explained or not failures or " < evaluator.min_accuracy" in text:
        return text
    return f"{text} (TFMA: {'; '.join(failures)})"


def _number(value: float | None) -> str:
    """Three decimals at most, no trailing zeros: 0.95, 0.871, 1."""
    return "n/a" if value is None else f"{round(value, 3):g}"
