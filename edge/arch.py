"""The emulated ARM64 runtime: Debian's qemu-user running an arm64 Debian Python with LiteRT's aarch64 wheels.

Prepared once per versions (`runtime_key`) under the user's cache dir, `$XDG_CACHE_HOME/tfxp/arm64-<key>` (else
`~/.cache/...`), from packages only:
- host tools: Debian's `qemu-user-static` and `mmdebstrap` (`sudo apt-get install -y qemu-user-static mmdebstrap`);
- `rootfs/`: Debian bookworm arm64 with python3 (3.11) and libstdc++, unpacked without a chroot
  (`mmdebstrap --variant=extract`, from the Debian mirror);
- `site/`: the aarch64 wheels of ai-edge-litert, numpy and LiteRT's other requirements at the host venv's
  versions (`pip install --target --platform manylinux_2_*_aarch64 --python-version 3.11`, from PyPI).

Each run gets a prefix of its own (`QEMU_LD_PREFIX`): links to the root filesystem plus a `proc/cpuinfo` for the
emulated core. qemu-user resolves the guest's absolute paths there first, so the guest reads that file instead
of the host's x86 one (on which LiteRT's CPU detection crashes). `edge.arm_guest` runs on both sides.

Example:
    runtime = prepare_runtime(print)  # ~15 s and ~200 MB the first time, then instant
    result = run_on_target(runtime, core, cpuinfo, job, Path("out/arm"))
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edge.errors import EdgeError
from foundation.bounded import parse_json, read_document

if TYPE_CHECKING:
    from edge.cores import Core
    from edge.runtime import TfliteModel

SUITE = "bookworm"
GUEST_PYTHON = "3.11"  # bookworm's python3; the wheels' python tag must match it
GUEST_GLIBC_MINOR = 36  # bookworm's glibc 2.36: manylinux_2_17 .. manylinux_2_36 wheels run there
DEBIAN_PACKAGES = ("python3", "libstdc++6")  # numpy's and LiteRT's C++ extensions need libstdc++
WHEELS = ("ai-edge-litert", "numpy")  # plus ai-edge-litert's own requirements, all at the host's versions
QEMU = "qemu-aarch64-static"
TOOLS = (QEMU, "mmdebstrap")
INSTALL_HINT = "sudo apt-get install -y qemu-user-static mmdebstrap"
RUNNER = Path(__file__).with_name("arm_guest.py")
LAYOUT = 1  # bump when the cache layout changes
PREPARE_TIMEOUT_S = 900
RUN_TIMEOUT_S = 900
_log = logging.getLogger(__name__)


class RuntimeUnavailableError(EdgeError):
    """The emulated runtime cannot be prepared or run here (tools missing, offline, too slow): a check not run."""


class TargetFailedError(EdgeError):
    """The model did not run on the emulated core, or not on the core and kernels asked for: a failed check.

    Attributes:
        probe: What the guest saw of its CPU before it failed (`edge.arm_guest.probe`), when it got that far.
    """

    def __init__(self, message: str, probe: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.probe = probe or {}


def log_progress(line: str) -> None:
    """A `report` for `prepare_runtime` that logs (the EdgeExporter's)."""
    _log.info("%s", line)


def wheel_pins() -> tuple[str, ...]:
    """`name==version` of `WHEELS` and ai-edge-litert's requirements, as installed in this (host) environment.

    Raises:
        RuntimeUnavailableError: ai-edge-litert or a requirement is not installed here.
    """
    names = list(WHEELS)
    try:
        for requirement in importlib.metadata.requires("ai-edge-litert") or []:
            if "extra ==" not in requirement:
                names.append(re.split(r"[\s;<>=!~\[]", requirement, maxsplit=1)[0])
        pins = {name.lower(): f"{name}=={importlib.metadata.version(name)}" for name in names}
    except importlib.metadata.PackageNotFoundError as error:
        raise RuntimeUnavailableError(
            f"{error.name} is not installed in this Python, so its aarch64 twin is unknown"
        ) from None
    return tuple(sorted(pins.values()))


def runtime_key(pins: tuple[str, ...]) -> str:
    """12 hex digits naming the runtime's contents (suite, Debian packages, Python, wheels, layout)."""
    contents = {"layout": LAYOUT, "suite": SUITE, "debs": DEBIAN_PACKAGES, "python": GUEST_PYTHON, "wheels": pins}
    return hashlib.sha256(json.dumps(contents, sort_keys=True).encode()).hexdigest()[:12]


def cache_dir(pins: tuple[str, ...]) -> Path:
    """`$XDG_CACHE_HOME/tfxp/arm64-<key>`, else `~/.cache/tfxp/arm64-<key>`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tfxp" / f"arm64-{runtime_key(pins)}"


def missing_tools() -> list[str]:
    """The host tools of `TOOLS` not on PATH."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def disk_usage(path: Path) -> int:
    """Bytes of disk the files under `path` take (links counted as links)."""
    total = 0
    for directory, _, files in os.walk(path):
        total += sum(os.lstat(os.path.join(directory, name)).st_blocks * 512 for name in files)
    return total


def processors() -> int:
    """Processors the guest's /proc/cpuinfo lists: the host's, as its /sys (which the guest also reads) does."""
    return os.cpu_count() or 1


@dataclass(frozen=True)
class ArmRuntime:
    """A prepared runtime.

    Attributes:
        root: The cache directory (`rootfs/`, `site/`, `ready.json`).
        pins: The aarch64 wheels in `site/`.
        setup_seconds: How long preparing took.
        disk_bytes: The disk it takes.
    """

    root: Path
    pins: tuple[str, ...]
    setup_seconds: float
    disk_bytes: int

    @property
    def rootfs(self) -> Path:
        return self.root / "rootfs"

    @property
    def site(self) -> Path:
        return self.root / "site"

    def to_json(self) -> dict[str, Any]:
        return {
            "cache_dir": str(self.root),
            "debian": f"{SUITE} arm64 ({', '.join(DEBIAN_PACKAGES)})",
            "qemu": _tool_version(QEMU),
            "wheels": list(self.pins),
            "setup_seconds": self.setup_seconds,
            "disk_bytes": self.disk_bytes,
        }


def _tool_version(tool: str) -> str:
    try:
        return subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def prepare_runtime(report: Callable[[str], None] = print) -> ArmRuntime:
    """The cached runtime, prepared first when missing (a message before and after, with the disk it takes).

    Args:
        report: Receives the progress lines. Defaults to print.

    Raises:
        RuntimeUnavailableError: tools missing, the Debian mirror or PyPI unreachable, or the guest Python fails.
    """
    pins = wheel_pins()
    root = cache_dir(pins)
    ready = root / "ready.json"
    if ready.is_file():
        recorded = parse_json(read_document(ready, str(ready)))
        return ArmRuntime(root, pins, recorded["setup_seconds"], recorded["disk_bytes"])
    missing = missing_tools()
    if missing:
        raise RuntimeUnavailableError(f"{' and '.join(missing)} not installed; install them with `{INSTALL_HINT}`")
    report(
        f"preparing the emulated ARM64 runtime once, in {root} (about 200 MB): Debian {SUITE} arm64 "
        f"{' '.join(DEBIAN_PACKAGES)} from the Debian mirror, and the aarch64 wheels {' '.join(pins)} from PyPI"
    )
    started = time.monotonic()
    staging = root.with_name(f"{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        _unpack_rootfs(staging / "rootfs")
        _install_wheels(staging / "site", pins)
        _smoke_test(staging)
        runtime = ArmRuntime(root, pins, round(time.monotonic() - started, 1), disk_usage(staging))
        (staging / "ready.json").write_text(json.dumps(runtime.to_json(), indent=2) + "\n")
        try:
            staging.rename(root)
        except OSError:  # another process finished first: use its copy
            if not ready.is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report(f"ARM64 runtime ready in {runtime.setup_seconds:.0f} s: {runtime.disk_bytes / 2**20:.0f} MB in {root}")
    return runtime


def _run_step(what: str, command: list[str], needs: str, **kwargs: Any) -> None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=PREPARE_TIMEOUT_S, **kwargs)
    except subprocess.TimeoutExpired:
        raise RuntimeUnavailableError(f"{what} took over {PREPARE_TIMEOUT_S} s; it needs {needs}") from None
    if result.returncode:
        lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        last = " | ".join(lines[-3:]) or f"exit status {result.returncode}"
        raise RuntimeUnavailableError(f"{what} failed ({last}); it needs {needs}")


def _unpack_rootfs(rootfs: Path) -> None:
    command = [
        "mmdebstrap",
        "--quiet",
        "--architectures=arm64",
        "--variant=extract",
        f"--include={','.join(DEBIAN_PACKAGES)}",
        SUITE,
        str(rootfs),
    ]
    _run_step(f"unpacking Debian {SUITE} arm64 with mmdebstrap", command, "the Debian mirror (deb.debian.org)")


def _install_wheels(site: Path, pins: tuple[str, ...]) -> None:
    platforms = [f"--platform=manylinux_2_{minor}_aarch64" for minor in range(GUEST_GLIBC_MINOR, 16, -1)]
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--implementation=cp",
        f"--python-version={GUEST_PYTHON}",
        *platforms,
        "--platform=manylinux2014_aarch64",
        f"--target={site}",
        *pins,
    ]
    _run_step("downloading the aarch64 wheels with pip", command, "PyPI (or a pip index with aarch64 wheels)")


