"""Credentials and the host of the Kubeflow Pipelines API, and the errors that name them.

Credentials come only from the environment, never from flags (which land in shell history):

    TFXP_KFP_TOKEN              a bearer token (e.g. `gcloud auth print-identity-token`, a Dex ID token)
    KF_PIPELINES_SA_TOKEN_PATH  a file with a projected service-account token (kfp's own variable;
                                re-read before every request, so the kubelet's refreshes apply)
    TFXP_KFP_COOKIE             a session cookie for an auth proxy, e.g. `authservice_session=...`

They go to the host given and nowhere else: a redirect to another origin (scheme, host and port) is refused, not
followed, because urllib would resend `Authorization` and `Cookie` there (an auth proxy that bounces to a login
host, or a hostile one). kfp.Client's own calls go through urllib3, which drops those headers on a redirect to
another host (`urllib3.util.Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT`).

Example:
    auth = KfpAuth.from_env()
    host = check_host("http://localhost:8080")
    check_api(host, auth, timeout=60)  # names a refused token or a login page instead of kfp's bare timeout
"""

from __future__ import annotations

import json
import os
import re
import stat
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.deadline import with_deadline
from pipeline.kubeflow.client.runs import NoAnswerError, SubmitError

TOKEN_ENV = "TFXP_KFP_TOKEN"
COOKIE_ENV = "TFXP_KFP_COOKIE"
TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
UI_ENDPOINT_ENV = "KF_PIPELINES_UI_ENDPOINT"

# A bearer token (RFC 6750 b64token) or cookie header value as HTTP allows one: printable ASCII, no line break, no
# control character (a newline would end the header and start another). A projected token is ~1 KB.
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_COOKIE = re.compile(r"[\x20-\x7e]+")
MAX_TOKEN_FILE_BYTES = 64 * 1024

AUTH_HINT = f"set {TOKEN_ENV}, {TOKEN_PATH_ENV} or {COOKIE_ENV} in the environment"
HOST_HINT = (
    "check --host; for a port-forward run `kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80` "
    "and pass --host http://localhost:8080"
)


