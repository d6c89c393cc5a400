"""Pusher executor that publishes every version through `foundation.publish`, on local paths and buckets alike.

TFX's Pusher names a version by the clock and copies into it (`SAVED_MODEL_FILE` last); ours publishes through
`publish_version`: a hidden staging name first, then one rename locally or a file-by-file move on a bucket with
`SAVED_MODEL_FILE` last, and a push record naming the model's identity (`foundation.model_identity`: what it
holds, not its path), so a re-run over the same model finds its version instead of pushing it twice, and another
model at a path an earlier one used is a new version. The Kubeflow path (a `gs://` serving base) and `tfxp run`
follow that one rule. The record also keeps the SavedModel's path and the spans the model was trained on (from
the blessing), which the drift checks read from the served version.

Under `serving.rollout: canary` (the Pusher's `custom_config`, `rollout_config`) the published version goes into
the model's rollout state instead of taking traffic: the first version of a base becomes stable, any later one the
canary, and `stable` never moves here (`serving.rollout.actions.publish_version_state`); the track servers'
models.config files take the first of their two phases (`serving.rollout.tracks`). Under `direct`, a base that
holds a rollout state is refused: its servers follow the state, not the newest version.
"""

from __future__ import annotations

import os
from typing import Any

from absl import logging
from tfx.components.pusher import executor as pusher_executor
from tfx.components.pusher.component import Pusher
from tfx.dsl.components.base import executor_spec
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, proto_utils

from components.executor_types import ArtifactDict, ExecProperties
from components.pusher.driver import PushedVersionsDriver
from foundation.bounded import parse_json
from foundation.contract import SAVED_MODEL_FILE
from foundation.data.spans import SPANS_PROPERTY, parse_spans
from foundation.model_identity import (
    MODEL_IDENTITY_PROPERTY,
    changed_versions,
    find_model_version,
    model_identity,
    version_holds,
)
from foundation.publish import SAVED_MODEL_KEY, TRAINED_SPANS_KEY, publish_version
from serving.rollout.state import refuse_direct_push_over_rollout

ROLLOUT_KEY = "rollout"
CUSTOM_CONFIG_KEY = "custom_config"
PUBLISHED_NOW_PROPERTY = "published_now"
"""PushedModel custom property: 1 when this execution created the version, 0 when it found it published."""
PUSH_NOTE_PROPERTY = "push_note"
"""PushedModel custom property: why the model was pushed again although a version's record names it (its files
changed since; `repush_note`), for the run summary; absent otherwise."""


