"""Kubernetes resource quantities (`8`, `500m`, `32Gi`, `1e3`), read as the API server reads them.

The API server parses every quantity with `resource.ParseQuantity` (kubernetes/apimachinery, commit eed236c,
`pkg/api/resource/quantity.go`): the grammar comment at lines 37-59 and the scanner `parseQuantityString` at
lines 160-275, whose suffix is then looked up in `suffix.go` lines 88-135 and 180-198. `QUANTITY` below is that
scanner as one regular expression:

- an optional sign `+` or `-`;
- ASCII digits, an optional `.` and more ASCII digits (`1`, `1.5`, `1.`, `.5`; Go compares bytes with '0'..'9',
  so `١٠` is no number);
- a suffix: decimal SI `n u m "" k M G T P E`, binary SI `Ki Mi Gi Ti Pi Ei`, or a decimal exponent `e`/`E`
  and an int64 (`1e3`, `2E-1`). Anything else is refused: `8K` (Kubernetes' kilo is `k`), `8ki`, `1e3k`,
  spaces, `NaN`, `inf`.

The scanner is looser than the grammar comment in one corner, and so is this module: a number with no digit
(`.`, `-`, `Gi`) reads 0. Resource amounts (`resource_amount`) are then refused unless above 0. Three things
the API server does not refuse but changes, so `resource_amount` refuses them instead: amounts beyond
2^63-1 (capped, lines 377-381), amounts finer than 1n (rounded up, lines 369-375) and exponents beyond int32
(truncated by `int32(parsed)`, suffix.go:194).

`kubernetes.utils.parse_quantity` is no substitute: it accepts `8K`, ` 8Gi`, `NaN`, `-1`, `1e3k` and
non-ASCII digits, which the API server refuses.

Example:
    parse_quantity("500m").value   # Decimal('0.500')
    parse_quantity("32Gi").value   # Decimal('34359738368')
    resource_amount("8K", key="serving.memory")  # QuantityError: ... `k` ... e.g. 8Gi, 512Mi, 8G
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, Decimal, localcontext
from typing import Annotated

from pydantic import AfterValidator

from foundation.errors import TfxpError

# The scanner of quantity.go:160-275: sign, digits, `.` and digits, suffix letters, an optional sign, digits.
QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<integer>[0-9]*)(?:\.(?P<fraction>[0-9]*))?(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)",
    re.ASCII,
)
# suffix.go:113-132: (base, exponent) of each named suffix.
SUFFIXES: dict[str, tuple[int, int]] = {
    "": (10, 0),
    "n": (10, -9),
    "u": (10, -6),
    "m": (10, -3),
    "k": (10, 3),
    "M": (10, 6),
    "G": (10, 9),
    "T": (10, 12),
    "P": (10, 15),
    "E": (10, 18),
    **{f"{letter}i": (2, 10 * power) for power, letter in enumerate("KMGTPE", start=1)},
}
_EXPONENT = re.compile(r"[eE](?P<exponent>[+-]?[0-9]+)", re.ASCII)
INT64_MAX = 2**63 - 1
NANO = Decimal("1e-9")  # the finest amount the API server keeps (quantity.go:369-375 rounds up to it)
INT32_MAX = 2**31 - 1
CPU_EXAMPLES = "e.g. 4, 0.5 or 500m"
MEMORY_EXAMPLES = "e.g. 8Gi, 512Mi or 8G"


class QuantityError(TfxpError, ValueError):
    """Not a quantity the API server accepts, or not one a resource field can take; the message says which."""


@dataclass(frozen=True)
class Quantity:
    """A parsed quantity.

    Attributes:
        text: The quantity as written.
        value: Its exact value (`500m` → 0.5; the API server rounds amounts below 1n up to 1n).
        suffix: The suffix as written (`m`, `Gi`, `e3`, or "").
    """

    text: str
    value: Decimal
    suffix: str


def _scale(suffix: str) -> tuple[int, int] | None:
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent and abs(int(exponent["exponent"])) <= INT64_MAX:  # strconv.ParseInt(…, 10, 64), suffix.go:190
        return 10, int(exponent["exponent"])
    return None


def parse_quantity(text: str) -> Quantity:
    """`text` read as the API server reads a quantity (see the module docstring).

    Raises:
        QuantityError: what the API server refuses, with the accepted forms.
    """
    match = QUANTITY.fullmatch(text) if text else None
    scale = _scale(match["suffix"]) if match else None
    if match is None or scale is None:
        raise QuantityError(
            f"{text!r} is not a Kubernetes quantity: ASCII digits with an optional sign and decimal point, then "
            "one of the suffixes n u m k M G T P E (decimal; kilo is lower-case k), Ki Mi Gi Ti Pi Ei (binary) "
            "or e<N> (an exponent), with no spaces"
        )
    base, exponent = scale
    number = f"{match['sign']}{match['integer'] or '0'}.{match['fraction'] or '0'}"
    # Beyond ±10^17 only the side of 2^63 or of 1n matters, and Decimal's exponents end near 10^18.
    exponent = max(-(10**17), min(10**17, exponent))
    with localcontext(Emax=MAX_EMAX, Emin=MIN_EMIN) as context:
        context.prec = len(text) + 40  # exact: 2^60 has 19 digits, the number fewer than the text
        value = Decimal(number) * base**exponent if base == 2 else Decimal(number).scaleb(exponent, context)
    return Quantity(text=text, value=value, suffix=match["suffix"])


def resource_amount(text: str, examples: str = MEMORY_EXAMPLES, key: str = "") -> Decimal:
    """The value of `text` as the amount of a resource (CPU, memory, storage, an emptyDir size): a quantity
    above 0 that the API server keeps as written.

    Args:
        text: The quantity.
        examples: Valid values to show, e.g. `CPU_EXAMPLES`.
        key: The config key to name in the message, e.g. `serving.memory` ("" where the caller names it).

    Raises:
        QuantityError: not a quantity, not above 0, above 2^63-1, finer than 1n or with an exponent beyond
            int32 (the API server would cap, round or truncate those); the message names `key` and shows
            `examples`.
    """
    where = f"{key}={text}: " if key else ""
    try:
        quantity = parse_quantity(text)
    except QuantityError as error:
        raise QuantityError(f"{key + ': ' if key else ''}{error}; {examples}") from None
    exponent = _EXPONENT.fullmatch(quantity.suffix)
    if exponent and abs(int(exponent["exponent"])) > INT32_MAX:
        raise QuantityError(
            f"{where}the API server truncates exponents beyond int32 and would read another amount; {examples}"
        )
    if quantity.value <= 0:
        raise QuantityError(f"{where}a resource amount must be more than 0; {examples}")
    if quantity.value > INT64_MAX:
        raise QuantityError(f"{where}the API server caps amounts at 2^63-1 and would change it; {examples}")
    if quantity.value % NANO:
        raise QuantityError(
            f"{where}the API server rounds amounts up to a multiple of 1n and would change it; {examples}"
        )
    return quantity.value


def cpu_cores(text: str, key: str = "") -> Decimal:
    """A CPU quantity (`4`, `0.5`, `500m`) in cores; `resource_amount` with CPU examples."""
    return resource_amount(text, CPU_EXAMPLES, key)


def memory_bytes(text: str, key: str = "") -> Decimal:
    """A memory or storage quantity (`8Gi`, `512Mi`, `8G`) in bytes; `resource_amount` with memory examples."""
    return resource_amount(text, MEMORY_EXAMPLES, key)


def _validator(amount: Callable[[str], Decimal]) -> AfterValidator:
    def check(text: str) -> str:
        amount(text)
        return text

    return AfterValidator(check)


# Config fields holding a CPU or a memory/storage amount, kept as written (manifests and KFP take the text).
CpuQuantity = Annotated[str, _validator(cpu_cores)]
MemoryQuantity = Annotated[str, _validator(memory_bytes)]
