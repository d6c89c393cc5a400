"""The ARM cores a device model is checked on: the QEMU CPU models, the `/proc/cpuinfo` each needs, and the
refusal of a CPU with SME (why: `edge.verify`'s docstring).

Example:
    core = check_cpu("cortex-a76")
    render_cpuinfo(core, processors=4)  # what the emulated guest's /proc/cpuinfo says
"""

from __future__ import annotations

from dataclasses import dataclass

from edge.errors import EdgeError

ARCHES = ("aarch64",)
KERNELS = ("xnnpack", "builtin", "reference")  # edge.arm_guest.RESOLVERS maps each to LiteRT's op resolver
# fmt: off
# Bit i of AT_HWCAP / AT_HWCAP2 and its /proc/cpuinfo name (linux/arch/arm64/include/uapi/asm/hwcap.h).
HWCAP_NAMES = (
    "fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp", "asimdhp", "cpuid",
    "asimdrdm", "jscvt", "fcma", "lrcpc", "dcpop", "sha3", "sm3", "sm4", "asimddp", "sha512", "sve", "asimdfhm",
    "dit", "uscat", "ilrcpc", "flagm", "ssbs", "sb", "paca", "pacg",
)
HWCAP2_NAMES = (
    "dcpodp", "sve2", "sveaes", "svepmull", "svebitperm", "svesha3", "svesm4", "flagm2", "frint", "svei8mm",
    "svef32mm", "svef64mm", "svebf16", "i8mm", "bf16", "dgh", "rng", "bti", "mte", "ecv", "afp", "rpres", "mte3",
    "sme", "smei16i64", "smef64f64", "smei8i32", "smef16f32", "smeb16f32", "smef32f32", "smefa64",
)
# fmt: on
HWCAP2_SME = 1 << HWCAP2_NAMES.index("sme")
SME_REFUSED = (
    "QEMU's `{cpu}` CPU advertises the SME matrix extension: XNNPACK then runs its SME int8 kernels, which gave "
    "wrong results under emulation (top-1 agreement with x86 as low as 10 %, outputs off by up to 255 "
    "quantization steps; float models were fine), and `max` is no device a model ships to. Name the core you "
    "target: {cores}"
)


@dataclass(frozen=True)
class Core:
    """An ARM core QEMU emulates, as its `/proc/cpuinfo` describes it.

    Attributes:
        name: The QEMU CPU model (`-cpu NAME`) and the `--cpu` / `edge.verify_cpu` value.
        implementer: MIDR implementer (0x41 = Arm).
        variant: MIDR variant (the rN of rNpM).
        part: MIDR part number.
        revision: MIDR revision (the pM of rNpM).
        features: The `Features` line: what QEMU's model of the core reports in HWCAP, nothing more (a feature
            the core lacks makes XNNPACK run an instruction the emulated CPU refuses: SIGILL).
        found_in: Devices with this core, for the README and `--help`.
    """

    name: str
    implementer: int
    variant: int
    part: int
    revision: int
    features: tuple[str, ...]
    found_in: str


_V8 = ("fp", "asimd", "aes", "pmull", "sha1", "sha2", "crc32", "cpuid")
_V82 = (*_V8[:7], "atomics", "fphp", "asimdhp", "cpuid", "asimdrdm", "lrcpc", "dcpop", "asimddp")
CORES = {
    core.name: core
    for core in (
        Core("cortex-a53", 0x41, 0x0, 0xD03, 4, _V8, "Raspberry Pi 3, the small cores of most phones"),
        Core("cortex-a72", 0x41, 0x0, 0xD08, 3, _V8, "Raspberry Pi 4"),
        Core("cortex-a76", 0x41, 0x4, 0xD0B, 1, _V82, "Raspberry Pi 5, the big cores of 2019-2021 phones"),
        Core("neoverse-n1", 0x41, 0x4, 0xD0C, 1, _V82, "AWS Graviton2, Ampere Altra"),
    )
}


