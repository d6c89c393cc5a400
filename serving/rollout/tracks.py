"""What the `stable` and the `canary` servers serve, and how a decision reaches them: a rewrite of each track's
models.config in TF Serving's two phases.

Each track's servers read `tfxp_rollout/<track>.models.config` and re-read it every
`--model_config_file_poll_wait_seconds`; no cluster credentials are needed to move a label. TF Serving checks
labels before it adds the new config's versions (`server_core.cc:512-514`, `UpdateModelVersionLabelMap` at
:549-584): with `--allow_version_labels_for_unavailable_models` a label may point at a version not yet loaded
only when that label is not in use with another version (:563-571). So one write that adds version N+1 and moves
the in-use `stable` onto it is refused at every poll, and N+1 never loads. A move therefore takes two writes:

1. **load**: the track serves its current versions plus the incoming ones, labels unchanged;
2. **label**: once every incoming version is AVAILABLE on that track's servers, the final versions and labels.

Which phase a track is in is read back from its file (`track_phase`), so a crash between the phases resumes at
the next `advance_tracks`. A request without a version goes to the newest loaded version, so during phase 1 the
track's unlabelled traffic already reaches the incoming version; each track serves one version otherwise.

Example:
    target = track_target(state, "canary")  # TrackServing(versions=(7,), labels={"canary": 7})
    advance_tracks(model_base, "/models/digits", "digits", state, available={"canary": {6, 7}})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from foundation import paths
from foundation.bounded import read_document
from serving.model_config import ModelConfig, VersionPolicy, model_config_file_text, parse_model_config
from serving.rollout.layout import TRACKS, Track, track_config_path
from serving.rollout.state import RolloutState

Phase = Literal["settled", "loading", "new"]


@dataclass(frozen=True)
class TrackServing:
    """What one track's servers serve: the versions (a `specific` policy) and their labels."""

    versions: tuple[int, ...]
    labels: dict[str, int] = field(default_factory=dict)


def track_target(state: RolloutState, track: Track) -> TrackServing | None:
    """What `track` serves once the state's decisions have reached it; None before any version is stable.

    The stable servers serve `stable`; the canary servers the canary, or `stable` when there is none.
    """
    if state.stable is None:
        return None
    if track == "canary" and state.canary is not None:
        return TrackServing((state.canary,), {"canary": state.canary})
    return TrackServing((state.stable,), {"stable": state.stable})


def read_track(model_base: str, track: Track) -> TrackServing | None:
    """What `track`'s models.config says now; None when it was never written."""
    path = track_config_path(model_base, track)
    if not paths.exists(path):
        return None
    (model,) = parse_model_config(read_document(path, f"model config file {path}"), Path(path))
    return TrackServing(model.policy.versions, dict(model.labels))


def next_write(current: TrackServing | None, target: TrackServing) -> tuple[TrackServing, Phase]:
    """The next models.config for a track serving `current` that must end at `target`, and its phase.

    Returns:
        (`target`, "settled") when nothing stands in the way (no version to load, or a first write); else
        phase 1, (current versions + incoming, current labels), "loading".
    """
    if current is None:
        return target, "new"
    incoming = set(target.versions) - set(current.versions)
    if not incoming or current.labels == target.labels:
        return target, "settled"
    return TrackServing(tuple(sorted(set(current.versions) | incoming)), dict(current.labels)), "loading"


def advance_tracks(
    model_base: str,
    container_base: str,
    model_name: str,
    state: RolloutState,
    available: Mapping[Track, set[int] | None] | Callable[[Track], set[int] | None],
) -> dict[Track, str]:
    """Moves each track's models.config one step towards what `state` says it serves.

    Args:
        model_base: The model's base path as tfxp writes it (local or `gs://`).
        container_base: The same as the servers see it (`ServingOptions.container_base_path`).
        model_name: The served model's name.
        state: The rollout state.
        available: Per track, the versions its servers report AVAILABLE (None: unknown, so phase 2 waits).

    Returns:
        Per track, what happened in words (for `tfxp rollout status` and the run notice).
    """
    report: dict[Track, str] = {}
    for track in TRACKS:
        target = track_target(state, track)
        if target is None:
            continue
        current = read_track(model_base, track)
        if current == target:
            report[track] = f"serves {_describe(target)}"
            continue
        loaded = available(track) if callable(available) else available.get(track)
        if current is not None and set(target.versions) <= set(current.versions) and current.labels != target.labels:
            # Phase 1 was written: the label moves once the incoming versions are AVAILABLE on that track.
            incoming = set(target.versions) - set(current.labels.values())
            if loaded is None or not incoming <= loaded:
                waiting = ", ".join(map(str, sorted(incoming)))
                report[track] = f"waiting for version {waiting} to be AVAILABLE before the label moves"
                continue
            written, phase = target, "settled"
        else:
            written, phase = next_write(current, target)
        labels = dict(sorted(written.labels.items()))
        _write(model_base, track, ModelConfig(model_name, Path(container_base), _policy(written), labels))
        report[track] = (
            f"loading {', '.join(map(str, sorted(set(written.versions) - set(current.versions if current else ()))))}"
            f" (labels stay: {_labels(written.labels)})"
            if phase == "loading"
            else f"serves {_describe(written)}"
        )
    return report


def _policy(serving: TrackServing) -> VersionPolicy:
    return VersionPolicy("specific", versions=tuple(sorted(serving.versions)))


def _write(model_base: str, track: Track, model: ModelConfig) -> None:
    # Replaced whole: a polling server reads the old file or the new one, never half of it.
    text = model_config_file_text(model, base_path=str(model.base_path))
    paths.replace_text(track_config_path(model_base, track), text)


def _describe(serving: TrackServing) -> str:
    return f"version {', '.join(map(str, serving.versions))} ({_labels(serving.labels)})"


def _labels(labels: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={version}" for name, version in sorted(labels.items())) or "no labels"
