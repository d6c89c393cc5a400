"""The Argo Rollouts / Flagger analysis queries (`serving.k8s_rollout_controllers.analysis_queries`), evaluated by
Prometheus itself: `promtool test rules` (Debian's prometheus package; `.ci/run` installs it) runs each query as a
recording rule over synthetic TF Serving series and compares with the value the analysis must see.

The expected p99 ratio comes from `serving.rollout.evidence.histogram_quantile`, tfxp's port of PromQL's
`BucketQuantile`: Prometheus computing the same number checks the port too. promtool 2.42 compares samples
exactly, so the series are chosen to make every rate an exact binary fraction.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from serving.k8s_rollout_controllers import analysis_queries
from serving.rollout.evidence import histogram_quantile

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (Debian's prometheus package: sudo apt-get install -y prometheus)",
)

CANARY = 'model_name="digits",track="canary"'
STABLE = 'model_name="digits",track="stable"'
# Increments per minute; over a 5-minute window, rate = increment / 60 per second.
REQUESTS = {("canary", "OK"): 45, ("canary", "INTERNAL"): 15, ("stable", "OK"): 105, ("stable", "INTERNAL"): 15}
# Cumulative latency buckets (microseconds), increments per minute.
BUCKETS = {"canary": {"5000": 0, "10000": 60, "+Inf": 60}, "stable": {"5000": 45, "10000": 60, "+Inf": 60}}


def _series() -> list[dict[str, str]]:
    series = [
        {"series": f':tensorflow:serving:request_count{{model_name="digits",track="{track}",status="{status}"}}',
         "values": f"0+{step}x20"}
        for (track, status), step in REQUESTS.items()
    ]  # fmt: skip
    series += [
        {"series": f':tensorflow:serving:request_latency_bucket{{model_name="digits",track="{track}",le="{le}"}}',
         "values": f"0+{step}x20"}
        for track, buckets in BUCKETS.items()
        for le, step in buckets.items()
    ]  # fmt: skip
    return series


def _error_rate(track: str) -> float:
    errors = REQUESTS[(track, "INTERNAL")] / 60
    return errors / (REQUESTS[(track, "OK")] / 60 + errors)


def _p99(track: str) -> float:
    buckets = [(float(le), step / 60) for le, step in BUCKETS[track].items()]
    value = histogram_quantile(0.99, buckets)
    assert value is not None
    return value


def test_the_analysis_queries_compute_what_the_analysis_bounds_expect(tmp_path: Path) -> None:
    queries = analysis_queries(CANARY, STABLE, "5m")
    expected = {
        "error-rate-increase": _error_rate("canary") - _error_rate("stable"),  # 0.25 - 0.125
        "p99-latency-ratio": _p99("canary") / _p99("stable"),
        "canary-requests": (45 + 15) * 5.0,  # increase over 5 minutes
    }
    assert expected["error-rate-increase"] == 0.125
    record = {name: f"tfxp:{name.replace('-', '_')}" for name in queries}
    recording = [{"record": record[name], "expr": query} for name, query in queries.items()]
    rules = {"groups": [{"name": "tfxp-canary", "rules": recording}]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _series(),
                "promql_expr_test": [
                    {"expr": record[name], "eval_time": "10m",
                     "exp_samples": [{"labels": record[name], "value": value}]}
                    for name, value in expected.items()
                ],
            }
        ],
    }  # fmt: skip
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))

    result = subprocess.run(
        ["promtool", "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
