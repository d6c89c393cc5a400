"""RolloutJudge: judges the canary the last run pushed, as the run's first step (`serving.rollout: canary`).

Every other component waits for it (`pipeline.pipeline.create_components`), so the ServedBaseline, warm start and
the drift checks of this run already see the decision: a promoted canary is the baseline, a rolled-back one is
never used again. The work is `serving.rollout.operate` (the same as `tfxp rollout analyze --apply`); evidence
that cannot be read (the servers or the Prometheus are not reachable from where the run executes) is recorded
as a `hold` naming the reason, and the run goes on: a run never fails because the serving side is down.

Example:
    judge = RolloutJudge(model_base="tfxp_output/serving/digits", container_base="/models/digits",
                         model_name="digits", canary=settings.model_dump_json())
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components.fingerprint_driver import FingerprintDriver
from components.rollout_judge.executor import EDGE_BASE_KEY, Executor

COMPONENT_ID = "RolloutJudge"
JUDGED_AT_KEY = "judged_at"


class RolloutJudgeSpec(ComponentSpec):
    """Parameters: the model's base path as tfxp writes it and as the servers read it, its name, the
    `serving.canary` section as JSON (its `prometheus_url`: where the signals are read; "" = the servers'
    /metrics), and the device model's base
    (`edge.enabled`: held releases are settled, `edge.held`). No artifacts: what it
    decides is the rollout state beside the versions (`serving.rollout.state`)."""

    PARAMETERS: ClassVar[dict[str, ExecutionParameter]] = {
        "model_base": ExecutionParameter(type=str),
        "container_base": ExecutionParameter(type=str),
        "model_name": ExecutionParameter(type=str),
        "canary": ExecutionParameter(type=str),
        EDGE_BASE_KEY: ExecutionParameter(type=str, optional=True),
        JUDGED_AT_KEY: ExecutionParameter(type=str, optional=True),
    }
    INPUTS: ClassVar[dict[str, ChannelParameter]] = {}
    OUTPUTS: ClassVar[dict[str, ChannelParameter]] = {}


class JudgeEveryRunDriver(FingerprintDriver):
    """The evidence changes with every request served, so the judge runs in every run (never from the cache)."""

    FINGERPRINT_KEY = JUDGED_AT_KEY

    def fingerprint(self, execution_info: Any) -> str:
        return f"{time.time_ns()}"


class RolloutJudge(base_component.BaseComponent):
    """Judges the current canary and acts on the verdict; see the module docstring."""

    SPEC_CLASS = RolloutJudgeSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
    DRIVER_CLASS = JudgeEveryRunDriver

    def __init__(
        self,
        model_base: str,
        container_base: str,
        model_name: str,
        canary: str,
        edge_base: str = "",
    ) -> None:
        spec = RolloutJudgeSpec(
            model_base=model_base,
            container_base=container_base,
            model_name=model_name,
            canary=canary,
            edge_base=edge_base,
            judged_at="",
        )
        super().__init__(spec=spec)
