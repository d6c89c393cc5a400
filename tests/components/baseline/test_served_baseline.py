"""components.baseline: the served version is found, checked and handed over as the Evaluator's baseline."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from components.baseline.driver import ServedModelDriver
from components.baseline.evaluator import BaselineEvaluatorExecutor, holds_model
from components.baseline.executor import Executor
from components.baseline.served import (
    ServedModel,
    ServedModelError,
    check_served_model,
    copy_model,
    find_served_model,
    served_fingerprint,
)
from foundation.contract import INPUT_EXAMPLES, SIGNATURE_DEFAULT, SIGNATURE_EVAL_LABELS, SIGNATURE_TF_EXAMPLE
from foundation.publish import PUSH_RECORD


def _save(directory: Path, signatures: tuple[str, ...] = (SIGNATURE_TF_EXAMPLE, SIGNATURE_EVAL_LABELS)) -> Path:
    """A tiny SavedModel with the named signatures (each maps serialized examples to their count)."""
    module = tf.Module()
    module.scale = tf.Variable(2.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_EXAMPLES)])
    def count(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"count": tf.cast(tf.size(examples), tf.float32) * module.scale}

    tf.saved_model.save(module, str(directory), signatures={name: count.get_concrete_function() for name in signatures})
    return directory


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save(tmp_path_factory.mktemp("model") / "model")


def _publish(base: Path, version: str, model: Path, identity: str = "") -> Path:
    target = base / version
    copy_model(str(model), str(target))
    if identity:
        (target / PUSH_RECORD).write_text(json.dumps({"identity": identity, "version": int(version)}))
    return target


def test_nothing_served_without_a_base_path_or_versions(tmp_path: Path) -> None:
    assert find_served_model(str(tmp_path / "missing")) is None
    (tmp_path / "serving").mkdir()
    assert find_served_model(str(tmp_path / "serving")) is None
    assert served_fingerprint(str(tmp_path / "serving")) == "none"


def test_the_newest_complete_version_is_served(tmp_path: Path, saved_model: Path) -> None:
    base = tmp_path / "serving"
    _publish(base, "100", saved_model, identity="root/Trainer/model/3/Format-Serving")
    _publish(base, "200", saved_model)
    # Not versions: a publish still in its hidden staging dir, a name that is not a number, a bucket-style
    # copy without saved_model.pb yet.
    copy_model(str(saved_model), str(base / ".staging-900-abcd1234"))
    copy_model(str(saved_model), str(base / "latest"))
    (base / "300" / "variables").mkdir(parents=True)

    assert find_served_model(str(base)) == ServedModel(version="200", path=f"{base}/200", identity="")


def test_the_push_record_names_the_identity(tmp_path: Path, saved_model: Path) -> None:
    base = tmp_path / "serving"
    _publish(base, "100", saved_model, identity="root/Trainer/model/3/Format-Serving")
    served = find_served_model(str(base))
    assert served is not None and served.identity == "root/Trainer/model/3/Format-Serving"


def test_the_fingerprint_follows_the_served_version(tmp_path: Path, saved_model: Path) -> None:
    base = tmp_path / "serving"
    _publish(base, "100", saved_model, identity="a")
    first = served_fingerprint(str(base))
    assert first.startswith("100:a:")
    assert served_fingerprint(str(base)) == first  # nothing changed: the same key
    _publish(base, "101", saved_model, identity="b")
    assert served_fingerprint(str(base)).startswith("101:b:")


def test_a_loadable_version_with_the_eval_signatures_passes(tmp_path: Path, saved_model: Path) -> None:
    served = ServedModel("100", str(_publish(tmp_path, "100", saved_model)))
    check_served_model(served)  # no error


def test_an_unreadable_version_fails_naming_it_and_the_way_out(tmp_path: Path, saved_model: Path) -> None:
    path = _publish(tmp_path, "1796083574", saved_model)
    (path / "saved_model.pb").write_bytes(b"\x00not a saved model")
    with pytest.raises(ServedModelError) as raised:
        check_served_model(ServedModel("1796083574", str(path)))
    message = str(raised.value)
    assert f"the served version 1796083574 ({path}) cannot be loaded as the Evaluator's baseline" in message
    assert f"remove or fix {path}" in message
    assert "set evaluator.baseline: none" in message


def test_a_version_without_the_eval_signatures_fails_listing_them(tmp_path: Path) -> None:
    path = _save(tmp_path / "7", signatures=(SIGNATURE_DEFAULT,))
    with pytest.raises(ServedModelError, match=r"lacks the signature\(s\) serving_tf_example, tfxp_eval_labels") as e:
        check_served_model(ServedModel("7", str(path)))
    assert "(it has: serving_default;" in str(e.value)
    assert "evaluator.baseline: none" in str(e.value)


def test_copies_are_complete_and_independent_of_the_source(tmp_path: Path, saved_model: Path) -> None:
    target = tmp_path / "artifact" / "Format-Serving"
    copy_model(str(saved_model), str(target))
    source_files = sorted(p.relative_to(saved_model) for p in saved_model.rglob("*") if p.is_file())
    assert sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file()) == source_files
    assert (target / "saved_model.pb").read_bytes() == (saved_model / "saved_model.pb").read_bytes()
    assert (target / "saved_model.pb").stat().st_ino != (saved_model / "saved_model.pb").stat().st_ino


def _run_executor(tmp_path: Path, base: Path) -> standard_artifacts.Model:
    baseline = standard_artifacts.Model()
    baseline.uri = str(tmp_path / "ServedBaseline" / "baseline_model" / "1")
    Path(baseline.uri).mkdir(parents=True)
    Executor().Do({}, {"baseline_model": [baseline]}, {"base_path": str(base), "served_fingerprint": ""})
    return baseline


def test_executor_leaves_the_artifact_empty_when_nothing_is_served(tmp_path: Path) -> None:
    baseline = _run_executor(tmp_path, tmp_path / "serving")
    assert baseline.get_string_custom_property("served_version") == ""
    assert not holds_model(baseline)


def test_executor_copies_the_served_version_where_the_evaluator_loads_it(tmp_path: Path, saved_model: Path) -> None:
    base = tmp_path / "serving"
    _publish(base, "100", saved_model, identity="old")
    _publish(base, "200", saved_model, identity="new")
    baseline = _run_executor(tmp_path, base)
    assert baseline.get_string_custom_property("served_version") == "200"
    assert baseline.get_string_custom_property("served_path") == f"{base}/200"
    assert baseline.get_string_custom_property("served_identity") == "new"
    assert holds_model(baseline)
    assert tf.saved_model.load(f"{baseline.uri}/Format-Serving").signatures.keys() >= {SIGNATURE_TF_EXAMPLE}


def test_executor_fails_before_copying_a_broken_version(tmp_path: Path, saved_model: Path) -> None:
    base = tmp_path / "serving"
    (_publish(base, "100", saved_model) / "saved_model.pb").write_bytes(b"broken")
    with pytest.raises(ServedModelError, match="the served version 100"):
        _run_executor(tmp_path, base)
    assert not (tmp_path / "ServedBaseline" / "baseline_model" / "1" / "Format-Serving").exists()


def test_driver_puts_the_fingerprint_into_the_execution_properties(tmp_path: Path, saved_model: Path) -> None:
    base = tmp_path / "serving"
    _publish(base, "100", saved_model, identity="a")

    info = SimpleNamespace(exec_properties={"base_path": str(base), "served_fingerprint": ""})
    output = ServedModelDriver(None).run(info)
    assert output.exec_properties["served_fingerprint"].string_value == served_fingerprint(str(base))
    assert not output.output_artifacts  # the launcher's output artifacts are left as they are


def test_evaluator_drops_an_empty_baseline_and_keeps_a_real_one(
    tmp_path: Path, saved_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfx.components.evaluator import executor as evaluator_executor

    seen: list[set[str]] = []
    monkeypatch.setattr(evaluator_executor.Executor, "Do", lambda self, inputs, *_: seen.append(set(inputs)))
    empty = standard_artifacts.Model()
    empty.uri = str(tmp_path / "empty")
    real = standard_artifacts.Model()
    real.uri = str(tmp_path / "real")
    copy_model(str(saved_model), f"{real.uri}/Format-Serving")
    candidate = standard_artifacts.Model()

    BaselineEvaluatorExecutor().Do({"model": [candidate], "baseline_model": [empty]}, {}, {})
    BaselineEvaluatorExecutor().Do({"model": [candidate], "baseline_model": [real]}, {}, {})
    BaselineEvaluatorExecutor().Do({"model": [candidate]}, {}, {})
    assert seen == [{"model"}, {"model", "baseline_model"}, {"model"}]
