"""Credentials and the host of the Kubeflow Pipelines API, and the errors that name them.

Credentials come only from the environment, never from flags (which land in shell history):

    TFXP_KFP_TOKEN              a bearer token (e.g. `gcloud auth print-identity-token`, a Dex ID token)
    KF_PIPELINES_SA_TOKEN_PATH  a file with a projected service-account token (kfp's own variable;
                                re-read before every request, so the kubelet's refreshes apply)
    TFXP_KFP_COOKIE             a session cookie for an auth proxy, e.g. `authservice_session=...`

They are checked before any request and on every read of the token file (`foundation.credentials`: no line break
or control character, a regular file read without blocking, 64 KiB at most), and never shown: not in `repr`, not
in an error (an answer that echoes one gets it replaced, `KfpAuth.redact`), not in a traceback. kfp.Client reads
the token file through `TokenFileCredentials`, so its own calls get the same checks.

They go to the host given and nowhere else: a redirect to another origin (scheme, host and port) is refused, not
followed (`foundation.redirects`), for tfxp's health check and for kfp.Client's calls alike
(`pipeline.kubeflow.client.connection` guards the client's urllib3 pool), because the request would carry the
credentials (urllib) or the body (urllib3: the spec with `kubeflow.notify_url`) there.

Example:
    auth = KfpAuth.from_env()
    host = check_host("http://localhost:8080")
    check_api(host, auth, timeout=60)  # names a refused token or a login page instead of kfp's bare timeout
"""

from __future__ import annotations

import contextlib
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation import redirects
from foundation.bounded import parse_json, read_capped, size_text
from foundation.credentials import (
    BEARER_TOKEN,
    COOKIE_VALUE,
    CredentialError,
    check_header_value,
    read_secret_file,
)
from foundation.deadline import with_deadline
from pipeline.kubeflow.client.runs import NoAnswerError, SubmitError
from serving.address import parse_base_url

TOKEN_ENV = "TFXP_KFP_TOKEN"
COOKIE_ENV = "TFXP_KFP_COOKIE"
TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
UI_ENDPOINT_ENV = "KF_PIPELINES_UI_ENDPOINT"


AUTH_HINT = f"set {TOKEN_ENV}, {TOKEN_PATH_ENV} or {COOKIE_ENV} in the environment"
# The most tfxp reads of the health answer (`{"commit_sha": …, "tag_name": …, "multi_user": …}`).
MAX_HEALTH_BYTES = 64 * 1024
HOST_FORM = "http://HOST:PORT, e.g. http://localhost:8080"
PORT_FORWARD_HINT = (
    "for a port-forward run `kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80` and pass --host "
    "http://localhost:8080"
)
HOST_HINT = f"check --host; {PORT_FORWARD_HINT}"


_TOKEN_FILE_FIX = (
    "point it at the projected service-account token (e.g. /var/run/secrets/kubeflow/pipelines/token) or unset "
    f"{TOKEN_PATH_ENV}"
)


def _checked(value: str, where: str, pattern: Any) -> None:
    """`check_header_value` with the KFP client's error type."""
    try:
        check_header_value(value, where, pattern)
    except CredentialError as error:
        raise SubmitError(str(error)) from None


@dataclass(frozen=True)
class KfpAuth:
    """Credentials for the KFP API, checked when made; `repr` never shows the secrets.

    Attributes:
        token: Bearer token.
        token_path: File holding a service-account token (read, and checked, before every request).
        cookie: Cookie header value.

    Raises:
        SubmitError: the token or the cookie holds what an HTTP header cannot carry (the value is not shown).
    """

    token: str | None = field(default=None, repr=False)
    token_path: Path | None = None
    cookie: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.token is not None:
            _checked(self.token, "the bearer token", BEARER_TOKEN)
        if self.cookie is not None:
            _checked(self.cookie, "the cookie", COOKIE_VALUE)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KfpAuth:
        """Reads the credentials from the environment (see the module docstring).

        Raises:
            SubmitError: both a token and a token path are set, a credential an HTTP header cannot carry, or the
                token file cannot be read.
        """
        environ = os.environ if environ is None else environ
        token = environ.get(TOKEN_ENV, "").strip() or None
        path_value = environ.get(TOKEN_PATH_ENV, "").strip()
        cookie = environ.get(COOKIE_ENV, "").strip() or None
        if token and path_value:
            raise SubmitError(f"both {TOKEN_ENV} and {TOKEN_PATH_ENV} are set; unset one of them")
        if token is not None:
            _checked(token, TOKEN_ENV, BEARER_TOKEN)
        if cookie is not None:
            _checked(cookie, COOKIE_ENV, COOKIE_VALUE)
        auth = cls(token=token, token_path=Path(path_value) if path_value else None, cookie=cookie)
        auth.file_token()  # a token file that cannot be used stops the command before any request
        return auth

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

    def file_token(self) -> str | None:
        """The token in `token_path`, read now (projected tokens rotate) and checked; None without a token path.

        Raises:
            SubmitError: not a small regular file, not read in time, or not a token an HTTP header can carry.
        """
        if self.token_path is None:
            return None
        try:
            token = read_secret_file(self.token_path, f"{TOKEN_PATH_ENV}={self.token_path}", _TOKEN_FILE_FIX)
        except CredentialError as error:
            raise SubmitError(str(error)) from None
        _checked(token, f"the token file {self.token_path} ({TOKEN_PATH_ENV})", BEARER_TOKEN)
        return token

    def headers(self) -> dict[str, str]:
        """HTTP headers carrying the credentials (the token file is read now).

        Raises:
            SubmitError: as `file_token`.
        """
        headers = {}
        token = self.token or self.file_token()
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
            kwargs["credentials"] = TokenFileCredentials(self)
        if self.cookie:
            kwargs["cookies"] = self.cookie
        return kwargs

    def redact(self, text: str) -> str:
        """`text` with every credential in it replaced (`<token>`, `<cookie>`): for what a server answered."""
        secrets = {self.token: "<token>"}
        if self.token_path is not None:
            with contextlib.suppress(SubmitError):  # a file that cannot be read now: its token is not in `text`
                secrets[self.file_token()] = "<token>"
        for pair in (self.cookie or "").split(";"):  # each cookie's value (`name=value; other=value`)
            secrets[pair.split("=", 1)[-1].strip()] = "<cookie>"
        for secret, placeholder in secrets.items():
            if secret and len(secret) >= 4:  # shorter is no secret, and would blot out ordinary words
                text = text.replace(secret, placeholder)
        return text


