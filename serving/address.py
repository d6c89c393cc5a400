"""Server addresses as users type them: ports, gRPC `HOST:PORT` targets and REST base URLs, checked in one place.

Every port a user gives (a server's own ports, a client's target) goes through `check_port`, so 70000 is an
error rather than port 4464 (70000 mod 65536, what the socket layer would silently use).

Example:
    parse_grpc_target("localhost:8500")       # ("localhost", 8500)
    parse_grpc_target("[::1]:8500")           # ("::1", 8500)
    parse_rest_url("http://localhost:8501/")  # "http://localhost:8501"
"""

from __future__ import annotations

import re
import urllib.parse

from foundation import redirects

MIN_PORT, MAX_PORT = 1, 65535
GRPC_FORM = "HOST:PORT, e.g. localhost:8500 or [::1]:8500"
REST_FORM = "http://HOST:PORT, e.g. http://localhost:8501"
_HOST_PORT = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.%\w]+)\]|(?P<host>[^\s:/\[\]@]+)):(?P<port>[^:]*)")


def is_url_address(text: str) -> bool:
    """Whether a server address is written as a URL (`http://host:port`) rather than `HOST:PORT`.

    An endpoint's form, not a path's location: whether a path is on a bucket is `foundation.paths.is_remote`.
    """
    return "://" in text


def _subject(what: str, value: object) -> str:
    return f"{what} {value!r}" if what else repr(value)


def check_port(port: int, what: str = "port", allow_zero: bool = False) -> int:
    """`port` if it is a TCP port number (1-65535; 0 too with `allow_zero`, meaning "pick a free one").

    Args:
        port: The number to check.
        what: Names the value in the message, e.g. `ServerOptions.rest_port`; '' = the value alone.
        allow_zero: Accept 0, where the caller binds a free port for it.

    Returns:
        `port`, unchanged.

    Raises:
        ValueError: naming `what`, the value and the valid range.
    """
    low = 0 if allow_zero else MIN_PORT
    if isinstance(port, bool) or not isinstance(port, int) or not low <= port <= MAX_PORT:
        zero = " (0 = pick a free port)" if allow_zero else ""
        raise ValueError(f"{_subject(what, port)} is not a TCP port: use {low}-{MAX_PORT}{zero}")
    return port


def parse_grpc_target(text: str, what: str = "gRPC target") -> tuple[str, int]:
    """The host and port of a gRPC target `HOST:PORT` (`[IPV6]:PORT` for IPv6 addresses).

    Args:
        text: What the user typed.
        what: Names the value in messages, e.g. `gRPC target`; '' = the value alone.

    Returns:
        (host, port); an IPv6 host without its brackets.

    Raises:
        ValueError: no host, no port, a port outside 1-65535, or a URL (`http://...`) instead of `HOST:PORT`.
    """
    subject = _subject(what, text)
    if is_url_address(text):
        raise ValueError(f"{subject} is a URL, but a gRPC target has no scheme: use {GRPC_FORM}")
    match = _HOST_PORT.fullmatch(text)
    if match is None:
        raise ValueError(f"{subject} is not HOST:PORT: use {GRPC_FORM}")
    digits = match.group("port")
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{subject} has no numeric port: use {GRPC_FORM}")
    if not MIN_PORT <= int(digits) <= MAX_PORT:
        raise ValueError(f"{subject} has port {int(digits)}, not a TCP port ({MIN_PORT}-{MAX_PORT}): use {GRPC_FORM}")
    return match.group("ipv6") or match.group("host"), int(digits)


def host_port(host: str, port: int) -> str:
    """`host:port`, with brackets around an IPv6 host (the form `parse_grpc_target` reads)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def rest_base_url(host: str, port: int) -> str:
    """The REST base URL of a server listening on `host:port` (the form `parse_rest_url` reads)."""
    return f"http://{host_port(host, port)}"


def shown_url(text: str) -> str:
    """`text`, a URL a user typed, as messages show it: quoted with its control characters escaped (`repr`), and
    without user info, query and fragment when it has any (where URLs carry passwords and tokens,
    `foundation.redirects.shown`)."""
    if not any(mark in text for mark in "@?#"):
        return repr(text)
    try:
        return repr(redirects.shown(text))
    except ValueError:  # not even a URL (an unclosed `[`): cut the parts out by hand
        head, separator, rest = text.rpartition("://")
        return repr(head + separator + re.split("[?#]", rest.rpartition("@")[2], maxsplit=1)[0])


def parse_rest_url(text: str, what: str = "REST URL") -> str:
    """A REST base URL `http(s)://HOST[:PORT][/PREFIX]`, without a trailing slash (`parse_base_url` for TF
    Serving's REST API)."""
    return parse_base_url(text, what, REST_FORM, "TF Serving's REST API takes no credentials")


def parse_base_url(text: str, what: str, form: str, credentials: str) -> str:
    """A base URL `http(s)://HOST[:PORT][/PREFIX]` of an HTTP API, without a trailing slash.

    No message shows the URL's user info, query or fragment (`shown_url`): a password typed there stays off the
    screen and out of logs.

    Args:
        text: What the user typed.
        what: Names the value in messages, e.g. `REST URL`; '' = the value alone.
        form: The form to use, with an example, for messages (`REST_FORM`).
        credentials: Where the API's credentials go instead of the URL, for the message about user info.

    Returns:
        The URL, normalised: no trailing `/`.

    Raises:
        ValueError: a control character or whitespace, no or another scheme (`127.0.0.1:8501`, `ftp://...`), no
            host, a port outside 1-65535, a user, query or fragment, or a malformed URL (e.g. an unclosed `[` of
            an IPv6 address).
    """
    subject = f"{what} {shown_url(text)}" if what else shown_url(text)
    odd = next((character for character in text if not character.isprintable() or character.isspace()), None)
    if odd is not None:  # checked first: urlsplit drops tabs and line breaks, http.client refuses the rest
        raise ValueError(f"{subject} holds {odd!r}; a URL has no control characters or whitespace: use {form}")
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as error:  # e.g. "Invalid IPv6 URL"
        raise ValueError(f"{subject} is not a URL ({error}): use {form}") from None
    if parts.scheme not in ("http", "https") or not text.lower().startswith(f"{parts.scheme}://"):
        raise ValueError(f"{subject} is not an http:// or https:// URL: use {form}")
    if "@" in parts.netloc:
        raise ValueError(f"{subject} (shown without them) carries a user name or password; {credentials}: use {form}")
    if not parts.hostname:
        raise ValueError(f"{subject} has no host: use {form}")
    if "%" in parts.hostname and not parts.netloc.startswith("["):  # `%25` is only an IPv6 zone's (RFC 6874)
        raise ValueError(f"{subject} has a percent-encoded host; a host is letters, digits, '-' and '.': use {form}")
    if parts.query or parts.fragment:
        raise ValueError(f"{subject} (shown without them) has a query or fragment; a base URL has neither: use {form}")
    try:
        port = parts.port
    except ValueError:  # "Port out of range 0-65535", "Port could not be cast to integer value"
        port = -1
    if port is not None and not MIN_PORT <= port <= MAX_PORT:
        port_text = parts.netloc.rsplit(":", 1)[-1]
        raise ValueError(f"{subject} has port {port_text}, not a TCP port ({MIN_PORT}-{MAX_PORT}): use {form}")
    return text.rstrip("/")
