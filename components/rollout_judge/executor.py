"""The RolloutJudge's executor: carry the state to the track servers, judge the canary, act, record."""

from __future__ import annotations

import logging

from tfx.dsl.components.base import base_executor

from components.executor_types import ArtifactDict, ExecProperties
from serving.canary_options import CanarySettings
from serving.rollout import actions
from serving.rollout.evidence import EvidenceError
from serving.rollout.operate import RolloutTarget, analyze, apply_verdict, sync_tracks
from serving.rollout.state import read_rollout

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
        state = read_rollout(target.model_base)
        if state.canary is None:
            logger.info("rollout: no canary to judge (stable %s)", state.stable)
            return
        try:
            verdict = analyze(target, exec_properties.get("prometheus") or None, None)
        except EvidenceError as error:
            actions.hold(target.model_base, by, f"evidence not readable: {error}", {}, {})
            logger.warning("rollout: canary %d held: %s", state.canary, error)
            return
        state = apply_verdict(target, verdict, by)
        logger.info(
            "rollout: %s: %s (stable %s, canary %s)", verdict.action, verdict.reason, state.stable, state.canary
        )