class AtomicPusherExecutor(pusher_executor.Executor):
    """Like TFX's Pusher for file-system destinations, but a version is never seen half-written and a model
    artifact is pushed once (`foundation.publish`)."""

    def Do(self, input_dict: ArtifactDict, output_dict: ArtifactDict, exec_properties: ExecProperties) -> None:  # noqa: N802  (TFX's API)
        self._log_startup(input_dict, output_dict, exec_properties)
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination)
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(model_push)
            return
        if destination.WhichOneof("destination") != "filesystem":
            raise ValueError("tfxp's Pusher supports file-system destinations only (push_destination.filesystem)")
        model_path = self.GetModelPath(input_dict)
        # The identity is what the model holds (`foundation.model_identity`), not its path: a path is reused when
        # the pipeline root and its ML Metadata are removed and execution ids restart. A version holding the same
        # model is this model's version (a re-run Pusher, a model retrained to the same content); any other
        # model is a new version. `SAVED_MODEL_FILE` marks a complete version, as TF Serving and TFX's Pusher
        # expect (tfx/components/pusher/executor.py:198).
        base = destination.filesystem.base_directory
        rollout = rollout_config(exec_properties)
        if not rollout:
            refuse_direct_push_over_rollout(base)
        identity = model_identity(model_path)
        # Read back from each version's files, not its push record: a version whose files changed since the push
        # (a hand-edited labels.txt) no longer holds this model, which is then pushed again as a new version.
        already = find_model_version(base, identity, model_path)
        changed = changed_versions(base, identity, model_path) if already is None else {}
        spans = trained_on(input_dict)
        version_dir = already or publish_version(
            model_path,
            base,
            identity=identity,
            last_file=SAVED_MODEL_FILE,
            record_extra={SAVED_MODEL_KEY: model_path, **({TRAINED_SPANS_KEY: spans} if spans else {})},
            holds=lambda version: version_holds(version, identity),
        )
        if changed:
            note = repush_note(changed, version_dir)
            logging.warning("Pusher: %s", note)
            model_push.set_string_custom_property(PUSH_NOTE_PROPERTY, note)
        io_utils.copy_dir(model_path, model_push.uri)  # the artifact's own archive copy, as TFX does
        self._MarkPushed(model_push, pushed_destination=version_dir, pushed_version=os.path.basename(version_dir))
        model_push.set_string_custom_property(MODEL_IDENTITY_PROPERTY, identity)
        # 0: the version was there already (a rerun over the same model, e.g. after KFP served the Trainer from
        # its cache); the run record tells "pushed version N" from "no new data" by it.
        model_push.set_int_custom_property(PUBLISHED_NOW_PROPERTY, int(already is None))
        if rollout:
            self._enter_rollout(base, int(os.path.basename(version_dir)), rollout)

    def _enter_rollout(self, base: str, version: int, rollout: dict[str, Any]) -> None:
        from serving.rollout.actions import publish_version_state
        from serving.rollout.tracks import advance_tracks

        run = getattr(self._context, "_pipeline_run_id", None) or "unknown"
        state = publish_version_state(base, version, by=f"run:{run}")
        advance_tracks(base, rollout["container_base"], rollout["model_name"], state, available={})


def repush_note(changed: dict[str, list[str]], version_dir: str) -> str:
    """Why the model went to `version_dir` although the `changed` versions' records name it (`changed_versions`).

    Example:
        repush_note({"serving/digits/17": ["assets/labels.txt"]}, "serving/digits/18")
        # "version 17 no longer holds the model its push record names (its assets/labels.txt changed since the
        #  push), so the model was pushed again as version 18; version 17 is left as it is"
    """
    names = ", ".join(os.path.basename(path.rstrip("/")) for path in changed)
    parts = sorted({part for found in changed.values() for part in found})
    what = " and ".join(parts) or "its files"
    plural = "s" if len(changed) > 1 else ""
    return (
        f"version{plural} {names} no longer hold{'' if plural else 's'} the model {'their' if plural else 'its'} push "
        f"record names ({what} changed since the push), so the model was pushed again as version "
        f"{os.path.basename(version_dir.rstrip('/'))}; version{plural} {names} {'are' if plural else 'is'} left as "
        f"{'they are' if plural else 'it is'}"
    )


def rollout_config(exec_properties: ExecProperties) -> dict[str, Any]:
    """The Pusher's rollout settings (`pipeline.pipeline` writes them for `serving.rollout: canary`); {} = direct."""
    text = exec_properties.get(CUSTOM_CONFIG_KEY) or "{}"
    config = parse_json(text) if isinstance(text, str) else text
    # TFX writes an unset custom_config as JSON `null`.
    return dict(config.get(ROLLOUT_KEY) or {}) if isinstance(config, dict) else {}


def trained_on(input_dict: ArtifactDict) -> list[int]:
    """The spans the model was trained on, as the Evaluator recorded them on the blessing
    (`components.baseline.evaluator.record_spans`); [] for data without spans."""
    blessings = input_dict.get(standard_component_specs.MODEL_BLESSING_KEY) or []
    return parse_spans(str(blessings[0].get_string_custom_property(SPANS_PROPERTY) or "")) if blessings else []


class AtomicPusher(Pusher):
    """TFX's Pusher with AtomicPusherExecutor (versions appear complete in TF Serving's base path, local or bucket)
    and a driver that makes the local runner rerun it when the versions under its destination changed or one it
    pushed is gone (`components.pusher.driver`)."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(AtomicPusherExecutor)
    DRIVER_CLASS = PushedVersionsDriver
