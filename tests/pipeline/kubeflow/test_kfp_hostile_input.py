"""The KFP client against hostile input (issue 35, second adversarial pass): an unreadable answer to one poll of
`submit --wait` is polled through like a 5xx; a --host with credentials, a query or control characters is refused
without echoing them; pipeline roots and a run-time data path are checked as `tfxp compile` checks them; a list
answer with more items than asked for is refused before kfp reads it.

Servers are local fakes of the KFP API (tests/support/kfp_fake.py); every test goes through the CLI.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp_fake import API, RUN_ID, FakeKfp, Recorded, spec_dict
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.kubeflow.client.runs import NoAnswerError
from pipeline.kubeflow.client.submit import KfpRunClient

pytestmark = pytest.mark.usefixtures("no_kfp_credentials")
RUN = ("GET", f"{API}/runs/{RUN_ID}")


@pytest.fixture
def package(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    parameters = {"data_path": {"parameterType": "STRING", "defaultValue": "gs://tfxp-data/digits"}}
    path.write_text(yaml.safe_dump(spec_dict(["ImportExampleGen", "Trainer"], parameters)))
    return path


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result, " ".join(result.output.split())


# --- B8: one unreadable answer to a poll ---------------------------------------------------------------------


def _unreadable_second_poll(fake: FakeKfp, answer: tuple[int, str, bytes]) -> None:
    """The second poll of the run gets `answer`; the others the fake's scripted states."""
    fake.states = ["RUNNING", "RUNNING", "SUCCEEDED"]
    polls: list[Recorded] = []

    def hook(request: Recorded) -> None:
        if (request.method, request.path) == RUN:
            polls.append(request)
            if len(polls) == 2:
                fake.raw_answers[RUN] = answer
            else:
                fake.raw_answers.pop(RUN, None)

    fake.on_request = hook


@pytest.mark.parametrize(
    "answer",
    [
        (200, "text/html", b"<html>login</html>"),
        (200, "application/json", b'{"run_id": "3f1e'),
        (502, "text/html", b"<html>bad gateway</html>"),
    ],
    ids=["html", "cut-off-json", "502"],
)
def test_one_unreadable_poll_does_not_end_the_wait(
    fake: FakeKfp, host: str, package: Path, answer: tuple[int, str, bytes]
) -> None:
    _unreadable_second_poll(fake, answer)

    result, said = _invoke("submit", str(package), "--host", host, "--wait", "--poll", "0.05", "--timeout", "30")

    assert result.exit_code == 0, said
    assert f"run {RUN_ID} SUCCEEDED" in said
    assert len(fake.calls(*RUN)) == 4  # RUNNING, the unreadable one, RUNNING, SUCCEEDED


def test_unreadable_polls_until_the_timeout_say_the_run_may_still_be_going(
    fake: FakeKfp, host: str, package: Path
) -> None:
    fake.raw_answers[RUN] = (200, "text/html", b"<html>login</html>")

    result, said = _invoke("submit", str(package), "--host", host, "--wait", "--poll", "0.05", "--timeout", "1")

    assert result.exit_code == 3, said
    assert f"run {RUN_ID} did not finish within 1 s (no state read; the last poll got no usable answer:" in said
    assert "'<html>login</html>', not a JSON object" in said
    assert "it may still be running on the cluster" in said
    assert f"check it with `tfxp runs get {RUN_ID} --host {host}`" in said
    assert len(fake.calls(*RUN)) > 2


# --- B9: --host (and --rest) with credentials, a query or control characters ------------------------------------


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("http://alice:S3CRETpw@127.0.0.1:1/", "carries a user name or password"),
        ("http://alice:S3CRETpw@127.0.0.1:1/?token=QTOKEN", "carries a user name or password"),
        ("http://127.0.0.1:1/?token=QTOKEN", "has a query or fragment"),
        ("http://127.0.0.1:1/#QTOKEN", "has a query or fragment"),
        ("http://127.0.0.1:1/\x1b[2Jx", r"holds '\x1b'; a URL has no control characters or whitespace"),
        ("http://127.0.0.1:1/a\nb", r"holds '\n'; a URL has no control characters or whitespace"),
        ("http://127.0.0.1:1/a b", "holds ' '; a URL has no control characters or whitespace"),
        ("http://127.0.0.1%20:1/", "has a percent-encoded host"),  # an InvalidURL traceback before (fourth pass, N6)
        ("http://127.0.0.1%1b:1/", "has a percent-encoded host"),
    ],
)
def test_a_host_with_credentials_a_query_or_control_characters_is_refused_unshown(address: str, problem: str) -> None:
    result, said = _invoke("runs", "list", "--host", address)

    assert result.exit_code == 2, said
    assert problem in said
    assert "S3CRETpw" not in said and "QTOKEN" not in said and "\x1b" not in said
    assert not isinstance(result.exception, Exception)  # no traceback: SystemExit(2) only