@dataclass(frozen=True)
class KfpAuth:
    """Credentials for the KFP API; `repr` never shows the secrets.

    Attributes:
        token: Bearer token.
        token_path: File holding a service-account token.
        cookie: Cookie header value.
    """

    token: str | None = field(default=None, repr=False)
    token_path: Path | None = None
    cookie: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KfpAuth:
        """Reads the credentials from the environment (see the module docstring).

        Raises:
            SubmitError: both a token and a token path are set, or the token file cannot be read.
        """
        environ = os.environ if environ is None else environ
        token = environ.get(TOKEN_ENV, "").strip() or None
        path_value = environ.get(TOKEN_PATH_ENV, "").strip()
        cookie = environ.get(COOKIE_ENV, "").strip() or None
        if token and path_value:
            raise SubmitError(f"both {TOKEN_ENV} and {TOKEN_PATH_ENV} are set; unset one of them")
        token_path = Path(path_value) if path_value else None
        if token is not None:
            check_secret(token, TOKEN_ENV, _TOKEN)
        if cookie is not None:
            check_secret(cookie, COOKIE_ENV, _COOKIE)
        if token_path is not None:
            check_secret(read_token_file(token_path), f"the token file {token_path} ({TOKEN_PATH_ENV})", _TOKEN)
        return cls(token=token, token_path=token_path, cookie=cookie)

    def describe(self) -> str:
        """Which credentials are in use, without their values."""
        sources = []
        if self.token:
            sources.append(f"a bearer token from {TOKEN_ENV}")
        if self.token_path:
            sources.append(f"the token file {self.token_path} ({TOKEN_PATH_ENV})")
        if self.cookie:
            sources.append(f"a cookie from {COOKIE_ENV}")
        return "sent " + " and ".join(sources) if sources else "sent no credentials"

    def headers(self) -> dict[str, str]:
        """HTTP headers carrying the credentials (the token file is read now).

        Raises:
            OSError: the token file cannot be read.
        """
        headers = {}
        token = self.token
        if token is None and self.token_path is not None:
            token = read_token_file(self.token_path)  # projected tokens rotate: read it for each call
            check_secret(token, f"the token file {self.token_path} ({TOKEN_PATH_ENV})", _TOKEN)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if self.cookie:
            headers["Cookie"] = self.cookie
        return headers

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `kfp.Client`."""
        kwargs: dict[str, Any] = {}
        if self.token:
            kwargs["existing_token"] = self.token
        if self.token_path:
            from kfp.client.set_volume_credentials import ServiceAccountTokenVolumeCredentials

            kwargs["credentials"] = ServiceAccountTokenVolumeCredentials(str(self.token_path))
        if self.cookie:
            kwargs["cookies"] = self.cookie
        return kwargs

    def token_file_error(self, error: OSError) -> SubmitError:
        """The error for a token file that cannot be read."""
        return SubmitError(f"cannot read the token file {self.token_path} ({TOKEN_PATH_ENV}): {error}")


def read_token_file(path: Path) -> str:
    """The token in `path`, stripped: a regular file of at most MAX_TOKEN_FILE_BYTES (a FIFO or a device would
    block or never end; only a regular file is opened).

    Raises:
        SubmitError: not a readable regular file, or too large.
    """
    fix = (
        "point it at the projected service-account token (e.g. /var/run/secrets/kubeflow/pipelines/token) or unset "
        f"{TOKEN_PATH_ENV}"
    )
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise SubmitError(f"{TOKEN_PATH_ENV}={path} is not a regular file; {fix}")
        if info.st_size > MAX_TOKEN_FILE_BYTES:
            raise SubmitError(
                f"{TOKEN_PATH_ENV}={path} holds {info.st_size} bytes, more than a token "
                f"({MAX_TOKEN_FILE_BYTES // 1024} KiB at most); {fix}"
            )
        with path.open("rb") as handle:
            data = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as error:
        raise SubmitError(f"{TOKEN_PATH_ENV}={path} is not a readable file ({error.strerror}); {fix}") from None
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise SubmitError(f"{TOKEN_PATH_ENV}={path} grew past {MAX_TOKEN_FILE_BYTES // 1024} KiB; {fix}")
    try:
        return data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise SubmitError(f"{TOKEN_PATH_ENV}={path} is not ASCII text, so not a token; {fix}") from None


def check_secret(value: str, where: str, pattern: re.Pattern[str]) -> None:
    """Refuses a credential HTTP cannot carry, without ever showing it.

    Raises:
        SubmitError: names `where`, the position and the kind of the first bad character, never the value.
    """
    if not value:
        raise SubmitError(f"{where} is empty; set a token or unset it")
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
    raise SubmitError(
        f"{where} holds {kind} at position {position + 1} of {len(value)}, which an HTTP header cannot carry "
        "(the value is not shown); copy the token again without it"
    )


def check_host(host: str) -> str:
    """`host` without a trailing slash.

    Raises:
        SubmitError: `host` has no http(s) scheme, or is not a URL with a host (and a port 1-65535 if any).
    """
    if not host.startswith(("http://", "https://")):
        raise SubmitError(f"--host {host!r} has no scheme; use http://… or https://…, e.g. http://localhost:8080")
    try:
        parts = urllib.parse.urlsplit(host)
        has_host = bool(parts.hostname) and (parts.port is None or parts.port > 0)  # .port checks 0-65535
    except ValueError as error:  # e.g. "Invalid IPv6 URL" for http://[::1
        raise SubmitError(
            f"--host {host!r} is not a URL ({error}); e.g. http://localhost:8080 or http://[::1]:8080"
        ) from None
    if not has_host:
        raise SubmitError(f"--host {host!r} names no host or port 1-65535; e.g. http://localhost:8080")
    return host.rstrip("/")


def ui_url(host: str, page: str, environ: Mapping[str, str] | None = None) -> str:
    """A page of the KFP UI, e.g. `runs/details/<id>`; like kfp.Client, `KF_PIPELINES_UI_ENDPOINT` overrides the
    host."""
    environ = os.environ if environ is None else environ
    base = environ.get(UI_ENDPOINT_ENV) or host
    return f"{base.rstrip('/')}/#/{page}"


def run_url(host: str, run_id: str, environ: Mapping[str, str] | None = None) -> str:
    """The run's page in the KFP UI (see `ui_url`)."""
    return ui_url(host, f"runs/details/{run_id}", environ)


def _while(doing: str) -> str:
    return f" while {doing}" if doing else ""


