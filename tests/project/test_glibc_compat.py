"""The glibc compat step (scripts/glibc_compat.py) and the stack it makes importable."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("glibc_compat", REPO / "scripts" / "glibc_compat.py")
assert _spec is not None and _spec.loader is not None
compat = importlib.util.module_from_spec(_spec)
sys.modules["glibc_compat"] = compat
_spec.loader.exec_module(compat)


def test_metadata_store_round_trip_on_sqlite(tmp_path: Path) -> None:
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(tmp_path / "mlmd.db")
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    store = metadata_store.MetadataStore(config)
    artifact_type = metadata_store_pb2.ArtifactType(name="Model")
    type_id = store.put_artifact_type(artifact_type)
    artifact = metadata_store_pb2.Artifact(type_id=type_id, uri="/models/1")
    artifact.custom_properties["blessed"].int_value = 1
    [artifact_id] = store.put_artifacts([artifact])
    [loaded] = store.get_artifacts_by_id([artifact_id])
    assert loaded.uri == "/models/1" and loaded.custom_properties["blessed"].int_value == 1


def test_tfdv_infers_and_validates() -> None:
    import pandas as pd
    import tensorflow_data_validation as tfdv

    stats = tfdv.generate_statistics_from_dataframe(pd.DataFrame({"label": [0, 1, 2, 1], "name": list("abca")}))
    schema = tfdv.infer_schema(stats)
    assert {feature.name for feature in schema.feature} == {"label", "name"}
    drifted = tfdv.generate_statistics_from_dataframe(pd.DataFrame({"label": [0, 1], "other": ["x", "y"]}))
    anomalies = tfdv.validate_statistics(drifted, schema)
    assert "other" in anomalies.anomaly_info  # a column the schema does not know


@pytest.mark.slow  # a second interpreter importing TFX: the fresh import is the point
def test_tfx_v1_imports_in_a_fresh_interpreter() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from tfx import v1; print(v1.orchestration.LocalDagRunner.__name__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "LocalDagRunner" in result.stdout


@pytest.mark.skipif(not compat.compat_needed(), reason="host glibc >= 2.39: the compat step does not apply")
def test_patched_extensions_have_only_weak_missing_versions() -> None:
    extensions = compat.extension_modules()
    assert {path.name for path in extensions} == {
        "metadata_store_extension.so",
        "tensorflow_data_validation_extension.so",
    }
    for extension in extensions:
        assert compat.SHIM_NAME in compat._needed_libraries(extension)
        assert all(need.flags & compat.VER_FLG_WEAK for need in compat.missing_versions(extension))
        assert (extension.parent / compat.MARKER_NAME).is_file()
    state = compat.status()
    assert state["needed"] is True
    assert len(state["patched_extensions"]) == 2  # type: ignore[arg-type]


@pytest.mark.skipif(not compat.compat_needed(), reason="host glibc >= 2.39: the compat step does not apply")
def test_patch_is_idempotent(capsys: pytest.CaptureFixture[str]) -> None:
    before = {path: path.read_bytes() for path in compat.extension_modules()}
    compat.patch()
    assert "already patched" in capsys.readouterr().out
    assert {path: path.read_bytes() for path in compat.extension_modules()} == before


def test_new_glibc_hosts_are_left_untouched(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(compat, "host_glibc", lambda: (2, 39))
    before = {path: path.stat().st_mtime_ns for path in compat.extension_modules()}
    compat.patch()
    compat.preinstall(REPO / "constraints.txt")
    output = capsys.readouterr().out
    assert "left untouched" in output and "nothing to do" in output
    assert {path: path.stat().st_mtime_ns for path in compat.extension_modules()} == before


def test_missing_compiler_is_refused_with_the_package_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(compat.shutil, "which", lambda name: None)
    with pytest.raises(compat.CompatError, match=r"apt-get install g\+\+"):
        compat._build_shim(tmp_path / "shim.so")


def test_preinstall_needs_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "host_glibc", lambda: (2, 36))
    (tmp_path / "constraints.txt").write_text("tfx==1.21.0\n")
    with pytest.raises(compat.CompatError, match=r"no `ml-metadata==\.\.\.` pin"):
        compat.preinstall(tmp_path / "constraints.txt")


def test_shim_builds_and_exports_the_six_symbols(tmp_path: Path) -> None:
    if compat.shutil.which("g++") is None:
        pytest.skip("no C++ compiler on this host")
    shim = tmp_path / compat.SHIM_NAME
    compat._build_shim(shim)
    from elftools.elf.elffile import ELFFile

    with shim.open("rb") as handle:
        symbols = {
            s.name
            for s in ELFFile(handle).get_section_by_name(".dynsym").iter_symbols()
            if s["st_shndx"] != "SHN_UNDEF"
        }
    assert symbols >= compat.SHIM_SYMBOLS
