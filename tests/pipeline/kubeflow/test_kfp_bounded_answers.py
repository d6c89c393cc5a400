"""A KFP answer larger than tfxp reads of one (`answers.MAX_ANSWER_BYTES`) stops the command with one message
naming the endpoint and the cap, and tfxp stops reading there (issue 35, class 3): the fake offers 160 MiB, and the
test counts what it could write before the client hung up."""

from __future__ import annotations

import pytest
from kfp_fake import API, FakeKfp
from typer.testing import CliRunner

from pipeline.cli import app

pytestmark = pytest.mark.usefixtures("no_kfp_credentials")
HUGE = 160 * 1024 * 1024
CAP = 64 * 1024 * 1024  # answers.MAX_ANSWER_BYTES, as the message names it


def test_a_huge_runs_list_answer_is_refused_after_the_cap(fake: FakeKfp, host: str) -> None:
    fake.huge_answers[("GET", f"{API}/runs")] = HUGE
    result = CliRunner().invoke(app, ["runs", "list", "--host", host], env={"COLUMNS": "250"})
    output = " ".join(result.output.split())
    assert result.exit_code == 2, output
    assert f"answered GET {API}/runs with more than 64 MiB, the most tfxp reads of one answer" in output
    assert "Traceback" not in output
    # What the client read, plus what the sockets' buffers held when it hung up: far from the gigabyte offered.
    assert fake.streamed < CAP + 32 * 1024 * 1024


def test_a_health_answer_past_its_cap_is_refused_by_name(fake: FakeKfp, host: str) -> None:
    fake.huge_answers[("GET", f"{API}/healthz")] = HUGE
    result = CliRunner().invoke(app, ["runs", "list", "--host", host], env={"COLUMNS": "250"})
    output = " ".join(result.output.split())
    assert result.exit_code == 2, output
    assert "answered with more than 64 KiB, not the KFP health answer" in output
    assert fake.streamed < 32 * 1024 * 1024
