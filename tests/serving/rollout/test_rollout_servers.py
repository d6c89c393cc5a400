"""A guarded rollout over two real local servers, one per track, each polling its own models.config: a canary
that disagrees with stable is rolled back, one that agrees is promoted; each move reaches the servers in TF
Serving's two phases. The evidence comes from the servers' /metrics, and from a real Prometheus when Debian's
`prometheus` is installed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from serving_fixtures import labelled_server_options, random_png, tiny_classifier, write_model_version

from serving.canary_options import CanarySettings
from serving.rest_client import RestClient
from serving.rollout import actions
from serving.rollout.evidence import PrometheusSignals
from serving.rollout.layout import track_config_path
from serving.rollout.local_prometheus import LocalPrometheus, prometheus_binary
from serving.rollout.operate import RolloutTarget, analyze, apply_verdict, available_versions, sync_tracks
from serving.rollout.state import read_decisions, read_rollout
from serving.rollout.tracks import read_track
from serving.server import ModelServer

# Two model servers (and a Prometheus) per module, the rollout waiting out their polls: out of `make unit`.
pytestmark = pytest.mark.slow
SIZE, CHANNELS, CLASSES = 16, 3, 4
# More than one request may carry (serving.max_batch_size 32): the replay must split them.
IMAGES = [random_png(SIZE, CHANNELS, seed) for seed in range(40)]


def _model(flip: bool) -> object:
    model = tiny_classifier(SIZE, CHANNELS, CLASSES, seed=0)
    if flip:  # same network, but its answer moved to the next class: an offline gate may pass it, traffic won't
        dense = model.layers[-1]
        kernel, bias = dense.get_weights()
        good = int(np.argmax(model.predict(np.zeros((1, SIZE, SIZE, CHANNELS), np.float32), verbose=0)))
        bias[(good + 1) % CLASSES] += 50.0
        dense.set_weights([kernel, bias])
    return model


@pytest.fixture(scope="module")
def model_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("serving") / "digits"
    for version, flip in ((1, False), (2, True), (3, False)):
        write_model_version(base, version, _model(flip))  # type: ignore[arg-type]
    return base


def _server(base: Path, track: str) -> ModelServer:
    options = labelled_server_options(poll_seconds=0.2)
    path = Path(track_config_path(str(base), track))  # type: ignore[arg-type]
    return ModelServer(options=options, model_config_file=path, served_from=base).start()


@pytest.fixture(scope="module")
def rollout(model_base: Path) -> Iterator[tuple[RolloutTarget, dict[str, ModelServer]]]:
    base = str(model_base)
    # Two servers on a shared 2-core CI machine: their p99s differ by 2× from load alone, so the latency bound is
    # wide here (its rule is tested on given signals in test_rollout_analysis.py); agreement and classes decide.
    settings = CanarySettings(min_requests=20, replay_samples=len(IMAGES), keep_versions=5, max_latency_ratio=20)
    target = RolloutTarget(base, base, "digits", settings)
    sync_tracks(target, actions.publish_version_state(base, 1, by="run:first"))
    servers = {track: _server(model_base, track) for track in ("stable", "canary")}
    settings = settings.model_copy(
        update={"stable_url": servers["stable"].rest_url, "canary_url": servers["canary"].rest_url}
    )
    yield RolloutTarget(base, base, "digits", settings), servers
    for server in servers.values():
        server.stop()


def _settle(target: RolloutTarget, timeout: float = 60.0) -> dict[str, str]:
    """Syncs the tracks until both serve what the state says (each move takes its two phases)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = sync_tracks(target)
        if all(line.startswith("serves") for line in report.values()):
            time.sleep(0.6)  # the servers re-read their files every 0.2 s
            return report
        time.sleep(0.3)
    raise AssertionError(f"tracks did not settle: {report}")


def _traffic(target: RolloutTarget, requests: int = 25) -> None:
    for url in (target.settings.stable_url, target.settings.canary_url):
        with RestClient(url, "digits") as client:
            for index in range(requests):
                client.predict_images([IMAGES[index % len(IMAGES)]])  # unversioned, as a mesh sends them


def test_a_canary_that_disagrees_is_rolled_back_and_one_that_agrees_is_promoted(
    rollout: tuple[RolloutTarget, dict[str, ModelServer]],
) -> None:
    target, _ = rollout
    state = actions.publish_version_state(target.model_base, 2, by="run:nightly-2")
    assert (state.stable, state.canary) == (1, 2)
    first = sync_tracks(target, state)
    assert "loading 2" in first["canary"]  # phase 1: the canary servers load 2, labels unchanged
    assert read_track(target.model_base, "canary").labels == {"stable": 1}  # type: ignore[union-attr]
    _settle(target)
    assert available_versions(target.settings.canary_url, "digits") == {2}
    assert available_versions(target.settings.stable_url, "digits") == {1}

    _traffic(target)
    verdict = analyze(target, prometheus=None, window_seconds=None, replay=IMAGES)
    assert verdict.action == "rollback", verdict
    assert verdict.evidence["agreement"]["share"] == 0.0
    assert verdict.evidence["class_linf"] > target.settings.max_class_linf
    state = apply_verdict(target, verdict, by="analysis")
    assert (state.stable, state.canary, state.rolled_back) == (1, None, (2,))
    _settle(target)
    assert available_versions(target.settings.canary_url, "digits") == {1}  # the canary pods serve stable

    state = actions.start(target.model_base, 3, by="person:ana")
    _settle(target)
    _traffic(target)
    verdict = analyze(target, prometheus=None, window_seconds=None, replay=IMAGES)
    assert verdict.action == "promote", verdict
    state = apply_verdict(target, verdict, by="analysis")
    assert (state.stable, state.canary) == (3, None)
    _settle(target)
    assert available_versions(target.settings.stable_url, "digits") == {3}
    assert read_rollout(target.model_base).stable == 3
    actions_recorded = [decision.action for decision in read_decisions(target.model_base)]
    assert actions_recorded == ["publish", "publish", "rollback", "start", "promote"]


@pytest.mark.skipif(
    prometheus_binary() is None, reason="Debian's prometheus is not installed (apt-get install prometheus)"
)
def test_the_evidence_read_from_a_real_prometheus_matches_the_servers_own(
    rollout: tuple[RolloutTarget, dict[str, ModelServer]], tmp_path: Path
) -> None:
    target, servers = rollout
    hosts = {track: server.rest_url.split("://", 1)[1] for track, server in servers.items()}
    with LocalPrometheus(hosts, tmp_path / "prometheus", scrape_seconds=1) as prometheus:
        prometheus.wait_for_scrapes(count=2)
        # A series first seen mid-window is counted from its first scrape (PromQL's increase), so the counted
        # traffic is the second batch, sent once the first has been scraped.
        for _ in range(2):
            _traffic(target, requests=30)
            time.sleep(2.5)
        state = read_rollout(target.model_base)
        signals = PrometheusSignals(prometheus.url, 120).signals("digits", state.stable, track="stable")  # type: ignore[arg-type]
        canary_pods = PrometheusSignals(prometheus.url, 120).signals("digits", state.stable, track="canary")  # type: ignore[arg-type]
    assert 30 * 0.9 <= signals.requests <= 60 * 1.2  # increase() extrapolates a little at the window's edges
    assert signals.errors == 0
    assert signals.p99_ms is not None and signals.p99_ms > 0
    assert sum(signals.classes.values()) == pytest.approx(signals.requests, rel=0.2)
    assert canary_pods.requests >= 30 * 0.9  # the canary pods serve stable too, and are counted apart
