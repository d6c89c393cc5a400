"""The synset-or-text rule that matches examples to the label map: the label offset they show, and why they do not
fit it.

`data.label_offset: auto` (`foundation.data.layout.resolve_spec`) and the pipeline's validator
(`components.validation.data_checks`) both judge examples with it. Plain Python over `LabelEvidence`.

Example:
    infer_label_offset([LabelEvidence(1, synset="n01440764")], ["n01440764", "n01443537"], "x")  # 1: labels from 1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from foundation.data.errors import DataError
from foundation.data.probe import LabelEvidence


def class_named(item: LabelEvidence, index: dict[str, int]) -> str | None:
    """The label map's class an example names: its `image/class/synset` when that is a class of the map (ImageNet's
    maps are synsets), else its `image/class/text` when that is one; None when it names no class of the map.

    The one synset-or-text rule: `data.label_offset: auto` (`infer_label_offset`) and the pipeline's validator
    (`class_problems`) both match examples to the label map with it.
    """
    if item.synset in index:
        return item.synset
    return item.text if item.text in index else None


def infer_label_offset(evidence: Sequence[LabelEvidence], names: Sequence[str], where: str) -> int | None:
    """The label offset the examples show, matching their classes with the label map (`class_named`): an example
    of class `names[i]` labelled `i + 1` shows offset 1. None when no example names a class of the label map.

    Raises:
        DataError: the examples show different offsets, or a negative one (the label map does not fit the data).
    """
    index = {name: position for position, name in enumerate(names)}
    offsets: dict[int, tuple[LabelEvidence, str]] = {}
    for item in evidence:
        name = class_named(item, index)
        if name is not None:
            offsets.setdefault(item.label - index[name], (item, name))
    if not offsets:
        return None
    if len(offsets) > 1 or min(offsets) < 0:
        shown = "; ".join(f"label {item.label} is {name!r}, line {index[name] + 1}" for item, name in offsets.values())
        raise DataError(
            f"data.label_offset=auto: the first examples in {where} do not match the label map with one offset "
            f"({shown}); check data.labels, or set data.label_offset (0 for labels that start at 0, 1 for "
            "ImageNet's build scripts)"
        )
    return next(iter(offsets))


def class_problems(
    evidence: Sequence[LabelEvidence] | Mapping[LabelEvidence, int], names: Sequence[str], label_offset: int
) -> list[str]:
    """Why examples do not belong to the label map, by the synset-or-text rule (`class_named`): an example whose
    synset or text names no class of the map (a span of other classes), or whose label is not its class's line
    (minus `label_offset`). Examples with neither synset nor text cannot be judged and are not counted.
    `evidence` is one item an example, or each distinct item with its number of examples.

    Returns:
        One line a problem, with counts and up to five examples each; [] when every judged example fits.

    Example:
        class_problems([LabelEvidence(0, text="cat")], ["0", "1"], 0)
        # ["examples of classes that are not in the label map: 1 ('cat' (label 0))"]
    """
    index = {name: position for position, name in enumerate(names)}
    unknown: dict[str, int] = {}
    misplaced: dict[tuple[str, int], int] = {}
    counted = evidence.items() if isinstance(evidence, Mapping) else ((item, 1) for item in evidence)
    for item, count in counted:
        if not (item.synset or item.text):
            continue
        name = class_named(item, index)
        if name is None:
            shown_as = f"{item.synset or item.text!r} (label {item.label})"
            unknown[shown_as] = unknown.get(shown_as, 0) + count
        elif item.label - label_offset != index[name]:
            misplaced[(name, item.label)] = misplaced.get((name, item.label), 0) + count

    def shown(items: list[str]) -> str:
        return ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")

    problems = []
    if unknown:
        problems.append(
            f"examples of classes that are not in the label map: {sum(unknown.values())} ({shown(sorted(unknown))})"
        )
    if misplaced:
        cases = [
            f"{name!r} labelled {label}, but line {index[name] + 1} of the label map is label "
            f"{index[name] + label_offset}"
            for name, label in sorted(misplaced)
        ]
        problems.append(f"examples labelled otherwise than their class: {sum(misplaced.values())} ({shown(cases)})")
    return problems
