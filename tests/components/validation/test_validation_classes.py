"""The validator refuses examples of other classes than the label map (a span of cats in a digits stream), by
the synset-or-text rule `data.label_offset: auto` uses; so `tfxp run` and Kubeflow refuse what `tfxp data` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from layout_fixtures import example_bytes, write_records
from tensorflow_metadata.proto.v0 import statistics_pb2
from validator_fixtures import validator_artifacts

from components.validation.data_checks import names_classes, read_class_evidence
from components.validation.strict_example_validator import DataValidationError, StrictExampleValidatorExecutor
from foundation.data.class_match import class_problems
from foundation.data.probe import LabelEvidence

DIGITS = [str(digit) for digit in range(10)]
SYNSETS = ["n01440764", "n01443537", "n01484850"]


def test_examples_of_classes_outside_the_label_map_are_problems() -> None:
    cats = [LabelEvidence(0, text="cat"), LabelEvidence(1, text="dog"), LabelEvidence(1, text="dog")]
    assert class_problems(cats, DIGITS, 0) == [
        "examples of classes that are not in the label map: 3 ('cat' (label 0), 'dog' (label 1))"
    ]
    # ImageNet: the synset names the class, the text is a description that is not a class name.
    imagenet = [LabelEvidence(1, "n01440764", "tench, Tinca tinca"), LabelEvidence(3, "n01484850", "shark")]
    assert class_problems(imagenet, SYNSETS, 1) == []
    assert class_problems([LabelEvidence(1, "n09999999", "tench, Tinca tinca")], SYNSETS, 1) == [
        "examples of classes that are not in the label map: 1 ('n09999999' (label 1))"
    ]
    # A label that is not its class's line (a span whose label map was in another order, or another offset).
    (problem,) = class_problems([LabelEvidence(2, text="3")], DIGITS, 0)
    assert problem == (
        "examples labelled otherwise than their class: 1 ('3' labelled 2, but line 4 of the label map is label 3)"
    )
    assert class_problems([LabelEvidence(4, text="3")], DIGITS, 1) == []
    # Examples that name no class at all cannot be judged (the schema checks their labels' range).
    assert class_problems([LabelEvidence(7), LabelEvidence(0)], DIGITS, 0) == []


def test_every_example_of_the_split_is_read(tmp_path: Path) -> None:
    records = [example_bytes(b"png", label % 2, DIGITS[label % 2]) for label in range(2000)]
    records.append(example_bytes(b"png", 0, "cat"))  # one stray example at the very end
    records.append(example_bytes(b"png", 5, synset="n01440764"))
    write_records(tmp_path / "Split-train" / "data.gz", records)
    evidence = read_class_evidence(str(tmp_path / "Split-train" / "*"))
    assert evidence == {
        LabelEvidence(0, "", "0"): 1000, LabelEvidence(1, "", "1"): 1000, LabelEvidence(0, "", "cat"): 1,
        LabelEvidence(5, "n01440764", ""): 1,
    }  # fmt: skip
    assert class_problems(evidence, DIGITS, 0) == [
        "examples of classes that are not in the label map: 2 ('cat' (label 0), 'n01440764' (label 5))"
    ]


def _split_statistics(inputs: dict, split: str) -> statistics_pb2.DatasetFeatureStatistics:  # type: ignore[type-arg]
    from tfx.components.statistics_gen import stats_artifact_utils

    return stats_artifact_utils.load_statistics(inputs["statistics"][0], split).proto().datasets[0]


def test_the_validator_refuses_a_span_of_other_classes(tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"{digit}\n" for digit in DIGITS))
    digits = [example_bytes(b"\x89PNG\r\n\x1a\n", label, DIGITS[label]) for label in range(10)] * 3
    # What a span of cats and dogs beside the digits spans looks like once ImportExampleGen has read them all.
    pets = [example_bytes(b"\x89PNG\r\n\x1a\n", label, name) for label, name in ((0, "cat"), (1, "dog"))] * 3
    properties = {"exclude_splits": "[]", "labels_path": str(labels), "label_offset": 0}
    inputs, outputs = validator_artifacts(tmp_path / "clean", {"train": digits, "eval": digits})
    StrictExampleValidatorExecutor().Do(inputs, outputs, properties)  # digits only: no problem
    inputs, outputs = validator_artifacts(tmp_path / "mixed", {"train": digits + pets, "eval": digits})
    with pytest.raises(DataValidationError) as error:
        StrictExampleValidatorExecutor().Do(inputs, outputs, properties)
    message = str(error.value)
    assert "split 'train': examples of classes that are not in the label map: 6 ('cat' (label 0)," in message
    assert "point data.labels at their label map" in message and "split 'eval'" not in message
    # Examples that name no class are not read for it; without a label map the classes are not checked (the
    # component's parameter is optional).
    unnamed = [example_bytes(b"\x89PNG\r\n\x1a\n", label) for label in range(10)] * 3
    inputs, outputs = validator_artifacts(tmp_path / "unnamed", {"train": unnamed, "eval": unnamed})
    assert not names_classes(_split_statistics(inputs, "train"))
    assert names_classes(_split_statistics(validator_artifacts(tmp_path / "named", {"train": digits})[0], "train"))
    StrictExampleValidatorExecutor().Do(inputs, outputs, properties)
    inputs, outputs = validator_artifacts(tmp_path / "unchecked", {"train": digits + pets, "eval": digits})
    StrictExampleValidatorExecutor().Do(inputs, outputs, {"exclude_splits": "[]"})
