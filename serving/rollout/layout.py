"""Where a model's rollout lives under its base path, beside the versions TF Serving reads.

`<model base>/tfxp_rollout/` is not a version (TF Serving skips names that are not digits,
`foundation.publish.version_number`), so the servers polling the base path never see it as one. It holds:

- `state.json`: which version is `stable`, which is `canary`, the rolled-back ones (`serving.rollout.state`);
- `decisions/<sequence>.json`: one file per decision, never rewritten (the append-only record);
- `<track>.models.config`: the models.config the `stable` and the `canary` servers each read and poll
  (`serving.rollout.tracks`); TF Serving's `--model_config_file` reads local paths and buckets alike.

Example:
    track_config_path("/models/digits", "canary")  # '/models/digits/tfxp_rollout/canary.models.config'
"""

from __future__ import annotations

from typing import Literal

ROLLOUT_DIR = "tfxp_rollout"
STATE_FILE = "state.json"
DECISIONS_DIR = "decisions"
Track = Literal["stable", "canary"]
TRACKS: tuple[Track, ...] = ("stable", "canary")


def rollout_dir(model_base: str) -> str:
    """`<model base>/tfxp_rollout`."""
    return f"{model_base.rstrip('/')}/{ROLLOUT_DIR}"


def track_config_path(model_base: str, track: Track) -> str:
    """The models.config the `track` servers read: `<model base>/tfxp_rollout/<track>.models.config`."""
    return f"{rollout_dir(model_base)}/{track}.models.config"
