"""components.trainer.warm_start: the served weights are taken only when architecture and classes match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from components.trainer.export import export_saved_model
from components.trainer.models import ModelSpec, build_model
from components.trainer.warm_start import warm_start, warm_start_from_served
from foundation.preprocessing_spec import PreprocessingSpec

LABELS = ["cat", "dog", "fox"]
SPEC = ModelSpec(image_size=8, channels=1, num_classes=3, width=4)


@pytest.fixture(scope="module")
def served_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A serving base path whose newest version is a small_resnet with non-initial weights."""
    base = tmp_path_factory.mktemp("serving") / "digits"
    model = build_model("small_resnet", SPEC)
    model.set_weights([np.full(w.shape, 0.25, dtype=np.float32) for w in model.get_weights()])
    export_saved_model(model, str(base / "1700000000"), PreprocessingSpec(8, 1), LABELS)
    (base / "1800000000").mkdir()  # a version still being copied (no saved_model.pb): not served
    return base


def test_matching_model_starts_from_the_served_weights(served_base: Path) -> None:
    model = build_model("small_resnet", SPEC)
    result = warm_start_from_served(model, str(served_base), LABELS)
    assert result.applied, result.reason
    assert result.version == "1700000000" and result.path == f"{served_base}/1700000000"
    assert result.reason == f"started from the served version 1700000000 ({len(model.weights)} weights)"
    assert all(np.allclose(value, 0.25) for value in model.get_weights())


def test_other_width_trains_from_scratch_naming_the_weight(served_base: Path) -> None:
    model = build_model("small_resnet", ModelSpec(8, 1, 3, width=8))
    before = [value.copy() for value in model.get_weights()]
    result = warm_start(model, str(served_base / "1700000000"), LABELS)
    assert not result.applied
    assert result.reason.startswith("the served version 1700000000 has other weights (stem_conv/kernel:0 is ")
    assert "(3, 3, 1, 4) there and (3, 3, 1, 8) here" in result.reason
    assert result.reason.endswith("; trained from scratch")
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


def test_other_classes_train_from_scratch(served_base: Path) -> None:
    renamed = warm_start(build_model("small_resnet", SPEC), str(served_base / "1700000000"), ["cat", "dog", "owl"])
    assert not renamed.applied
    assert "has other classes (class 2 is 'fox' there and 'owl' here)" in renamed.reason
    more = warm_start(
        build_model("small_resnet", ModelSpec(8, 1, 4, 4)), str(served_base / "1700000000"), [*LABELS, "owl"]
    )
    assert not more.applied and "has other classes (3 there, 4 here)" in more.reason


def test_other_architecture_trains_from_scratch(served_base: Path) -> None:
    model = build_model("small_resnet", SPEC)
    model._name = "resnet50"  # the name is the registry's: another builder, another architecture
    result = warm_start(model, str(served_base / "1700000000"), LABELS)
    assert not result.applied
    assert "is a small_resnet model, this run trains resnet50" in result.reason


def test_nothing_served_or_unloadable_trains_from_scratch(served_base: Path, tmp_path: Path) -> None:
    empty = warm_start_from_served(build_model("small_resnet", SPEC), str(tmp_path / "none"), LABELS)
    assert (
        not empty.applied and empty.reason == f"nothing is served under {tmp_path / 'none'} yet; trained from scratch"
    )
    broken = tmp_path / "5"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"broken")
    result = warm_start(build_model("small_resnet", SPEC), str(broken), LABELS)
    assert not result.applied and "has no readable label map" in result.reason
    (broken / "assets").mkdir()
    (broken / "assets" / "labels.txt").write_text("\n".join(LABELS) + "\n")
    result = warm_start(build_model("small_resnet", SPEC), str(broken), LABELS)
    assert not result.applied and "cannot be loaded as a Keras model" in result.reason


def test_stray_folders_beside_the_served_version_are_not_warm_started_from(served_base: Path, tmp_path: Path) -> None:
    import shutil

    base = tmp_path / "digits"
    shutil.copytree(served_base / "1700000000", base / "1700000000")
    for stray in ("²", "٣", "99999999999999999999", "1800000000.tmp"):  # each a complete copy, none a version
        shutil.copytree(served_base / "1700000000", base / stray)
    result = warm_start_from_served(build_model("small_resnet", SPEC), str(base), LABELS)
    assert result.applied and result.version == "1700000000", result.reason
