"""edge.verify and edge.arch without an emulator: the cores and their cpuinfo, the SME refusal, the comparison,
the verdict, and a check that cannot run (reported as not run, never as passed). The emulated runs themselves
are in test_edge_arch_emulated.py (marker `arm`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edge_fixtures import shared_data, shared_model
from pydantic import ValidationError
from typer.testing import CliRunner

from edge import arch, arm_guest
from edge.arch_gate import ArchCheck, apply_check, check_arch
from edge.cores import (
    CORES,
    HWCAP2_SME,
    KERNELS,
    check_cpu,
    cpuinfo_problems,
    hwcap_features,
    parse_cpuinfo,
    render_cpuinfo,
)
from edge.errors import EdgeError
from edge.export import EdgeExport
from edge.gate import GateResult
from edge.options import EdgeOptions
from edge.verify import Comparison, compare, judge
from pipeline.cli import app

# AT_HWCAP that QEMU 7.2 (Debian bookworm's qemu-user-static) gives each model; HWCAP2 is 0 for all four.
QEMU_HWCAP = {"cortex-a53": 0x8FB, "cortex-a72": 0x8FB, "cortex-a76": 0x119FFB, "neoverse-n1": 0x119FFB}
QEMU_MAX = (0xECFFFFFB, 0x7F877FFF)  # `-cpu max`: SME among its HWCAP2 bits
X86_CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse sse2 avx2\n\n"


@pytest.mark.parametrize("name", sorted(CORES))
def test_each_core_claims_exactly_the_features_qemu_gives_it(name: str) -> None:
    core = CORES[name]
    cpuinfo = render_cpuinfo(core, processors=3)
    blocks = parse_cpuinfo(cpuinfo)

    assert set(core.features) == hwcap_features(QEMU_HWCAP[name], 0)
    assert [block["processor"] for block in blocks] == ["0", "1", "2"]
    assert int(blocks[0]["CPU implementer"], 16) == 0x41
    assert int(blocks[0]["CPU part"], 16) == core.part
    assert (int(blocks[0]["CPU variant"], 16), int(blocks[0]["CPU revision"])) == (core.variant, core.revision)
    assert cpuinfo_problems(cpuinfo, core, QEMU_HWCAP[name], 0) == []


def test_hwcap_features_reads_bits_of_both_words() -> None:
    assert hwcap_features(0b11, 0) == {"fp", "asimd"}
    assert hwcap_features(0, HWCAP2_SME) == {"sme"}
    assert {"sme", "sve2", "i8mm", "sve"} <= hwcap_features(*QEMU_MAX)


def test_cpuinfo_problems_name_what_would_crash_or_mislead() -> None:
    a53, a76 = CORES["cortex-a53"], CORES["cortex-a76"]

    assert cpuinfo_problems(X86_CPUINFO, a76, QEMU_HWCAP["cortex-a76"], 0) == [
        "the guest's /proc/cpuinfo is not an ARM one (no `CPU implementer`; LiteRT crashes on it)"
    ]
    wrong_core = cpuinfo_problems(render_cpuinfo(a76, 1), a53, QEMU_HWCAP["cortex-a53"], 0)
    assert wrong_core[0] == "the guest's /proc/cpuinfo names implementer 0x41 part 0xd0b, not cortex-a53"
    assert wrong_core[1].startswith("the guest's /proc/cpuinfo claims asimddp, asimdhp, asimdrdm, atomics,")
    assert wrong_core[1].endswith("which cortex-a53 lacks")
    with_sme = cpuinfo_problems(render_cpuinfo(a76, 1), a76, QEMU_HWCAP["cortex-a76"], HWCAP2_SME)
    assert len(with_sme) == 1 and "advertises the SME matrix extension" in with_sme[0]


@pytest.mark.parametrize("cpu", ["max", "MAX", "max,sme=on", "max,sve=off"])
def test_a_max_cpu_with_sme_is_refused_with_the_reason(cpu: str) -> None:
    with pytest.raises(EdgeError, match=r"advertises the SME matrix extension.*wrong results.*up to 255 quantization"):
        check_cpu(cpu)


@pytest.mark.parametrize(
    ("cpu", "message"),
    [
        ("max,sme=off", r"`max,sme=off` is QEMU's .* no device.*Name the core you target: cortex-a53"),
        ("cortex-a76,sve=on", r"properties after the model name are not supported"),
        ("cortex-a55", r"unknown ARM core `cortex-a55`; supported .*cortex-a72, cortex-a76, neoverse"),
    ],
)
def test_max_without_sme_other_properties_and_unknown_cores_are_refused_too(cpu: str, message: str) -> None:
    with pytest.raises(EdgeError, match=message):
        check_cpu(cpu)


def test_core_names_ignore_case_and_surrounding_spaces() -> None:
    assert check_cpu(" Neoverse-N1 ") is CORES["neoverse-n1"]


def test_edge_options_name_the_core_and_default_to_no_check() -> None:
    options = EdgeOptions()
    assert (options.verify, options.verify_cpu, options.min_arch_agreement, options.verify_required) == (
        (),
        "cortex-a76",
        0.995,
        True,
    )
    assert EdgeOptions.model_validate_json(EdgeOptions(verify=["aarch64"]).model_dump_json()).verify == ("aarch64",)
    with pytest.raises(ValidationError, match=r"verify_cpu\n.*`max` CPU advertises the SME matrix extension"):
        EdgeOptions(verify_cpu="max")
    with pytest.raises(ValidationError, match=r"verify\.0\n.*'aarch64'"):
        EdgeOptions(verify=["riscv64"])  # type: ignore[list-item]


def test_the_guest_runner_knows_the_same_kernels() -> None:
    assert sorted(arm_guest.RESOLVERS) == sorted(KERNELS)


@pytest.mark.parametrize(("kernels", "delegated"), [("xnnpack", True), ("builtin", False)])
def test_the_runner_on_the_host_pins_the_kernels_and_returns_raw_outputs(
    float_model: bytes, tmp_path: Path, kernels: str, delegated: bool
) -> None:
    from edge.runtime import TfliteModel

    model = TfliteModel(float_model, threads=1)
    images = np.random.default_rng(0).integers(0, 256, size=(40, 16, 16, 3)).astype(np.uint8)
    job = arch.RunnerJob.write(tmp_path, float_model, model.quantize_input(images), model, kernels, threads=1)

    result = arch.run_on_host(job, tmp_path / "host")

    assert result.outputs.shape == (40, 4)
    np.testing.assert_allclose(result.outputs, model.predict(images), atol=1e-5)
    assert (result.facts["kernels"], result.facts["delegated_nodes"] > 0) == (kernels, delegated)
    assert result.facts["output"] == {"dtype": "float32", "scale": 0.0, "zero_point": 0}
    assert result.probe["machine"] and "processor" in result.probe["cpuinfo"]


def test_compare_counts_agreement_steps_and_accuracy_per_side() -> None:
    host = np.array([[120, -128], [-128, 127], [10, 9], [0, 5]], np.int8)
    target = np.array([[119, -128], [127, -128], [9, 10], [0, 5]], np.int8)
    labels = np.array([0, 1, 0, 1])

    result = compare(host, target, labels, scale=1 / 256, zero_point=-128)

    assert result.agreement == 0.5  # rows 1 and 2 flip
    assert result.max_steps == 255  # 127 − (−128): computed wide, no int8 wrap-around
    assert result.max_abs_diff == pytest.approx(255 / 256)
    assert (result.host_accuracy, result.target_accuracy) == (1.0, 0.5)
    assert result.count == 4


def test_steps_come_from_the_scale_whatever_the_zero_point() -> None:
    uint8 = compare(np.array([[200, 3]], np.uint8), np.array([[197, 3]], np.uint8), np.array([0]), 0.0125, 0)
    int8 = compare(np.array([[72, -125]], np.int8), np.array([[69, -125]], np.int8), np.array([0]), 0.0125, -128)
    floats = compare(np.array([[0.7, 0.3]], np.float32), np.array([[0.6, 0.4]], np.float32), np.array([0]), 0.0, 0)

    assert uint8.max_steps == int8.max_steps == 3
    assert uint8.max_abs_diff == pytest.approx(int8.max_abs_diff) == pytest.approx(0.0375)
    assert floats.max_steps is None and floats.max_abs_diff == pytest.approx(0.1)


def test_compare_refuses_runs_of_different_inputs() -> None:
    with pytest.raises(EdgeError, match=r"cannot compare outputs \[2, 3\] \(host\) and \[1, 3\] \(target\)"):
        compare(np.zeros((2, 3)), np.zeros((1, 3)), np.zeros(2), 0.0, 0)


def _comparison(agreement: float, target_accuracy: float = 0.99) -> Comparison:
    return Comparison(200, agreement, 1, 0.004, host_accuracy=0.995, target_accuracy=target_accuracy)


def test_judge_needs_the_agreement_and_the_accuracy_within_the_drop() -> None:
    passed, reason = judge(_comparison(0.995), 0.995, reference_accuracy=0.995, max_drop=0.01)
    assert passed
    assert reason == (
        "top-1 agreement 199/200 (0.9950, min 0.9950); max 1 quantization steps; accuracy 0.9900 on aarch64, "
        "0.9950 on the host; drop vs SavedModel 0.50 points within 1.00"
    )
    assert not judge(_comparison(0.99), 0.995)[0]
    passed, reason = judge(_comparison(1.0, target_accuracy=0.9), 0.995, reference_accuracy=0.995, max_drop=0.01)
    assert not passed and reason.endswith("drop vs SavedModel 9.50 points exceeds 1.00")


def _export(blessed: bool = True) -> EdgeExport:
    gate = GateResult(blessed=blessed, drop=0.0, reason="accuracy drop 0.00 points (...) within ...")
    metadata: dict[str, Any] = {"blessed": blessed, "reason": gate.reason, "accuracy": {"saved_model": 0.99}}
    return EdgeExport(tflite=b"", labels=["a"], metadata=metadata, gate=gate)


@pytest.mark.parametrize(
    ("status", "required", "blessed", "says"),
    [
        ("passed", True, True, "aarch64 (cortex-a76): figures"),
        ("failed", False, False, "; not pushed"),
        ("not_run", True, False, "edge.verify_required blocks the push (set it to false to push unverified); not"),
        ("not_run", False, True, "edge.verify_required is false, so the model was pushed unverified"),
    ],
)
def test_the_check_decides_the_push(status: Any, required: bool, blessed: bool, says: str) -> None:
    options = EdgeOptions(verify=["aarch64"], verify_required=required)
    check = ArchCheck(status, "aarch64 (cortex-a76): figures", {"top1_agreement": 1.0} if status == "passed" else {})

    export = apply_check(_export(), check, options)

    assert export.blessed is blessed and export.metadata["blessed"] is blessed
    assert says in export.gate.reason and export.metadata["reason"] == export.gate.reason
    assert export.metadata["arch_check"]["status"] == status
    assert not apply_check(_export(blessed=False), check, options).blessed  # the accuracy gate still decides


@pytest.fixture(scope="module")
def float_model(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from edge.quantize import convert

    return convert(shared_model(tmp_path_factory), "none")


@pytest.fixture()
def no_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(arch, "missing_tools", lambda: ["qemu-aarch64-static", "mmdebstrap"])


def test_a_runtime_that_cannot_be_prepared_is_a_check_not_run(no_tools: None, float_model: bytes) -> None:
    options = EdgeOptions(verify=["aarch64"])

    check = check_arch(float_model, np.zeros((1, 16, 16, 1), np.float32), np.zeros(1), 0.9, options)

    assert check.status == "not_run" and check.details == {}
    assert check.reason == (
        "aarch64 (cortex-a76) check not run: qemu-aarch64-static and mmdebstrap not installed; install them with "
        "`sudo apt-get install -y qemu-user-static mmdebstrap`"
    )


def test_the_cache_dir_follows_xdg_and_names_the_versions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pins = arch.wheel_pins()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    assert any(pin.startswith("ai-edge-litert==") for pin in pins) and any(pin.startswith("numpy==") for pin in pins)
    assert arch.cache_dir(pins) == tmp_path / "tfxp" / f"arm64-{arch.runtime_key(pins)}"
    assert arch.runtime_key(pins) != arch.runtime_key(("numpy==1.0",))
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert arch.cache_dir(pins).parent == Path.home() / ".cache" / "tfxp"


runner = CliRunner()


def test_cli_refuses_max_before_reading_anything(tmp_path: Path) -> None:
    (tmp_path / "none.tflite").write_bytes(b"")  # exists (the path rule), never read
    result = runner.invoke(app, ["edge", "verify", str(tmp_path / "none.tflite"), "--examples", ".", "--cpu", "max"])

    assert result.exit_code == 2
    assert "advertises the SME matrix extension" in " ".join(result.output.split())


def test_cli_without_the_tools_says_how_to_install_them(
    no_tools: None, float_model: bytes, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    model = tmp_path / "model.tflite"
    model.write_bytes(float_model)

    result = runner.invoke(app, ["edge", "verify", str(model), "--examples", str(shared_data(tmp_path_factory))])

    assert result.exit_code == 2
    assert "sudo apt-get install -y qemu-user-static mmdebstrap" in " ".join(result.output.split())


def test_executor_records_a_check_not_run_and_blocks_the_push_when_required(
    no_tools: None, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    from components.edge_exporter.summary import edge_summary

    edge_model = _run_exporter(tmp_path, tmp_path_factory, verify_required=True)

    assert not (tmp_path / "edge").exists()
    fields = edge_summary(edge_model)
    assert fields["edge"]["status"] == "not_blessed"
    assert fields["edge"]["arch_check"]["status"] == "not_run"
    assert "check not run: qemu-aarch64-static and mmdebstrap not installed" in fields["edge"]["reason"]
    assert json.loads((Path(edge_model) / "edge_metadata.json").read_text())["blessed"] is False

    edge_model = _run_exporter(tmp_path, tmp_path_factory, verify_required=False)
    assert edge_summary(edge_model)["edge"]["status"] == "pushed"
    assert "pushed unverified" in edge_summary(edge_model)["edge"]["reason"]


def _run_exporter(tmp_path: Path, factory: pytest.TempPathFactory, verify_required: bool) -> str:
    import shutil

    from tfx.types import standard_artifacts

    from components.edge_exporter.artifacts import EdgeBlessing, EdgeModel
    from components.edge_exporter.executor import Executor

    examples = standard_artifacts.Examples()
    examples.uri = str(shared_data(factory))
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "trainer")
    if not Path(model.uri).exists():
        shutil.copytree(shared_model(factory), Path(model.uri) / "Format-Serving")
    edge_model, edge_blessing = EdgeModel(), EdgeBlessing()
    edge_model.uri = str(tmp_path / "edge_model" / str(verify_required))
    edge_blessing.uri = str(tmp_path / "edge_blessing" / str(verify_required))
    # No app client check (a MediaPipe process in .venv-mediapipe): the arm check is what this test is about.
    options = EdgeOptions(
        mode="none", eval_samples=8, verify=["aarch64"], verify_required=verify_required, app_client="none"
    )
    parameters = {"options": options.model_dump_json(), "push_base": str(tmp_path / "edge"), "label_offset": 0}
    outputs = {"edge_model": [edge_model], "edge_blessing": [edge_blessing]}
    Executor().Do({"model": [model], "examples": [examples]}, outputs, parameters)
    assert edge_model.get_string_custom_property("arch_check") == "not_run"
    return str(edge_model.uri)
