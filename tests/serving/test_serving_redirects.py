"""The serving side's outgoing calls refuse a redirect to another origin (issue 35): the REST client (predict
bodies, the status a rollout reads), the load test, and the rollout's evidence reads (`/metrics`, Prometheus).
The other origin is a recording server that must receive nothing (tests/support/http_double.py)."""

from __future__ import annotations

import pytest
from http_double import json_answer, recording, redirect_to

from serving.errors import FailedPreconditionError
from serving.loadtest import run_async_load_test
from serving.rest_client import RestClient
from serving.rollout.evidence import EvidenceError, PrometheusSignals, read_metrics
from serving.rollout.operate import available_versions

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
PREDICTIONS = b'{"predictions": [{"probabilities": [1.0], "classes": 0}]}'


@pytest.mark.parametrize("status", [302, 307, 308])
def test_the_rest_client_refuses_to_send_a_predict_body_elsewhere(status: int) -> None:
    with (
        recording(json_answer(PREDICTIONS)) as (other, other_seen),
        recording(redirect_to(f"{other}/v1/models/digits:predict", status)) as (here, _),
        RestClient(here, "digits", timeout=5) as client,
        pytest.raises(FailedPreconditionError, match=rf"HTTP {status}, a redirect to {other}/v1/models/digits:predict"),
    ):
        client.predict_images([PNG])
    assert other_seen == []


def test_the_rollout_does_not_read_version_status_elsewhere() -> None:
    status = b'{"model_version_status": [{"version": "3", "state": "AVAILABLE"}]}'
    with recording(json_answer(status)) as (other, other_seen), recording(redirect_to(other, 302)) as (here, _):
        assert available_versions(here, "digits") is None
    assert other_seen == []


def test_the_load_test_follows_no_redirect() -> None:
    with (
        recording(json_answer(PREDICTIONS)) as (other, other_seen),
        recording(redirect_to(f"{other}/v1/models/digits:predict", 307)) as (here, _),
    ):
        result = run_async_load_test(here, "digits", [PNG], "rest", concurrency=1, seconds=0.3)
    assert result.requests > 0 and result.errors == result.requests
    assert other_seen == []


def test_metrics_and_prometheus_are_not_read_elsewhere() -> None:
    metrics = b"tfxp_serving_requests_total 1\n"
    with recording(json_answer(metrics)) as (other, other_seen), recording(redirect_to(f"{other}/x", 302)) as (here, _):
        with pytest.raises(EvidenceError, match=rf"a redirect to {other}/x, another origin"):
            read_metrics(f"{here}/metrics")
        with pytest.raises(EvidenceError, match="another origin"):
            PrometheusSignals(here, 60).signals("digits", 3)
    assert other_seen == []


DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("status", [200, 400])
def test_an_answer_of_json_nested_too_deep_is_a_serving_error_not_a_traceback(status: int) -> None:
    # found by the second adversarial pass over issue 35: `tfxp predict` ended in a RecursionError traceback
    from serving.base_client import RetryPolicy
    from serving.errors import ServingError

    answer = lambda request: (status, {"Content-Type": "application/json"}, DEEP_JSON)  # noqa: E731
    with (
        recording(answer) as (here, _),
        RestClient(here, "digits", timeout=5, retry=RetryPolicy(max_attempts=1)) as client,
        pytest.raises(ServingError),
    ):
        client.predict_images([PNG])
