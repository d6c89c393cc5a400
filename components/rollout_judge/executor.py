"""The RolloutJudge's executor: carry the state to the track servers, judge the canary, act, record."""

from __future__ import annotations

import logging

from tfx.dsl.components.base import base_executor

from components.executor_types import ArtifactDict, ExecProperties
from edge.held import settle_held
from serving.canary_options import CanarySettings
from serving.rollout import actions
from serving.rollout.evidence import EvidenceError
from serving.rollout.operate import RolloutTarget, analyze, apply_verdict, sync_tracks
from serving.rollout.state import RolloutState, read_rollout

EDGE_BASE_KEY = "edge_base"

logger = logging.getLogger(__name__)


class Executor(base_executor.BaseExecutor):
    """Judges the canary the last run pushed (`components.rollout_judge.component`)."""

    def Do(self, input_dict: ArtifactDict, output_dict: ArtifactDict, exec_properties: ExecProperties) -> None:  # noqa: N802  (TFX's API)
        target = RolloutTarget(
            model_base=exec_properties["model_base"],
            container_base=exec_properties["container_base"],
            model_name=exec_properties["model_name"],
            settings=CanarySettings.model_validate_json(exec_properties["canary"]),
        )
        by = f"run:{getattr(self._context, '_pipeline_run_id', None) or 'unknown'}"
        for track, line in sync_tracks(target).items():
            logger.info("rollout: %s servers: %s", track, line)
        state = _judge(target, target.settings.prometheus_url or None, by)
        if edge_base := exec_properties.get(EDGE_BASE_KEY):
            # A held device release goes out once its SavedModel is stable, and is dropped once it is rolled back.
            for settled in settle_held(edge_base, target.model_base, state.stable, state.rolled_back):
                logger.info("rollout: %s", settled.describe())


def _judge(target: RolloutTarget, prometheus: str | None, by: str) -> RolloutState:
    """Judges the canary, if any, and acts on the verdict; evidence that cannot be read is a recorded hold."""
    state = read_rollout(target.model_base)
    if state.canary is None:
        logger.info("rollout: no canary to judge (stable %s)", state.stable)
        return state
    try:
        verdict = analyze(target, prometheus, None)
    except EvidenceError as error:
        logger.warning("rollout: canary %d held: %s", state.canary, error)
        return actions.hold(target.model_base, by, f"evidence not readable: {error}", {}, {})
    state = apply_verdict(target, verdict, by)
    logger.info("rollout: %s: %s (stable %s, canary %s)", verdict.action, verdict.reason, state.stable, state.canary)
    return state
