"""The digits models on emulated ARM64 cores (marker `arm`): the runtime is prepared (once, in the user cache dir)
from Debian's qemu-user-static and mmdebstrap and LiteRT's aarch64 wheels, then each model runs on the host and
on the target with XNNPACK and the outputs are compared.

Needs `sudo apt-get install -y qemu-user-static mmdebstrap`, the Debian mirror and PyPI the first time (~15 s,
~200 MB); skipped when the tools are missing (`.ci/run` installs them).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import tf_keras as keras
from edge_fixtures import shared_data, shared_model, small_cnn

from components.trainer.export import export_saved_model
from edge import arch, verify
from edge.cores import CORES
from edge.data import LabeledImages, load_split
from edge.options import EdgeOptions
from edge.quantize import convert
from foundation.preprocessing_spec import PreprocessingSpec

pytestmark = [
    pytest.mark.arm,
    pytest.mark.slow,  # an emulated ARM core: out of `make unit`
    pytest.mark.skipif(
        bool(arch.missing_tools()),
        reason=f"arm: {' and '.join(arch.missing_tools())} not installed ({arch.INSTALL_HINT})",
    ),
]
SPEC = PreprocessingSpec(image_size=16, channels=1)


@pytest.fixture(scope="module")
def runtime() -> arch.ArmRuntime:
    started = time.monotonic()
    prepared = arch.prepare_runtime(print)
    print(
        f"ARM64 runtime: {time.monotonic() - started:.1f} s here, setup {prepared.setup_seconds} s, "
        f"{prepared.disk_bytes / 2**20:.0f} MB in {prepared.root}"
    )
    return prepared


@pytest.fixture(scope="module")
def digits_models(digits_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A small CNN trained on the digits (16×16), converted to int8 (int8 I/O) and to float."""
    train = load_split(digits_dir, "train", SPEC)
    keras.utils.set_random_seed(0)
    model = small_cnn(SPEC.shape, (16, 32), 10)
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    model.fit(train.images, train.labels, epochs=15, batch_size=64, verbose=0)
    labels = (digits_dir / "labels.txt").read_text().split()
    saved_model = tmp_path_factory.mktemp("digits") / "model"
    export_saved_model(model, str(saved_model), SPEC, labels)
    calibration = load_split(digits_dir, "train", SPEC, limit=200, shuffle=True).frames
    return {"int8": convert(saved_model, "int8", calibration, io_dtype="int8"), "float": convert(saved_model, "none")}


@pytest.fixture(scope="module")
def digits_eval(digits_dir: Path) -> LabeledImages:
    return load_split(digits_dir, "eval", SPEC, limit=200, shuffle=True)


def test_the_runtime_is_prepared_once_and_then_reused(runtime: arch.ArmRuntime) -> None:
    lines: list[str] = []

    again = arch.prepare_runtime(lines.append)

    assert lines == []  # cached: no preparation message
    assert again.root == runtime.root and (runtime.rootfs / "usr/bin/python3").exists()
    assert runtime.root.name == f"arm64-{arch.runtime_key(arch.wheel_pins())}"
    assert 50 * 2**20 < runtime.disk_bytes < 400 * 2**20


@pytest.mark.parametrize("cpu", sorted(CORES))
def test_digits_int8_model_agrees_with_the_host_on_each_core(
    runtime: arch.ArmRuntime, digits_models: dict[str, bytes], digits_eval: LabeledImages, cpu: str
) -> None:
    run = verify.verify_on_arch(digits_models["int8"], digits_eval.frames, digits_eval.labels, cpu)
    result = run.comparison
    print(f"int8 {cpu}: {result}")

    assert run.target["machine"] == "aarch64" and run.host["machine"] != "aarch64"
    assert run.target["delegated_nodes"] > 0 and run.host["delegated_nodes"] > 0  # XNNPACK on both sides
    assert run.target["output"]["dtype"] == "int8"
    assert result.count == 200
    assert result.agreement >= 0.995
    assert result.max_steps is not None and result.max_steps <= 1
    assert result.host_accuracy >= 0.9
    assert abs(result.target_accuracy - result.host_accuracy) <= 0.005


