"""Redirects followed within the origin only, the one rule every outgoing HTTP call of tfxp keeps.

A request carries what is meant for one server: credentials (a KFP token or cookie, the pod's service-account
token), a body (a compiled spec holding `kubeflow.notify_url`, a run notice, the images of a predict request), a
query. The HTTP libraries tfxp sends with follow a redirect wherever it points, and for 307 and 308 send the body
again there; urllib3 and requests drop `Authorization` and `Cookie` when the host changes, but not the body, and
urllib drops neither. So a redirect to another origin (scheme, host and port; RFC 6454) is refused before anything
is sent there (`RedirectRefusedError`), and one within the origin is followed, the body with it for 307 and 308,
as RFC 9110 says (303, and 301/302 after a POST for urllib, become a GET without the body).

The rule is `check_redirect`; each library gets it at its own hook:

- urllib (the KFP health check, the run notice, the rollout's metric and Prometheus reads): `open_url`;
- urllib3 (under `kfp.Client` and the kubernetes client): `guard_pool(pool_manager)`;
- requests (the serving REST client, the benchmarks): `guard_session(session)`.

aiohttp (the load test) follows no redirect at all (`allow_redirects=False`): a load test measures the server it was
given. `tests/project/test_one_rule.py` fails on an HTTP client made or called past these.

Example:
    with open_url(urllib.request.Request(url, data=body, method="POST"), timeout=10) as answer:
        answer.read()
    session = guard_session(requests.Session())
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import IO, Any, TypeVar

from foundation.errors import TfxpError

# At most this many redirects within the origin, as urllib's HTTPRedirectHandler.max_redirections.
MAX_REDIRECTS = 10
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CONTENT_HEADERS = frozenset({"content-type", "content-length", "content-encoding", "transfer-encoding"})
P = TypeVar("P")


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, lower-case, with the scheme's default port filled in."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


def shown(url: str) -> str:
    """`url` as messages show it: without user info, query and fragment (where URLs carry secrets)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class RedirectRefusedError(TfxpError):
    """A server answered with a redirect to another origin, and tfxp did not follow it.

    Attributes:
        url: the request's URL.
        status: the redirect's HTTP status.
        target: where it pointed (absolute).
    """

    def __init__(self, url: str, status: int, target: str) -> None:
        self.url, self.status, self.target = url, status, target
        super().__init__(
            f"{shown(url)} answered HTTP {status}, a redirect to {shown(target)}, another origin; tfxp does not "
            "follow a redirect to another origin (the request's credentials and body are meant for "
            f"{shown(urllib.parse.urljoin(url, '/'))} only)"
        )


def check_redirect(url: str, status: int, location: str) -> str:
    """Where the redirect of the request to `url` leads (`location` made absolute), when it is in `url`'s origin.

    Raises:
        RedirectRefusedError: `location` is in another origin.
    """
    target = urllib.parse.urljoin(url, location)
    if origin(target) != origin(url):
        raise RedirectRefusedError(url, status, target)
    return target


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirect handler under the rule: refuses a redirect to another origin; within the origin, follows
    307 and 308 with the method and body (urllib itself refuses them for a POST) and the rest as urllib does."""

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        try:
            target = check_redirect(req.full_url, code, newurl)
        except RedirectRefusedError:
            fp.close()
            raise
        if code in (307, 308) and req.get_method() not in ("GET", "HEAD"):
            return urllib.request.Request(
                target,
                data=req.data,
                headers=dict(req.headers),
                origin_req_host=req.origin_req_host,
                unverifiable=True,
                method=req.get_method(),
            )
        return super().redirect_request(req, fp, code, msg, headers, target)


def open_url(request: urllib.request.Request | str, timeout: float, *, proxies: bool = True) -> Any:
    """`urllib.request.urlopen` under the rule (`SameOriginRedirects`).

    Args:
        request: a Request or a URL.
        timeout: socket timeout of each connect and read (not of the whole call: see `foundation.deadline`).
        proxies: use the `*_proxy` variables as urlopen does; False ignores them (as kfp's own client does).

    Raises:
        RedirectRefusedError: a redirect to another origin.
        urllib.error.URLError, OSError: as urlopen.
    """
    handlers: list[urllib.request.BaseHandler] = [SameOriginRedirects()]
    if not proxies:
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers).open(request, timeout=timeout)


def guard_pool(pool: P) -> P:
    """Puts the rule into a urllib3 `PoolManager` (or `ProxyManager`): its `urlopen`, which `request` calls, follows
    redirects within the origin (at most MAX_REDIRECTS; a 303 becomes a GET without the body, as urllib3 does) and
    raises RedirectRefusedError for one to another origin. Returns `pool`.

    Example:
        guard_pool(kfp_client._run_api.api_client.rest_client.pool_manager)
    """
    send: Callable[..., Any] = pool.urlopen  # type: ignore[attr-defined]

    def urlopen(method: str, url: str, redirect: bool = True, **kw: Any) -> Any:
        for _ in range(MAX_REDIRECTS + 1):
            response = send(method, url, redirect=False, **kw)
            location = response.get_redirect_location() if redirect else None
            if not location:
                return response
            response.drain_conn()
            target = check_redirect(url, response.status, location)
            if response.status == 303 and method != "HEAD":
                headers = {k: v for k, v in (kw.get("headers") or {}).items() if k.lower() not in _CONTENT_HEADERS}
                method, kw = "GET", {**kw, "body": None, "headers": headers}
            url = target
        import urllib3  # here, not at the top: the urllib users of this module need no urllib3

        too_many = urllib3.exceptions.ResponseError(f"more than {MAX_REDIRECTS} redirects")
        raise urllib3.exceptions.MaxRetryError(None, url, too_many)  # type: ignore[arg-type]

    pool.urlopen = urlopen  # type: ignore[attr-defined]
    return pool


def _refuse_cross_origin(response: Any, *args: Any, **kwargs: Any) -> None:
    """requests' response hook: runs on every answer, before requests follows a redirect of it."""
    if response.is_redirect:
        try:
            check_redirect(response.url, response.status_code, response.headers["location"])
        except RedirectRefusedError:
            response.close()
            raise


def guard_session(session: P) -> P:
    """Puts the rule into a `requests.Session` (a response hook); returns `session`."""
    session.hooks["response"].append(_refuse_cross_origin)  # type: ignore[attr-defined]
    return session
