"""Credentials as tfxp reads them, checked before use, read from files without blocking, and never shown.

A credential goes into an HTTP header (`Authorization: Bearer …`, `Cookie: …`). A line break in it would end the
header and start another, so http.client refuses it, with a ValueError that quotes the whole header, the token
with it, into the message and the traceback. So every credential is checked before any request
(`check_header_value`), and the error names where it came from and where the bad character is, never the value.

A token file (a projected service-account token, which the kubelet rotates) is read as a secret by
`read_secret_file`: through `foundation.bounded.read_file`, which opens it without blocking and checks the opened
file (a FIFO, a device or a socket put in its place would hang a plain `open` or `read` forever), refused unless it
is a regular file, read up to MAX_SECRET_FILE_BYTES within SECRET_READ_SECONDS (a stalled network file system), as
ASCII text. Errors are
raised `from None`, so no traceback carries what was read.

Example:
    token = read_secret_file(path, f"KF_PIPELINES_SA_TOKEN_PATH={path}", "point it at the projected token")
    check_header_value(token, f"the token file {path}", BEARER_TOKEN)
"""

from __future__ import annotations

import errno
import re
from pathlib import Path

from foundation.bounded import TooLargeError, read_file
from foundation.deadline import with_deadline
from foundation.errors import TfxpError

# A bearer token (RFC 6750 b64token) or a cookie header value as HTTP allows one: printable ASCII, no line break,
# no control character. A projected service-account token is about 1 KB.
BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
COOKIE_VALUE = re.compile(r"[\x20-\x7e]+")
MAX_SECRET_FILE_BYTES = 64 * 1024
SECRET_READ_SECONDS = 5.0


class CredentialError(TfxpError, ValueError):
    """A credential that cannot be read or sent; the message never holds its value."""


class CredentialFileMissingError(CredentialError):
    """The credential file does not exist."""


def read_secret_file(
    path: Path, where: str, fix: str, *, limit: int = MAX_SECRET_FILE_BYTES, deadline: float = SECRET_READ_SECONDS
) -> str:
    """The text in `path`, stripped: a regular file of at most `limit` bytes, read within `deadline` seconds.

    Args:
        path: the file.
        where: how messages name it, e.g. `KF_PIPELINES_SA_TOKEN_PATH=/var/run/secrets/.../token`.
        fix: what the user should do, ending each message.

    Raises:
        CredentialFileMissingError: `path` does not exist.
        CredentialError: not a readable regular file, larger than `limit`, not read in time, or not ASCII text.
    """
    late = CredentialError(f"{where} could not be read within {deadline:g} s (a stalled file system?); {fix}")
    try:
        data = with_deadline(lambda: read_file(path, limit, where, fix), deadline, late)
    except TooLargeError:
        raise CredentialError(f"{where} is larger than a token ({limit // 1024} KiB at most); {fix}") from None
    except FileNotFoundError as error:
        raise CredentialFileMissingError(f"{where} is not a readable file ({error.strerror}); {fix}") from None
    except OSError as error:
        # read_file refuses a directory (EISDIR) and a FIFO, device or socket (EINVAL) on the opened file.
        if error.errno in (errno.EISDIR, errno.EINVAL):
            raise CredentialError(f"{where} is not a regular file; {fix}") from None
        raise CredentialError(f"{where} is not a readable file ({error.strerror}); {fix}") from None
    try:
        return data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise CredentialError(f"{where} is not ASCII text, so not a token; {fix}") from None


def check_header_value(value: str, where: str, pattern: re.Pattern[str]) -> None:
    """Refuses a credential an HTTP header cannot carry, without ever showing it.

    Args:
        value: the credential.
        where: how messages name its source, e.g. `TFXP_KFP_TOKEN`.
        pattern: what the whole value must match (`BEARER_TOKEN`, `COOKIE_VALUE`).

    Raises:
        CredentialError: names `where`, the position and the kind of the first bad character, never the value.
    """
    if not value:
        raise CredentialError(f"{where} is empty; set a token or unset it")
    if pattern.fullmatch(value):
        return
    found = next(((i, c) for i, c in enumerate(value) if not pattern.fullmatch(c) and c != "="), None)
    if found is None:  # only a padding `=` out of place
        found = (value.index("="), "=")
    position, bad = found
    if bad in "\r\n":
        kind = "a line break"
    elif bad.isspace():
        kind = "a space"
    else:
        kind = f"character U+{ord(bad):04X}"
    raise CredentialError(
        f"{where} holds {kind} at position {position + 1} of {len(value)}, which an HTTP header cannot carry "
        "(the value is not shown); copy the token again without it"
    )
