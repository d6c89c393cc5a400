"""A Prometheus (or a server's /metrics) that answers oddly ends `tfxp rollout analyze` in one `EvidenceError`
(exit 2), not in a traceback or a hang: found by the second adversarial pass over issue 35.

- an answer trickled a byte at a time, which no socket timeout trips, is given up at the timeout;
- JSON nested thousands of levels deep (`RecursionError` in `json.loads`);
- JSON of another shape than an instant vector (`KeyError`, `AttributeError`).
"""

from __future__ import annotations

import pytest
from http_double import json_answer, recording
from trickling_server import trickling_server

from serving.rollout.evidence import EvidenceError, PrometheusSignals, read_metrics


def test_a_trickled_prometheus_answer_is_given_up_at_the_timeout() -> None:
    # before: a 300-byte answer sent a byte every 0.4 s held `rollout analyze` for 2 minutes
    with (
        trickling_server("/api/v1/query", "body") as url,
        pytest.raises(EvidenceError, match=r"no whole answer within 1 s"),
    ):
        PrometheusSignals(url, 60, timeout=1.0).signals("digits", 3)


def test_a_trickled_metrics_page_is_given_up_at_the_timeout() -> None:
    with (
        trickling_server("/metrics", "header") as url,
        pytest.raises(EvidenceError, match=r"no whole answer within 1 s"),
    ):
        read_metrics(f"{url}/metrics", timeout=1.0)


@pytest.mark.parametrize(
    "body",
    [
        b'{"status": "success", "data": {"result": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
        b'{"status": "success", "data": {"result": [{"value": "x"}]}}',
        b'{"status": "success", "data": {"result": [{"metric": 5, "value": [1, "2"]}]}}',
        b'{"status": "success", "data": {"result": [{"metric": {}, "value": 1}]}}',
        b'{"status": "success", "data": []}',
        b"[1]",
    ],
    ids=["deep", "no-metric", "metric-not-a-map", "value-not-a-pair", "data-a-list", "a-list"],
)
def test_an_answer_of_another_shape_is_one_evidence_error(body: bytes) -> None:
    with recording(json_answer(body)) as (url, _), pytest.raises(EvidenceError, match=f"Prometheus at {url}"):
        PrometheusSignals(url, 60, timeout=5.0).signals("digits", 3)
