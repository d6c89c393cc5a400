"""The rollout's moves: publish a pushed version, start a canary, promote it, roll it back, and prune old versions.

Each move is a change of the rollout state (`serving.rollout.state.update_rollout`, recorded as a decision) and
is refused with a message when it makes no sense (no canary to promote, a rolled-back version to start). After
the state changes, `serving.rollout.tracks.advance_tracks` carries it to the servers' models.config files.

Example:
    state = publish_version_state(model_base, 1796090000, by="run:nightly-42")  # the canary, or the first stable
    state = judge_canary(model_base, "promote", by="person:ana", reason="looked good on the dashboard")
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

from foundation import paths
from foundation.contract import SAVED_MODEL_FILE
from foundation.publish import list_versions
from serving.rollout.layout import TRACKS
from serving.rollout.state import RolloutState, RolloutStateError, update_rollout
from serving.rollout.tracks import read_track

logger = logging.getLogger(__name__)


def publish_version_state(model_base: str, version: int, by: str) -> RolloutState:
    """Records a version the Pusher just published: the first of a base becomes `stable`, any later one the
    canary (replacing a canary not judged yet, which stays on disk for `tfxp rollout start`).

    A rolled-back version published again (a rerun over the same model artifact finds its version) changes
    nothing: it is never served again.
    """

    def change(state: RolloutState) -> RolloutState | None:
        if version in state.rolled_back or version in (state.stable, state.canary):
            return None
        if state.stable is None:
            return state.decide("publish", by, "the first version of this model becomes stable", stable=version)
        reason = "the pushed version becomes the canary; stable stays"
        if state.canary is not None:
            reason += f" (it replaces canary {state.canary}, never judged)"
        return state.decide("publish", by, reason, canary=version)

    return update_rollout(model_base, change)


def start(model_base: str, version: int, by: str, reason: str = "") -> RolloutState:
    """Puts an existing version onto the canary.

    Raises:
        RolloutStateError: the version is not a complete version under the base, is stable already, was rolled
            back, or nothing is stable yet.
    """
    present = complete_versions(model_base)
    if version not in present:
        raise RolloutStateError(
            f"version {version} is not a complete version under {model_base} (it has: "
            f"{', '.join(map(str, present)) or 'none'}); push it first or pick one of those"
        )

    def change(state: RolloutState) -> RolloutState:
        if state.stable is None:
            raise RolloutStateError(f"{model_base} has no stable version yet; the first push becomes stable")
        if version == state.stable:
            raise RolloutStateError(f"version {version} is stable already; start a newer version as the canary")
        if version in state.rolled_back:
            raise RolloutStateError(
                f"version {version} was rolled back ({_rollback_of(state, version)}); a rolled-back version is "
                "never served again: push a new model instead"
            )
        return state.decide("start", by, reason or f"version {version} starts as the canary", canary=version)

    return update_rollout(model_base, change)


def judge_canary(
    model_base: str,
    action: Literal["promote", "rollback"],
    by: str,
    reason: str = "",
    evidence: Mapping[str, Any] | None = None,
    thresholds: Mapping[str, Any] | None = None,
) -> RolloutState:
    """Promotes (`promote`) or rolls back (`rollback`) the canary, recording who decided, why and on what.

    Raises:
        RolloutStateError: there is no canary.
    """

    def change(state: RolloutState) -> RolloutState:
        if state.canary is None:
            what = "promote" if action == "promote" else "roll back"
            raise RolloutStateError(f"{model_base} has no canary to {what} (stable is {state.stable})")
        if action == "promote":
            why = reason or f"canary {state.canary} becomes stable, replacing {state.stable}"
            return state.decide(action, by, why, evidence, thresholds, stable=state.canary, canary=None)
        why = reason or f"canary {state.canary} is taken off; stable {state.stable} serves all traffic"
        rolled_back = (*state.rolled_back, state.canary)
        return state.decide(action, by, why, evidence, thresholds, canary=None, rolled_back=rolled_back)

    return update_rollout(model_base, change)


def hold(
    model_base: str, by: str, reason: str, evidence: Mapping[str, Any], thresholds: Mapping[str, Any]
) -> RolloutState:
    """Records that the analysis did not decide (too little evidence); the labels stay."""
    return update_rollout(model_base, lambda state: state.decide("hold", by, reason, evidence, thresholds))


def complete_versions(model_base: str) -> list[int]:
    """The complete versions under the base (`SAVED_MODEL_FILE` present), ascending."""
    return sorted(int(paths.name_of(path)) for path in list_versions(model_base, required_file=SAVED_MODEL_FILE))


def prunable(
    state: RolloutState, present: list[int], keep: int, in_use: frozenset[int] | set[int] = frozenset()
) -> list[int]:
    """The versions retention removes: all but stable, the canary, those a track's models.config still names
    (`in_use`: a move between its two phases) and the `keep` newest others.

    Rolled-back versions count among the others (the record keeps their numbers, and `publish_version_state`
    still refuses them if their model is pushed again).
    """
    labelled = {state.stable, state.canary, *in_use}
    others = sorted((version for version in present if version not in labelled), reverse=True)
    return sorted(others[keep:])


def prune(model_base: str, keep: int, by: str) -> list[int]:
    """Removes the versions `prunable` names, recording the decision; returns them."""
    removed: list[int] = []

    def change(state: RolloutState) -> RolloutState | None:
        in_use = {
            version for track in TRACKS if (serving := read_track(model_base, track)) for version in serving.versions
        }
        removed[:] = prunable(state, complete_versions(model_base), keep, in_use)
        if not removed:
            return None
        reason = f"retention keeps stable, the canary and {keep} more; removes {', '.join(map(str, removed))}"
        return state.decide("prune", by, reason, {"removed": list(removed)}, {"keep_versions": keep})

    update_rollout(model_base, change)
    for version in removed:
        paths.remove_tree(paths.join(model_base, str(version)))
        logger.info("rollout retention removed version %d of %s", version, model_base)
    return removed


def _rollback_of(state: RolloutState, version: int) -> str:
    last = state.last_decision
    if last is not None and last.action == "rollback" and last.before.get("canary") == version:
        return f"decision {last.sequence}: {last.reason}"
    return "see `tfxp rollout status`"