def _smoke_test(root: Path) -> None:
    # The named core least likely to be missing a feature the wheels need; its cpuinfo is not read by imports.
    command = [QEMU, "-cpu", "cortex-a53", str(root / "rootfs/usr/bin/python3"), "-c", "import ai_edge_litert, numpy"]
    env = {**_guest_env(root / "rootfs", root / "site"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    _run_step("starting the aarch64 Python under qemu", command, f"{QEMU} to run aarch64 binaries", env=env)


def _guest_env(prefix: Path, site: Path) -> dict[str, str]:
    return {
        "QEMU_LD_PREFIX": str(prefix),
        "PYTHONPATH": str(site),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",  # the cache stays as prepared; pip compiled the wheels already
        "LANG": "C.UTF-8",
    }


@dataclass(frozen=True)
class RunnerJob:
    """What both sides run: a model file, its inputs (already in the input type) and `edge.arm_guest`'s options."""

    model: Path
    inputs: Path
    options: tuple[str, ...]

    @classmethod
    def write(
        cls, work: Path, model: bytes, inputs: np.ndarray, host_model: TfliteModel, kernels: str, threads: int
    ) -> RunnerJob:
        """Writes `model.tflite` and `inputs.npy` into `work`."""
        (work / "model.tflite").write_bytes(model)
        np.save(work / "inputs.npy", inputs)
        options = (
            f"--signature={host_model.signature_key}",
            f"--input={host_model.input.name}",
            f"--output={host_model.probabilities.name}",
            f"--kernels={kernels}",
            f"--threads={threads}",
        )
        return cls(work / "model.tflite", work / "inputs.npy", options)

    def arguments(self, out_dir: Path) -> list[str]:
        return [str(RUNNER), str(self.model), str(self.inputs), str(out_dir), *self.options]


@dataclass(frozen=True)
class RunnerResult:
    """One side's run.

    Attributes:
        outputs: The raw output tensor for every input.
        facts: `result.json`: output type and quantization, delegated nodes, versions.
        probe: `probe.json`: machine, HWCAP, HWCAP2, /proc/cpuinfo as the process saw them.
    """

    outputs: np.ndarray
    facts: dict[str, Any] = field(repr=False)
    probe: dict[str, Any] = field(repr=False)


def run_on_host(job: RunnerJob, out_dir: Path) -> RunnerResult:
    """Runs the job with this Python (the host's LiteRT).

    Raises:
        EdgeError: the runner failed on the host.
    """
    result = _run([sys.executable, *job.arguments(out_dir)], dict(os.environ), "the host")
    return _collect(result, out_dir, "the host", EdgeError)


def run_on_target(runtime: ArmRuntime, core: Core, cpuinfo: str, job: RunnerJob, out_dir: Path) -> RunnerResult:
    """Runs the job with the aarch64 Python on the emulated `core`, which reads `cpuinfo` as /proc/cpuinfo.

    Raises:
        TargetFailedError: the run failed or crashed (the message has the signal and what the guest saw).
        RuntimeUnavailableError: qemu is missing or the run timed out.
    """
    prefix = out_dir.with_name(f"{out_dir.name}-prefix")
    (prefix / "proc").mkdir(parents=True)
    for entry in runtime.rootfs.iterdir():
        if entry.name != "proc":
            (prefix / entry.name).symlink_to(entry)
    (prefix / "proc" / "cpuinfo").write_text(cpuinfo)
    env = {**_guest_env(prefix, runtime.site), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(prefix)}
    command = [QEMU, "-cpu", core.name, str(prefix / "usr/bin/python3"), "-s", *job.arguments(out_dir)]
    return _collect(_run(command, env, f"emulated {core.name}"), out_dir, f"emulated {core.name}", TargetFailedError)


def _run(command: list[str], env: dict[str, str], side: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except FileNotFoundError:
        raise RuntimeUnavailableError(f"{command[0]} not found; install it with `{INSTALL_HINT}`") from None
    except subprocess.TimeoutExpired:
        raise RuntimeUnavailableError(
            f"the run on {side} took over {RUN_TIMEOUT_S} s; emulation is slow, compare fewer examples"
        ) from None


def _collect(
    result: subprocess.CompletedProcess[str], out_dir: Path, side: str, error: type[EdgeError]
) -> RunnerResult:
    probe_file = out_dir / "probe.json"
    probe = parse_json(read_document(probe_file, str(probe_file))) if probe_file.is_file() else {}
    if result.returncode:
        lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("INFO:")]
        detail = " | ".join(lines[-3:])
        if result.returncode < 0:
            name = signal.Signals(-result.returncode).name
            hint = {
                "SIGILL": "an instruction the emulated core lacks: the CPU features the guest was shown claim more",
                "SIGSEGV": "LiteRT's CPU detection crashes on a /proc/cpuinfo it cannot read, e.g. an x86 one",
            }.get(name, "")
            detail = f"killed by {name}{f' ({hint})' if hint else ''}; {detail}"
        message = f"the model did not run on {side}: {detail or f'exit status {result.returncode}'}"
        raise TargetFailedError(message, probe) if error is TargetFailedError else error(message)
    facts = parse_json(read_document(out_dir / "result.json", f"{out_dir}/result.json"))
    return RunnerResult(np.load(out_dir / "outputs.npy"), facts, probe)