def check_cpu(cpu: str) -> Core:
    """The supported core a `--cpu` / `edge.verify_cpu` value names.

    Raises:
        EdgeError: `max` (SME on, or any other `max`), CPU properties, or a core not in `CORES`.
    """
    name, _, properties = cpu.strip().lower().partition(",")
    cores = ", ".join(CORES)
    if name == "max" and "sme=off" not in properties.split(","):
        raise EdgeError(SME_REFUSED.format(cpu=cpu, cores=cores))
    if name == "max":
        raise EdgeError(
            f"`{cpu}` is QEMU's 'every feature it emulates' CPU, no device: its features change with each QEMU "
            f"release, so agreement on it stands for nothing that ships. Name the core you target: {cores}"
        )
    if properties:
        raise EdgeError(f"CPU `{cpu}`: properties after the model name are not supported; pass one of: {cores}")
    if name not in CORES:
        raise EdgeError(f"unknown ARM core `{cpu}`; supported (QEMU CPU models): {cores}")
    return CORES[name]


def check_kernels(kernels: str) -> str:
    """`kernels` when both sides can run them (`KERNELS`).

    Raises:
        EdgeError: any other kernels, naming the supported ones.
    """
    if kernels not in KERNELS:
        raise EdgeError(f"unknown --kernels {kernels}; pass one of: {', '.join(KERNELS)}")
    return kernels


def hwcap_features(hwcap: int, hwcap2: int) -> set[str]:
    """The `/proc/cpuinfo` feature names of the AT_HWCAP and AT_HWCAP2 bits that are set."""
    names: set[str] = set()
    for bits, table in ((hwcap, HWCAP_NAMES), (hwcap2, HWCAP2_NAMES)):
        names.update(name for index, name in enumerate(table) if bits >> index & 1)
    return names


def render_cpuinfo(core: Core, processors: int) -> str:
    """An arm64 kernel's `/proc/cpuinfo` for `processors` identical `core`s (what the guest reads)."""
    block = (
        "processor\t: {index}\nBogoMIPS\t: 50.00\nFeatures\t: {features}\nCPU implementer\t: {implementer:#x}\n"
        "CPU architecture: 8\nCPU variant\t: {variant:#x}\nCPU part\t: {part:#05x}\nCPU revision\t: {revision}\n\n"
    )
    return "".join(
        block.format(
            index=index,
            features=" ".join(core.features),
            implementer=core.implementer,
            variant=core.variant,
            part=core.part,
            revision=core.revision,
        )
        for index in range(max(1, processors))
    )


def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """The processor blocks of a `/proc/cpuinfo` text, as `key: value` dicts."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        key, sep, value = line.partition(":")
        if sep:
            current[key.strip()] = value.strip()
        elif current:
            blocks.append(current)
            current = {}
    return blocks


def cpuinfo_problems(cpuinfo: str, core: Core, hwcap: int, hwcap2: int) -> list[str]:
    """Why the CPU a guest saw does not stand for `core`; empty when it does.

    Args:
        cpuinfo: `/proc/cpuinfo` as the guest read it.
        core: The core the check runs on.
        hwcap: AT_HWCAP as the guest saw it (QEMU's model of the core).
        hwcap2: AT_HWCAP2 likewise.
    """
    problems = []
    if hwcap2 & HWCAP2_SME:
        problems.append(SME_REFUSED.format(cpu=core.name, cores=", ".join(CORES)))
    arm = [block for block in parse_cpuinfo(cpuinfo) if "CPU implementer" in block]
    if not arm:
        return [*problems, "the guest's /proc/cpuinfo is not an ARM one (no `CPU implementer`; LiteRT crashes on it)"]
    block = arm[0]
    seen = (block.get("CPU implementer", ""), block.get("CPU part", ""))
    if tuple(int(value, 16) if value else -1 for value in seen) != (core.implementer, core.part):
        problems.append(f"the guest's /proc/cpuinfo names implementer {seen[0]} part {seen[1]}, not {core.name}")
    extra = set(block.get("Features", "").split()) - hwcap_features(hwcap, hwcap2)
    if extra:
        problems.append(f"the guest's /proc/cpuinfo claims {', '.join(sorted(extra))}, which {core.name} lacks")
    return problems
