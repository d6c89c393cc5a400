"""The multi-node settings that travel with a run: how the Trainer task on Kubeflow starts its TFJob.

Plain pydantic data (no TensorFlow, no Kubernetes client): `tfxp compile` writes it into the Trainer's
custom_config (`components.trainer.options.RunOptions.tfjob`), and `components.multinode.tfjob_launch` reads it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from foundation.config_section import ConfigSection


class TfJobLaunch(ConfigSection):
    """How the Trainer task on Kubeflow starts its workers (`trainer.workers` > 1): a Training Operator TFJob.

    Written by `tfxp compile` into the Trainer's custom_config, so the manifest travels inside the compiled spec.

    Attributes:
        manifest: The TFJob with placeholders for its name and the workers' FnArgs
            (`components.multinode.tfjob.tfjob_template`); the Trainer task binds them when it runs.
        deadline_seconds: The longest the job may take; the task deletes it then and fails.
        schedule_timeout_seconds: The longest the workers may wait to be scheduled.
        shared_dir: Where the task stages the Examples and the workers write the model when the artifacts are
            not on `gs://` (a folder on a volume every pod mounts); "" = the artifacts' own URIs.
    """

    manifest: dict[str, Any]
    deadline_seconds: int = Field(172_800, ge=1)
    schedule_timeout_seconds: int = Field(1_800, ge=1)
    shared_dir: str = ""