class TokenFileCredentials:
    """kfp's credentials interface (`kfp.client.token_credentials_base.TokenCredentialsBase`, duck-typed) over
    `KfpAuth.file_token`: kfp calls `refresh_api_key_hook` before each request, and its own reader
    (`read_token_from_file`: a plain `open().read()`) would block on a FIFO and send a token with a line break."""

    def __init__(self, auth: KfpAuth) -> None:
        self._auth = auth

    def refresh_api_key_hook(self, config: Any) -> None:
        """Puts the file's token, read and checked now, into `config.api_key` (kfp_server_api's Configuration)."""
        config.api_key["authorization"] = self._auth.file_token()


def check_host(host: str, what: str = "--host") -> str:
    """`host` without a trailing slash (`serving.address.parse_base_url`: no message shows its user info or query).

    Args:
        host: What the user typed.
        what: Names the value in messages; '' = the value alone.

    Raises:
        SubmitError: `host` has no http(s) scheme, a control character or whitespace, user info (the credentials
            come from the environment), a query or fragment, or is not a URL with a host (and a port 1-65535 if any).
    """
    credentials = f"tfxp sends KFP credentials only from the environment ({AUTH_HINT}), never from --host"
    try:
        return parse_base_url(host, what, HOST_FORM, credentials)
    except ValueError as error:
        raise SubmitError(str(error)) from None


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


class RedirectRefusedError(SubmitError):
    """The server redirected a request that carries credentials to another origin."""


def redirect_refused(error: redirects.RedirectRefusedError, option: str = "--host") -> RedirectRefusedError:
    """`foundation.redirects`' refusal, with what it means for the KFP API and what to do."""
    target = redirects.shown(error.target)
    return RedirectRefusedError(
        f"{redirects.shown(error.url)} answered HTTP {error.status}, a redirect to {target}, another origin; tfxp "
        f"sends the KFP credentials only to the {option} given, and no request elsewhere, so it does not follow: "
        f"if {target} is the KFP API, pass its address as {option}; if it is a login page, the credentials were "
        f"refused ({AUTH_HINT})"
    )


def _fetch(url: str, headers: Mapping[str, str], timeout: float) -> bytes:
    # Like kfp's own HTTP client, ignore *_proxy variables; redirects stay within the origin.
    too_large = SubmitError(
        f"{url} answered with more than {size_text(MAX_HEALTH_BYTES)}, not the KFP health answer (a few hundred "
        f"bytes); {HOST_HINT}"
    )
    with redirects.open_url(urllib.request.Request(url, headers=dict(headers)), timeout, proxies=False) as response:
        return read_capped(response.read, MAX_HEALTH_BYTES, lambda: too_large)


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
    headers = auth.headers()
    try:
        body = with_deadline(lambda: _fetch(url, headers, timeout), timeout, no_answer_error(host, timeout))
    except redirects.RedirectRefusedError as error:
        raise redirect_refused(error) from None
    except urllib.error.HTTPError as error:
        raise api_error(host, auth, error.code, f"checking {url}", auth.redact(str(error.reason))) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, TimeoutError):
            raise no_answer_error(host, timeout) from None
        raise unreachable_error(host, reason) from None
    try:
        answer = parse_json(body)
    except ValueError:
        raise SubmitError(
            f"{url} did not answer with JSON, so {host} is not the KFP API (an auth proxy's login page?); "
            f"tfxp {auth.describe()}; {AUTH_HINT}, or {HOST_HINT}"
        ) from None
    return answer if isinstance(answer, dict) else {}
