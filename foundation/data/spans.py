"""Spans: data that arrives over time as `DIR/span-{SPAN}/`, and which spans a run reads (`data.spans`).

A span folder is named `span-` and a non-negative integer in ASCII digits within int64 (`span-7`, `span-007`),
TFX's `{SPAN}` convention; each holds one of the layouts `foundation.data.layout` recognises. Other `span-*` entries
(`span-next`, `span-3.tmp`) are not spans and are never read, listed into a fingerprint or counted, so a writer
may stage a span under another name and rename it into place.

The policy follows TFX's `range_config_pb2.RollingRange`: N reads the spans in [newest - N + 1, newest], so a gap
shortens the window instead of reaching further back; `latest` is N = 1 and `all` reads every span. This module is
plain Python: the ExampleGen executor (`components.example_gen`), the runners' checks and `tfxp data` share it.

Example:
    select_spans([1, 2, 3, 5], parse_policy("2"))  # [5]: the window is [4, 5]
    select_spans([1, 2, 3, 5], parse_policy("all"))  # [1, 2, 3, 5]
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from foundation.errors import TfxpError

SPAN_PREFIX = "span-"
# The glob over every span folder: ImportExampleGen's split patterns start with it, so TFX's input fingerprint
# covers every span and a new span changes it (a rerun on the same spans is a cache hit).
SPAN_GLOB = f"{SPAN_PREFIX}*"
# ASCII digits only (`\d` would take `span-٣`), the whole name (`$` would take `span-5\n`), within int64 (the
# Examples artifact's `span` property is an MLMD int).
_SPAN_NAME = re.compile(rf"{SPAN_PREFIX}([0-9]+)", re.ASCII)
MAX_SPAN = 2**63 - 1

# Custom property of the Examples artifact: the spans it holds, `3,4,5` (`format_spans`).
SPANS_PROPERTY = "spans"
# ImportExampleGen's execution property: the spans to read, `3,4,5`, chosen where its input fingerprint was taken
# (`components.example_gen.driver` locally, the InputFingerprint task on Kubeflow).
SELECTED_SPANS_KEY = "selected_spans"
# Custom property of the Examples artifact: the folder its span folders were read from (`data.path`).
INPUT_BASE_PROPERTY = "input_base"

# `data.spans` values besides a window size N.
NO_SPANS = "none"
LATEST = "latest"
ALL = "all"
POLICY_HELP = "`none` (no span folders), `latest`, `all`, or N ≥ 1 (the newest N spans)"


class SpanError(TfxpError, ValueError):
    """Span folders that do not fit the policy; the message names what was found and the key to set."""


def span_dir_name(span: int) -> str:
    """`span-3` for span 3 (what `tfxp data --span 3` writes)."""
    if not 0 <= span <= MAX_SPAN:
        raise SpanError(f"span numbers are integers from 0 to {MAX_SPAN}, got {span}")
    return f"{SPAN_PREFIX}{span}"


def span_number(name: str) -> int | None:
    """The span of a folder name (`span-007` → 7); None for anything else: a staged name (`span-5.tmp`,
    `span-5.partial`), non-ASCII digits, or a number beyond int64."""
    match = _SPAN_NAME.fullmatch(name)
    if match is None:
        return None
    number = int(match.group(1))
    return number if number <= MAX_SPAN else None


def find_spans(names: Iterable[str]) -> dict[int, str]:
    """Span number → folder name, for the span folders among `names` (other names are ignored).

    Raises:
        SpanError: two folders name the same span (`span-3` and `span-03`).
    """
    spans: dict[int, str] = {}
    for name in sorted(names):
        number = span_number(name)
        if number is None:
            continue
        if number in spans:
            raise SpanError(f"folders {spans[number]} and {name} are both span {number}; keep one of them")
        spans[number] = name
    return spans


def parse_policy(value: str | int) -> str | int:
    """A `data.spans` value as the executor receives it (a string parameter): `none`, `latest`, `all` or N ≥ 1.

    Raises:
        SpanError: anything else.
    """
    text = str(value).strip()
    if text in (NO_SPANS, LATEST, ALL):
        return text
    if text.isascii() and text.isdigit() and int(text) >= 1:  # `²`.isdigit(), and int(`٣`) is 3
        return int(text)
    raise SpanError(f"data.spans = {value!r}: expected {POLICY_HELP}")


def select_spans(spans: Iterable[int], policy: str | int) -> list[int]:
    """The spans a run reads, ascending.

    Args:
        spans: The span numbers present.
        policy: `latest`, `all` or a window size N (see the module docstring); not `none`.

    Raises:
        SpanError: no spans, or the policy is `none` or invalid.
    """
    present = sorted(set(spans))
    policy = parse_policy(policy)
    if policy == NO_SPANS:
        raise SpanError("data.spans is none: there are no spans to select")
    if not present:
        raise SpanError(f"data.spans is {policy} but there are no span folders (span-N)")
    if policy == ALL:
        return present
    window = 1 if policy == LATEST else int(policy)
    newest = present[-1]
    return [span for span in present if span >= newest - window + 1]


def inside_span(pattern: str) -> str:
    """`train/*` for `span-*/train/*`: a split's glob over every span (ImportExampleGen's split pattern) as the glob
    inside one span folder; a pattern not over the span folders is returned as it is."""
    head, _, rest = pattern.partition("/")
    return rest if head == SPAN_GLOB else pattern


def format_spans(spans: Iterable[int]) -> str:
    """`3,4,5`: how the Examples artifact records the spans it holds (custom property `spans`)."""
    return ",".join(str(span) for span in sorted(spans))


def parse_spans(text: str) -> list[int]:
    """The inverse of `format_spans`; an empty string is no spans."""
    return [int(part) for part in text.split(",") if part.strip()]