def test_a_host_with_user_info_points_to_the_credential_variables() -> None:
    _, said = _invoke("runs", "list", "--host", "http://alice:S3CRETpw@127.0.0.1:1")

    assert "'http://127.0.0.1:1' (shown without them) carries a user name or password" in said
    assert "only from the environment (set TFXP_KFP_TOKEN, KF_PIPELINES_SA_TOKEN_PATH or TFXP_KFP_COOKIE" in said


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("http://bob:PW9secret@127.0.0.1:1/?k=SECRETQ", "carries a user name or password"),
        ("http://127.0.0.1:1/?k=SECRETQ", "has a query or fragment; a base URL has neither"),
    ],
)
def test_a_rest_url_with_user_info_or_a_query_is_refused_without_showing_them(address: str, problem: str) -> None:
    result, said = _invoke("predict", __file__, "--rest", address)  # refused before any image is read

    assert result.exit_code == 2, said
    assert f"'http://127.0.0.1:1/' (shown without them) {problem}" in said
    assert "PW9secret" not in said and "SECRETQ" not in said


# --- B12: pipeline roots with control characters or whitespace -------------------------------------------------


@pytest.mark.parametrize(
    ("root", "held"),
    [("gs://tfxp-bucket/a\x1b[2Jb", r"'\x1b'"), ("gs://tfxp-bucket/x\ny", r"'\n'"), ("gs://tfxp-bucket/a b", "' '")],
)
def test_a_pipeline_root_with_a_control_character_or_whitespace_is_refused_before_any_run(
    fake: FakeKfp, host: str, package: Path, root: str, held: str
) -> None:
    result, said = _invoke("submit", str(package), "--host", host, "--pipeline-root", root)

    assert result.exit_code == 2, said
    assert f"is not one KFP can use: it holds {held}" in said
    assert "\x1b" not in result.output and "x\ny" not in result.output
    assert fake.runtime_configs == [] and fake.calls("POST", f"{API}/runs") == []


# --- B13: the run-time data path, checked as `tfxp compile` checks data.path --------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("file:///etc/x", "has no file:// filesystem in the tfxp image"),
        ("hdfs://nn/x", "has no hdfs:// filesystem in the tfxp image"),
        ("../../x", "is a relative path, which the run's pods resolve against their image's working directory"),
        ("a\x1b[2Jb", "holds a control character"),
    ],
)
def test_a_data_path_the_pods_cannot_open_is_refused_before_any_run(
    fake: FakeKfp, host: str, package: Path, value: str, problem: str
) -> None:
    result, said = _invoke("submit", str(package), "--host", host, "--param", f"data_path={value}")

    assert result.exit_code == 2, said
    assert problem in said
    assert fake.runtime_configs == [] and fake.calls("POST", f"{API}/runs") == []


@pytest.mark.parametrize("value", ["gs://tfxp-data/digits-2", "/data/digits"])
def test_a_data_path_the_pods_can_open_is_sent(fake: FakeKfp, host: str, package: Path, value: str) -> None:
    result, said = _invoke("submit", str(package), "--host", host, "--param", f"data_path={value}")

    assert result.exit_code == 0, said
    assert fake.runtime_configs[0]["parameters"]["data_path"] == value


# --- B14: a list answer larger than the page asked for; a deadline that passes while reading ---------------------


def test_a_runs_page_with_more_runs_than_asked_for_is_refused_before_kfp_reads_them(fake: FakeKfp, host: str) -> None:
    runs = [{"run_id": f"r{index}", "display_name": f"n{index}", "state": "SUCCEEDED"} for index in range(3000)]
    fake.raw_answers[("GET", f"{API}/runs")] = (200, "application/json", json.dumps({"runs": runs}).encode())

    result, said = _invoke("runs", "list", "--host", host, "--limit", "5")

    assert result.exit_code == 2, said
    assert f"answered GET {API}/runs with 3000 items in 'runs', not at most the 5 asked for" in said
    assert "check --host" not in said  # its own question says so; the advice is not repeated


def test_a_deadline_that_passes_after_the_answer_came_is_not_called_no_answer(fake: FakeKfp, host: str) -> None:
    connection = KfpRunClient(host, request_timeout=0.3)
    client = connection.api()

    def answered_then_slow() -> None:
        client.list_runs(page_size=1)
        time.sleep(1.5)  # stands for kfp turning a large answer into models

    with pytest.raises(NoAnswerError) as caught:
        connection.call("listing runs", answered_then_slow)

    assert "answered while listing runs, but tfxp had not finished reading the answer when the 0.3 s" in str(
        caught.value
    )
    assert "did not answer" not in str(caught.value)
