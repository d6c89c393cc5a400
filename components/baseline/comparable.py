"""Whether a served model can be the gate's baseline: only a model with the run's label map is comparable.

TFMA compares the candidate's accuracy with the baseline's on this run's eval split; a served model trained on
other classes (a 3-class model against a 10-class candidate) predicts class ids that mean something else, so its
accuracy says nothing about the candidate. Such a baseline is not compared at all: the Evaluator then decides by
`evaluator.min_accuracy` alone, as on a first run, and the blessing reason says why.

Example:
    label_map_mismatch(["cat", "dog", "eel"], ["0", "1", "2", "3"])
    # "its label map has 3 classes (cat, dog, eel), this run's 4 (0, 1, 2, 3)"
"""

from __future__ import annotations

from collections.abc import Sequence

SHOWN = 5
"""Class names shown of each label map."""


def _names(labels: Sequence[str]) -> str:
    shown = ", ".join(repr(name) if not name.isprintable() else name for name in labels[:SHOWN])
    return shown + (", ..." if len(labels) > SHOWN else "")


def label_map_mismatch(served: Sequence[str], run: Sequence[str]) -> str | None:
    """How the served model's label map differs from the run's; None when they are the same classes in the same
    order (class id i is the same class in both)."""
    if list(served) == list(run):
        return None
    if len(served) != len(run):
        return f"its label map has {len(served)} classes ({_names(served)}), this run's {len(run)} ({_names(run)})"
    line = next(index for index, (a, b) in enumerate(zip(served, run, strict=True)) if a != b)
    return (
        f"its label map differs from this run's at line {line + 1} ({_names([served[line]])} against "
        f"{_names([run[line]])})"
    )
