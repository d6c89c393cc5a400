"""Every call to the KFP API is guarded (issue 35): a redirect to another origin is refused for kfp.Client's own
calls too, not only tfxp's health check, so a spec (with `kubeflow.notify_url`) is never posted elsewhere; a
credential is checked on every read of its file, and never printed, not even in a traceback.

Servers are local fakes of the KFP API (tests/support/kfp_fake.py): `fake`/`host` is the --host, a second one
plays the other origin and must receive nothing.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp_fake import API, RUN_ID, FakeKfp, Recorded, serve, spec_dict
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.kubeflow.client.auth import TOKEN_ENV, TOKEN_PATH_ENV, KfpAuth
from pipeline.kubeflow.client.runs import SubmitError

pytestmark = pytest.mark.usefixtures("no_kfp_credentials")

SECRET = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRmeHA"
NOTIFY = "https://hooks.example.com/services/T0/B0/notify-secret"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    spec = spec_dict(["Trainer"], {"notify_url": {"parameterType": "STRING", "defaultValue": NOTIFY}})
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture
def other() -> Iterator[tuple[FakeKfp, str]]:
    elsewhere = FakeKfp()
    with serve(elsewhere) as url:
        yield elsewhere, url


def _invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250", **(env or {})})


def _everything_said(result: Any) -> str:
    """The output, and the exception with its whole chain as a traceback would print it."""
    said = result.output
    if result.exception is not None:
        said += "".join(traceback.format_exception(result.exception))
    return said


# --- redirects ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirect_of_the_run_to_another_origin_is_refused_and_nothing_is_posted_there(
    fake: FakeKfp, host: str, package: Path, other: tuple[FakeKfp, str], status: int
) -> None:
    elsewhere, other_url = other
    fake.redirects[("POST", f"{API}/runs")] = (status, f"{other_url}{API}/runs")

    result = _invoke("submit", str(package), "--host", host, env={TOKEN_ENV: SECRET})

    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"answered HTTP {status}, a redirect to {other_url}{API}/runs, another origin" in said
    assert "--host" in said and "run id" not in said
    assert elsewhere.requests == []  # neither the spec nor the notify URL nor the token went there


def test_a_redirect_of_an_upload_to_another_origin_is_refused(
    fake: FakeKfp, host: str, package: Path, other: tuple[FakeKfp, str]
) -> None:
    elsewhere, other_url = other
    fake.redirects[("POST", f"{API}/pipelines/upload_version")] = (307, f"{other_url}{API}/pipelines/upload_version")

    result = _invoke("pipeline", "upload", str(package), "--host", host)

    assert result.exit_code == 2, result.output
    assert "another origin" in result.output and elsewhere.requests == []


def test_a_redirect_of_the_run_within_the_origin_is_followed(fake: FakeKfp, host: str, package: Path) -> None:
    fake.redirects[("POST", f"{API}/runs")] = (307, f"{host}{API}/runs")

    result = _invoke("submit", str(package), "--host", host)

    assert result.exit_code == 0, result.output
    assert f"run id: {RUN_ID}" in result.output
    assert [r.body["display_name"] for r in fake.calls("POST", f"{API}/runs")] == [
        r.body["display_name"] for r in fake.calls("POST", f"{API}/runs")[:1]
    ] * 2  # the same run, sent again to the same origin


# --- credentials ------------------------------------------------------------------------------------------------


def _rotate_after_the_health_check(fake: FakeKfp, rotate: Any) -> None:
    """Runs `rotate()` once, when tfxp's own health check arrives: kfp.Client reads the token file afterwards."""
    done: list[bool] = []

    def hook(request: Recorded) -> None:
        if not done and request.path == f"{API}/healthz":
            done.append(True)
            rotate()

    fake.on_request = hook


def test_a_token_file_that_rotates_to_a_line_break_is_refused_without_showing_it(
    fake: FakeKfp, host: str, package: Path, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")
    _rotate_after_the_health_check(fake, lambda: token.write_text(f"{SECRET}\nX-Injected: 1\n"))

    result = _invoke("submit", str(package), "--host", host, env={TOKEN_PATH_ENV: str(token)})

    assert result.exit_code == 2, _everything_said(result)
    assert "holds a line break at position" in result.output and "the value is not shown" in result.output
    assert SECRET not in _everything_said(result)
    assert not fake.calls("POST", f"{API}/runs")


def test_a_token_file_replaced_by_a_fifo_is_refused_at_once(
    fake: FakeKfp, host: str, package: Path, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")

    def to_fifo() -> None:
        token.unlink()
        os.mkfifo(token)

    _rotate_after_the_health_check(fake, to_fifo)
    started = time.monotonic()

    result = _invoke(
        "submit", str(package), "--host", host, "--request-timeout", "20", env={TOKEN_PATH_ENV: str(token)}
    )

    assert result.exit_code == 2, result.output
    assert time.monotonic() - started < 10  # not the 20 s request timeout
    assert f"{TOKEN_PATH_ENV}={token} is not a regular file" in " ".join(result.output.split())


def test_a_token_given_in_code_is_checked_too() -> None:
    with pytest.raises(SubmitError, match="holds a line break at position") as raised:
        KfpAuth(token=f"{SECRET}\nX-Injected: 1")
    assert SECRET not in "".join(traceback.format_exception(raised.value))
    with pytest.raises(SubmitError, match="character U\\+0007"):
        KfpAuth(cookie="session=abc\x07")


def test_a_server_that_echoes_the_token_does_not_get_it_printed(fake: FakeKfp, host: str, package: Path) -> None:
    echoed = f'{{"error": "invalid token: Bearer {SECRET}", "code": 16}}'.encode()
    fake.raw_answers[("POST", f"{API}/runs")] = (500, "application/json", echoed)

    result = _invoke("submit", str(package), "--host", host, env={TOKEN_ENV: SECRET})

    assert result.exit_code == 2, result.output
    assert "HTTP 500" in result.output and "invalid token" in result.output
    assert SECRET not in _everything_said(result)


def test_repr_and_redaction_never_show_the_credentials() -> None:
    cookie = "c2Vzc2lvbi1zZWNyZXQ"
    auth = KfpAuth(token=SECRET, cookie=f"authservice_session={cookie}; other=x1")
    assert SECRET not in repr(auth) and cookie not in repr(auth) and SECRET not in auth.describe()
    said = f"x Bearer {SECRET} y authservice_session={cookie}"
    assert auth.redact(said) == "x Bearer <token> y authservice_session=<cookie>"
