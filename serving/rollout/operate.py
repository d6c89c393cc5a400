"""The rollout run by itself: carry the state to the servers, gather the canary's evidence, decide, and act.

`RolloutTarget` is one model's rollout as tfxp reaches it: its base path (where tfxp writes), the same as the
servers see it, its name and `serving.canary`. `sync_tracks` moves each track's models.config one phase on,
asking the track's servers (their REST status, `GET /v1/models/<name>`) which versions are AVAILABLE; `analyze`
reads both tracks' signals (a Prometheus, or the servers' `/metrics`), replays a sample to both, and judges
(`serving.rollout.analysis`); `apply_verdict` records the verdict and acts on it.

Example:
    target = RolloutTarget("out/serving/digits", "out/serving/digits", "digits", settings)
    verdict = analyze(target, prometheus=None, window_seconds=None, replay=images)
    apply_verdict(target, verdict, by="run:nightly-42")
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from serving.canary_options import CanarySettings
from serving.rollout import actions
from serving.rollout.analysis import Agreement, Verdict, judge
from serving.rollout.evidence import (
    EvidenceError,
    PrometheusSignals,
    TrackSignals,
    read_metrics,
    signals_from_metrics,
)
from serving.rollout.layout import Track
from serving.rollout.state import RolloutState, RolloutStateError, read_rollout
from serving.rollout.tracks import advance_tracks

logger = logging.getLogger(__name__)
# Rows per replay request: below serving.max_batch_size's defaults (32 here, TF Serving's batching files), as a
# client's single requests are.
REPLAY_BATCH = 8


@dataclass(frozen=True)
class RolloutTarget:
    """One model's rollout as tfxp reaches it.

    Attributes:
        model_base: `<serving base>/<model>` where tfxp writes (local or `gs://`).
        container_base: The same as the servers read it (`ServingOptions.container_base_path`).
        model_name: The served model's name.
        settings: `serving.canary`.
    """

    model_base: str
    container_base: str
    model_name: str
    settings: CanarySettings

    def url(self, track: Track) -> str:
        return self.settings.stable_url if track == "stable" else self.settings.canary_url


def available_versions(url: str, model_name: str) -> set[int] | None:
    """The versions of `model_name` AVAILABLE at the servers behind `url`; None when they cannot be asked."""
    if not url:
        return None
    from serving.rest_client import RestClient

    try:
        with RestClient(url, model_name, timeout=5.0) as client:
            return {status.version for status in client.status() if status.state == "AVAILABLE"}
    except Exception as error:  # unreachable, not serving the model yet: the label waits
        logger.info("cannot read the version status at %s: %s", url, error)
        return None


def sync_tracks(target: RolloutTarget, state: RolloutState | None = None) -> dict[Track, str]:
    """Moves each track's models.config one phase towards the state (`serving.rollout.tracks`); once both
    tracks serve what the state says, retention removes the versions `serving.canary.keep_versions` lets go."""
    report = advance_tracks(
        target.model_base,
        target.container_base,
        target.model_name,
        state or read_rollout(target.model_base),
        lambda track: available_versions(target.url(track), target.model_name),
    )
    if report and all(line.startswith("serves") for line in report.values()):
        removed = actions.prune(target.model_base, target.settings.keep_versions, by="retention")
        if removed:
            report["stable"] += f"; retention removed {', '.join(map(str, removed))}"
    return report


def track_signals(
    target: RolloutTarget, track: Track, version: int, prometheus: str | None, window_seconds: int
) -> TrackSignals:
    """One track's signals, from `prometheus` when given, else the track's servers' `/metrics`.

    Raises:
        EvidenceError: the source cannot be read, or the track has no URL and no Prometheus is given.
    """
    if prometheus:
        return PrometheusSignals(prometheus, window_seconds).signals(target.model_name, version, track)
    url = target.url(track)
    if not url:
        raise EvidenceError(
            f"no evidence source for the {track} servers: set serving.canary.{track}_url to their REST address "
            "(their /metrics are read), or pass --prometheus URL"
        )
    return signals_from_metrics(
        read_metrics(url.rstrip("/") + target.settings.metrics_path), target.model_name, version
    )


def replay_agreement(target: RolloutTarget, state: RolloutState, images: Sequence[bytes]) -> Agreement | None:
    """Both tracks' top class on the same `images` (each asked for its own version); None without images or
    URLs."""
    if not images or not target.settings.canary_url or not target.settings.stable_url or state.canary is None:
        return None
    from serving.rest_client import RestClient

    answers = []
    for track, version in (("canary", state.canary), ("stable", state.stable)):
        with RestClient(target.url(track), target.model_name, timeout=30.0) as client:  # type: ignore[arg-type]
            classes: list[int] = []
            for start in range(0, len(images), REPLAY_BATCH):  # within any server's per-request row limit
                batch = list(images[start : start + REPLAY_BATCH])
                classes += client.predict_images(batch, version=version).classes.tolist()
            answers.append(classes)
    return Agreement(len(images), sum(a == b for a, b in zip(*answers, strict=True)))


def analyze(
    target: RolloutTarget, prometheus: str | None, window_seconds: int | None, replay: Sequence[bytes] = ()
) -> Verdict:
    """The verdict on the current canary.

    Raises:
        RolloutStateError: there is no canary to judge.
        EvidenceError: a source of evidence cannot be read.
    """
    state = read_rollout(target.model_base)
    if state.canary is None or state.stable is None:
        raise RolloutStateError(
            f"{target.model_base} has no canary to analyze (stable is {state.stable}); a push under "
            "serving.rollout: canary, or `tfxp rollout start --version N`, starts one"
        )
    window = window_seconds or target.settings.window_seconds
    canary = track_signals(target, "canary", state.canary, prometheus, window)
    stable = track_signals(target, "stable", state.stable, prometheus, window)
    agreement = replay_agreement(target, state, replay)
    return judge(canary, stable, agreement, target.settings)


def apply_verdict(target: RolloutTarget, verdict: Verdict, by: str) -> RolloutState:
    """Records `verdict` and acts on it: promote or roll back (then the tracks move and retention runs), or hold."""
    record = (by, verdict.reason, verdict.evidence, verdict.thresholds)
    if verdict.action == "hold":
        return actions.hold(target.model_base, *record)
    state = actions.judge_canary(target.model_base, verdict.action, *record)
    sync_tracks(target, state)
    return state
