"""LoadCheck: the trained model loaded and queried in a real serving process, before the Pusher publishes it.

What TFX's InfraValidator does, on every orchestrator (InfraValidator does not run on Kubeflow v2,
tensorflow/tfx#5512), with one more check: the served answers on a sample of the eval split must equal the
SavedModel's own, in-process (`serving.load_check`). Its InfraBlessing goes to the Pusher as `infra_blessing`;
TFX's Pusher skips the push when it is not blessed (`CheckBlessing`), so the versions already published stay as
they are. `pipeline.pipeline` adds it under `serving.rollout: canary` or `serving.load_check: true`.

Example:
    load_check = LoadCheck(model=trainer.outputs["model"], examples=example_gen.outputs["examples"],
                           model_name="digits")
    pusher = AtomicPusher(..., infra_blessing=load_check.outputs["blessing"])
"""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts

from components.load_check.executor import Executor
from components.load_check.spec import LoadCheckSpec
from serving.load_check import DEFAULT_ATOL

DEFAULT_SAMPLES = 64
"""Eval examples compared: enough to catch a wrong preprocessing or signature, few enough to take seconds."""
DEFAULT_TIMEOUT_SECONDS = 300.0
"""For the server to start and load the version: a ResNet-50 loads and warms up in well under a minute."""


class LoadCheck(base_component.BaseComponent):
    """Serves the model in a model server process and blesses it when it answers like in-process.

    Args:
        model: The Trainer's Model channel.
        examples: The Examples channel; a seeded sample of its eval split is sent.
        model_name: The name to serve it under (`serving.model_name`).
        samples: Eval examples compared.
        timeout_seconds: How long the server may take to load the version.
        atol: Largest probability difference that still agrees.
    """

    SPEC_CLASS = LoadCheckSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        model: types.BaseChannel,
        examples: types.BaseChannel,
        model_name: str,
        samples: int = DEFAULT_SAMPLES,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        atol: float = DEFAULT_ATOL,
    ) -> None:
        spec = LoadCheckSpec(
            model=model,
            examples=examples,
            model_name=model_name,
            samples=samples,
            timeout_seconds=timeout_seconds,
            atol=atol,
            blessing=types.Channel(type=standard_artifacts.InfraBlessing),
        )
        super().__init__(spec=spec)
