"""Container image references (`registry.example.com:5000/team/tfxp:0.1.0@sha256:…`), checked with the grammar
container runtimes and registries parse them with.

The grammar is distribution/reference's (github.com/distribution/reference, commit 0965666, `regexp.go`): path
components lines 44-53 and 125-134, the domain lines 55-108, the tag line 68, the digest line 81, the whole
reference line 142; `reference.go` lines 230-270 add that the path is at most 255 characters and that the digest
is one go-digest knows (`sha256`, `sha384`, `sha512` with as many lower-case hex digits). Go's `\\w` is ASCII.

A reference that passes holds no space, quote, `$`, backtick, `;` or leading `-`, so it cannot run a command or
become a flag where a script or a manifest pastes it.

Example:
    parse_image("tensorflow/serving:2.19.1").tag   # '2.19.1'
    check_image("x --privileged", key="serving.cpu_image")  # ImageError naming the key, with examples
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

from foundation.errors import TfxpError

_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALPHANUMERIC}(?:{_SEPARATOR}{_ALPHANUMERIC})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9A-Fa-f]{32,}"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
# The anchored name of regexp.go:140: the first component is the domain only when what follows has a `/`.
_ANCHORED_NAME = re.compile(rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)", re.ASCII)
MAX_PATH_LENGTH = 255
# go-digest's registered algorithms and the length of their hex encoding (lower-case only).
DIGEST_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
EXAMPLES = "e.g. `tensorflow/serving:2.19.1`, `registry.example.com:5000/team/tfxp:0.1.0` or `repo@sha256:<64 hex>`"


class ImageError(TfxpError, ValueError):
    """Not an image reference; the message names the key and shows valid ones."""


@dataclass(frozen=True)
class ImageReference:
    """Attributes:
    domain: The registry, e.g. `registry.example.com:5000`; "" for Docker Hub (a first component without
        `.`, `:` or capitals that is not `localhost` is part of the path, as Docker reads it).
    path: The repository path, e.g. `tensorflow/serving`.
    tag: The tag, "" when none.
    digest: `algorithm:hex`, "" when none.
    """

    domain: str
    path: str
    tag: str
    digest: str


_DIGEST_ADVICE = (
    "is not sha256 (or sha384, sha512) and as many lower-case hex digits; copy it from "
    "`docker buildx imagetools inspect IMAGE:TAG` (the Digest line)"
)


def _problem(text: str) -> str | None:
    if not text.strip():
        return "the image is empty"
    match = REFERENCE.fullmatch(text)
    if match is None:
        lowered = text.lower()
        if lowered != text and REFERENCE.fullmatch(lowered):
            return f"{text!r} has upper-case letters in its repository path, which registries refuse"
        before, at, digest = text.rpartition("@")
        if at and REFERENCE.fullmatch(before) and re.fullmatch(r"[a-z0-9]+:\w*", digest, re.ASCII):
            return f"the digest {digest!r} of {text!r} {_DIGEST_ADVICE}"
        return (
            f"{text!r} is not an image reference: `[registry[:port]/]path[:tag][@digest]` with a lower-case path "
            "of letters, digits and single `.`, `_`, `__` or `-` between them, and no spaces, quotes or shell "
            "characters"
        )
    anchored = _ANCHORED_NAME.fullmatch(match["name"])
    path = anchored["path"] if anchored else match["name"]
    if len(path) > MAX_PATH_LENGTH:
        return f"the repository path of {text!r} is longer than {MAX_PATH_LENGTH} characters"
    if match["digest"]:
        algorithm, _, encoded = match["digest"].partition(":")
        length = DIGEST_LENGTHS.get(algorithm)
        if length is None or not re.fullmatch(f"[0-9a-f]{{{length}}}", encoded):
            return f"the digest {match['digest']!r} of {text!r} {_DIGEST_ADVICE}"
    return None


def parse_image(text: str) -> ImageReference:
    """`text` split into domain, path, tag and digest.

    Raises:
        ImageError: not a reference the grammar accepts (the message says why).
    """
    problem = _problem(text)
    if problem:
        raise ImageError(problem)
    match = REFERENCE.fullmatch(text)
    assert match is not None  # _problem checked it
    first, slash, rest = match["name"].partition("/")
    # Which first component names a registry: `normalize.go` lines 146-180 (splitDockerDomain).
    is_domain = slash and (first == "localhost" or any(c in first for c in ".:") or first.lower() != first)
    domain, path = (first, rest) if is_domain else ("", match["name"])
    return ImageReference(domain=domain, path=path, tag=match["tag"] or "", digest=match["digest"] or "")


def check_image(text: str, key: str = "") -> str:
    """`text` when it is an image reference (also the validator of `Image` config fields, whose errors name the
    key themselves).

    Raises:
        ImageError: says why, names `key` when given, and shows valid references.
    """
    problem = _problem(text)
    if problem:
        raise ImageError(f"{key + ': ' if key else ''}{problem}; {EXAMPLES}")
    return text


# A config field holding an image reference.
Image = Annotated[str, AfterValidator(check_image)]