def no_answer_error(host: str, seconds: float, doing: str = "") -> NoAnswerError:
    """The error for a host that did not answer within `seconds` (while `doing`, when given)."""
    return NoAnswerError(
        f"Kubeflow Pipelines at {host} did not answer within {seconds:g} s{_while(doing)}; {HOST_HINT}; "
        "a slow server needs a larger --request-timeout"
    )


def unreachable_error(host: str, reason: object, doing: str = "") -> SubmitError:
    """The error for a host that cannot be reached (refused, unknown name, reset)."""
    return SubmitError(f"cannot reach Kubeflow Pipelines at {host}{_while(doing)} ({reason}); {HOST_HINT}")


def api_error(host: str, auth: KfpAuth, status: int, doing: str, detail: str = "") -> SubmitError:
    """The error for an HTTP error status: refused credentials (naming those sent), no KFP API, or the server's
    own message."""
    if status in (401, 403):
        return SubmitError(
            f"Kubeflow Pipelines at {host} refused the request (HTTP {status}) while {doing}; "
            f"tfxp {auth.describe()}; {AUTH_HINT}"
        )
    if status == 404:
        return SubmitError(f"{host} answered HTTP 404 while {doing}: no KFP v2beta1 API there; {HOST_HINT}")
    return SubmitError(f"Kubeflow Pipelines at {host} answered HTTP {status} while {doing}: {detail}")


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, lower-case, with the scheme's default port filled in: what a redirect may not
    change for credentials to follow it."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


class RedirectRefusedError(SubmitError):
    """The server redirected a request that carries credentials to another origin."""


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects within the request's origin only; refuses one to another origin (`RedirectRefusedError`),
    so the request's `Authorization` and `Cookie` headers never reach a host they were not meant for."""

    def __init__(self, option: str = "--host") -> None:
        self.option = option

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        target = urllib.parse.urljoin(req.full_url, newurl)
        if origin(target) != origin(req.full_url):
            fp.close()
            raise RedirectRefusedError(
                f"{req.full_url} answered HTTP {code}, a redirect to {target}, another origin; tfxp sends the "
                f"KFP credentials only to the {self.option} given, so it does not follow: if {target} is the KFP "
                f"API, pass its address as {self.option}; if it is a login page, the credentials were refused "
                f"({AUTH_HINT})"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _fetch(url: str, headers: Mapping[str, str], timeout: float) -> bytes:
    # Like kfp's own HTTP client, ignore *_proxy variables; redirects stay within the origin.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), SameOriginRedirects())
    with opener.open(urllib.request.Request(url, headers=dict(headers)), timeout=timeout) as response:
        body: bytes = response.read(1 << 16)
    return body


def check_api(host: str, auth: KfpAuth, timeout: float) -> dict[str, Any]:
    """Asks the API's health endpoint, with the credentials, before kfp.Client does.

    kfp.Client retries a failing health check for 25 s and then reports a bare timeout; this names
    the cause instead: connection refused, no KFP API at that address, refused credentials, or an
    auth proxy's login page.

    Args:
        host: The API address from `check_host`.
        auth: The credentials to send (to `host` only: a redirect elsewhere is refused).
        timeout: Seconds the whole call may take (`--request-timeout`), however slowly the server trickles.

    Returns:
        The health endpoint's JSON object (`commit_sha`, `tag_name`, `multi_user`, ...; see
        `pipeline.kubeflow.server.ServerInfo`), or `{}` when it answers JSON that is not an object.

    Raises:
        SubmitError: the cause and the fix (`NoAnswerError` when the host is silent).
    """
    url = f"{host}/apis/v2beta1/healthz"
    try:
        headers = auth.headers()
    except OSError as error:
        raise auth.token_file_error(error) from None
    try:
        body = with_deadline(lambda: _fetch(url, headers, timeout), timeout, no_answer_error(host, timeout))
    except urllib.error.HTTPError as error:
        raise api_error(host, auth, error.code, f"checking {url}", error.reason) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, TimeoutError):
            raise no_answer_error(host, timeout) from None
        raise unreachable_error(host, reason) from None
    try:
        answer = json.loads(body)
    except ValueError:
        raise SubmitError(
            f"{url} did not answer with JSON, so {host} is not the KFP API (an auth proxy's login page?); "
            f"tfxp {auth.describe()}; {AUTH_HINT}, or {HOST_HINT}"
        ) from None
    return answer if isinstance(answer, dict) else {}
