"""The one redirect rule (`foundation.redirects`), at the hook of each HTTP library tfxp sends requests with: a
redirect to another origin is refused before anything is sent there; one within the origin is followed."""

from __future__ import annotations

import urllib.request

import pytest
import requests
import urllib3
from http_double import json_answer, moved, recording, redirect_to
from import_probe import heavy_modules_loaded

from foundation.errors import TfxpError
from foundation.redirects import (
    RedirectRefusedError,
    check_redirect,
    guard_pool,
    guard_session,
    open_url,
    origin,
    shown,
)

BODY = b'{"notify_url": "https://hooks.example.com/T0/B0/secret"}'
STATUSES = [301, 302, 303, 307, 308]


def _urllib(url: str) -> bytes:
    request = urllib.request.Request(url, data=BODY, method="POST", headers={"Authorization": "Bearer secret"})
    with open_url(request, timeout=5) as answer:
        return bytes(answer.read())


def _urllib3(url: str) -> bytes:
    pool = guard_pool(urllib3.PoolManager())
    return bytes(pool.request("POST", url, body=BODY, headers={"Authorization": "Bearer secret"}).data)


def _requests(url: str) -> bytes:
    with guard_session(requests.Session()) as session:
        return session.post(url, data=BODY, headers={"Authorization": "Bearer secret"}, timeout=5).content


CLIENTS = {"urllib": _urllib, "urllib3": _urllib3, "requests": _requests}


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_redirect_to_another_origin_is_refused_and_nothing_goes_there(client: str, status: int) -> None:
    with (
        recording(json_answer(b'{"elsewhere": true}')) as (other, other_seen),
        recording(redirect_to(f"{other}/runs", status)) as (here, _),
        pytest.raises(
            RedirectRefusedError, match=rf"answered HTTP {status}, a redirect to {other}/runs, another origin"
        ),
    ):
        CLIENTS[client](f"{here}/runs")
    assert other_seen == []


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_redirect_within_the_origin_is_followed_with_its_body(client: str) -> None:
    moved_once = moved("/runs", "/v2/runs", 307, then=(200, {"Content-Type": "application/json"}, b'{"moved": true}'))
    with recording(moved_once) as (here, seen):
        assert CLIENTS[client](f"{here}/runs") == b'{"moved": true}'
    assert [(r.method, r.path, r.body) for r in seen] == [("POST", "/runs", BODY), ("POST", "/v2/runs", BODY)]


def test_a_303_within_the_origin_becomes_a_get_without_the_body() -> None:
    with recording(moved("/runs", "/runs/1", 303, then=(200, {}, b"done"))) as (here, seen):
        assert _urllib3(f"{here}/runs") == b"done"
    assert [(r.method, r.path, r.body) for r in seen] == [("POST", "/runs", BODY), ("GET", "/runs/1", b"")]
    assert "content-length" not in seen[1].headers or seen[1].headers["content-length"] == "0"


def test_a_redirect_loop_within_the_origin_ends() -> None:
    with recording(redirect_to("/again", 302)) as (here, seen), pytest.raises(urllib3.exceptions.MaxRetryError):
        guard_pool(urllib3.PoolManager()).request("GET", f"{here}/again")
    assert 2 <= len(seen) <= 12


@pytest.mark.parametrize(
    ("url", "target", "same"),
    [
        ("http://kfp:8080/a", "/b", True),
        ("http://kfp:8080/a", "http://KFP:8080/b", True),
        ("http://kfp/a", "http://kfp:80/b", True),
        ("https://kfp/a", "https://kfp:443/b", True),
        ("http://kfp:8080/a", "http://kfp:8081/a", False),
        ("http://kfp:8080/a", "https://kfp:8080/a", False),
        ("http://kfp:8080/a", "http://login.example.com/a", False),
        ("http://kfp:8080/a", "//evil.example.com/a", False),
    ],
)
def test_the_origin_is_scheme_host_and_port(url: str, target: str, same: bool) -> None:
    if same:
        assert check_redirect(url, 302, target).endswith(target.rsplit("/", 1)[1])
    else:
        with pytest.raises(RedirectRefusedError):
            check_redirect(url, 302, target)
    assert origin("HTTP://Kfp/x") == ("http", "kfp", 80)


def test_a_refusal_shows_no_credentials_or_query_of_either_url() -> None:
    with pytest.raises(RedirectRefusedError) as refused:
        check_redirect("https://user:pw@kfp/runs?token=abc", 307, "https://bob:pw2@login.example.com/?next=xyz")
    text = str(refused.value)
    assert "pw" not in text and "abc" not in text and "xyz" not in text
    assert "https://kfp/runs" in text and "https://login.example.com/" in text
    assert isinstance(refused.value, TfxpError) and refused.value.status == 307
    assert shown("http://a:b@host:8080/p?q=1#f") == "http://host:8080/p"


def test_the_rule_loads_no_http_library_its_user_does_not_use() -> None:
    # The urllib users (the run notice, the rollout's reads) pay for neither urllib3 nor requests.
    code = "import foundation.redirects, foundation.credentials"
    assert heavy_modules_loaded(code, ["urllib3", "requests", "tensorflow"]) == []