@pytest.mark.parametrize("cpu", ["cortex-a53", "cortex-a76"])
def test_digits_float_model_agrees_with_the_host(
    runtime: arch.ArmRuntime, digits_models: dict[str, bytes], digits_eval: LabeledImages, cpu: str
) -> None:
    result = verify.verify_on_arch(digits_models["float"], digits_eval.frames, digits_eval.labels, cpu).comparison
    print(f"float {cpu}: {result}")

    assert result.agreement == 1.0
    assert result.max_steps is None and result.max_abs_diff < 1e-4
    assert result.target_accuracy == result.host_accuracy >= 0.9


def test_a_cpuinfo_claiming_features_the_core_lacks_is_caught_and_explained(
    runtime: arch.ArmRuntime,
    digits_models: dict[str, bytes],
    digits_eval: LabeledImages,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Cortex-A76's cpuinfo (dot product, ...) shown to an emulated Cortex-A53: XNNPACK picks kernels it cannot run.
    render = verify.render_cpuinfo
    monkeypatch.setattr(verify, "render_cpuinfo", lambda core, count: render(CORES["cortex-a76"], count))

    with pytest.raises(arch.TargetFailedError) as caught:
        verify.verify_on_arch(digits_models["int8"], digits_eval.frames[:8], digits_eval.labels[:8], "cortex-a53")

    message = str(caught.value)
    assert "the model did not run on emulated cortex-a53: killed by SIGILL" in message
    assert "the guest's /proc/cpuinfo claims asimddp, asimdhp, asimdrdm, atomics" in message


def test_the_exporter_pushes_after_the_check_passed(
    runtime: arch.ArmRuntime, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tfx.types import standard_artifacts

    from components.edge_exporter.artifacts import EdgeBlessing, EdgeModel
    from components.edge_exporter.executor import Executor
    from components.edge_exporter.summary import edge_summary

    examples, model = standard_artifacts.Examples(), standard_artifacts.Model()
    examples.uri = str(shared_data(tmp_path_factory))
    model.uri = str(tmp_path / "trainer")
    shutil.copytree(shared_model(tmp_path_factory), tmp_path / "trainer" / "Format-Serving")
    edge_model, edge_blessing = EdgeModel(), EdgeBlessing()
    edge_model.uri, edge_blessing.uri = str(tmp_path / "edge_model"), str(tmp_path / "edge_blessing")
    options = EdgeOptions(mode="int8", representative_samples=64, verify=["aarch64"], verify_cpu="cortex-a72")
    parameters = {"options": options.model_dump_json(), "push_base": str(tmp_path / "edge"), "label_offset": 0}

    Executor().Do(
        {"model": [model], "examples": [examples]},
        {"edge_model": [edge_model], "edge_blessing": [edge_blessing]},
        parameters,
    )

    check = json.loads((tmp_path / "edge_model" / "edge_metadata.json").read_text())["arch_check"]
    assert check["status"] == "passed", check["reason"]
    assert (check["arch"], check["cpu"], check["kernels"]) == ("aarch64", "cortex-a72", "xnnpack")
    assert check["top1_agreement"] >= 0.995 and check["examples"] == 120
    assert check["runtime"]["wheels"] == list(arch.wheel_pins())
    assert check["app_client"] == verify.APP_CLIENT_ON_HOST  # the record says what the ARM check leaves out
    fields = edge_summary(edge_model.uri)
    assert fields["edge"]["status"] == "pushed"
    assert fields["edge"]["arch_check"]["status"] == "passed"
    assert "aarch64 (cortex-a72): top-1 agreement 120/120" in fields["edge"]["reason"]
    assert check["host_accuracy"] == fields["metrics"]["edge_accuracy"]  # the accuracy gate's eval sample


def test_cli_verify_passes_and_says_the_app_client_check_is_host_only(
    runtime: arch.ArmRuntime, digits_models: dict[str, bytes], digits_dir: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from pipeline.cli import app

    model = tmp_path / "model.tflite"
    model.write_bytes(digits_models["float"])
    args = ["edge", "verify", str(model), "--examples", str(digits_dir), "--samples", "50", "--cpu", "cortex-a53"]
    result = CliRunner().invoke(app, args)

    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "passed: top-1 agreement 50/50" in said
    assert "runs on the host only" in said and "manylinux_2_28_aarch64" in said
