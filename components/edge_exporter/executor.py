"""The EdgeExporter's executor: resolve artifact paths, call `edge.export` and `edge.publish`, record the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf
from tfx import types
from tfx.components.util import model_utils
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components.edge_exporter.spec import (
    EDGE_BLESSING_KEY,
    EDGE_MODEL_KEY,
    EXAMPLES_KEY,
    HOLD_FOR_KEY,
    LABEL_OFFSET_KEY,
    MODEL_BLESSING_KEY,
    MODEL_KEY,
    OPTIONS_KEY,
    PUSH_BASE_KEY,
)
from edge.arch_gate import verify_export
from edge.export import METADATA_FORMAT, EdgeExport, export_edge_model
from edge.held import HELD_REASON, hold_edge_model, record_released, settle_held
from edge.inputs import edge_inputs
from edge.options import EdgeOptions
from edge.publish import find_edge_version, push_edge_model, reuse_published, write_edge_model, write_metadata
from serving.rollout.state import read_rollout

NOT_BLESSED_UPSTREAM = "skipped: the Evaluator did not bless the model, so no device model was made or pushed"


class Executor(base_executor.BaseExecutor):
    """Converts, evaluates against the SavedModel, gates on the accuracy drop, on MediaPipe's ImageClassifier
    agreeing with LiteRT (`edge.app_client`) and, with `edge.verify`, on the check on the emulated target, and
    pushes when blessed; a version made from the same inputs is reused instead."""

    def Do(  # noqa: N802  (TFX's executor API; TFX calls this)
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        """Writes the EdgeModel and EdgeBlessing; pushes to `push_base/<version>/` only when blessed.

        Raises:
            edge.errors.EdgeError: the model cannot be converted, evaluated or benchmarked (the message says
                why and which setting to change); the component fails rather than bless an unchecked model.
        """
        self._log_startup(input_dict, output_dict, exec_properties)
        edge_model = artifact_utils.get_single_instance(output_dict[EDGE_MODEL_KEY])
        edge_blessing = artifact_utils.get_single_instance(output_dict[EDGE_BLESSING_KEY])
        upstream = input_dict.get(MODEL_BLESSING_KEY)
        if upstream and not model_utils.is_model_blessed(artifact_utils.get_single_instance(upstream)):
            metadata = {"format": METADATA_FORMAT, "skipped": True, "blessed": False, "pushed_path": None}
            write_metadata({**metadata, "reason": NOT_BLESSED_UPSTREAM}, edge_model.uri)
            _record(edge_model, edge_blessing, blessed=False, reason=NOT_BLESSED_UPSTREAM, pushed_path=None)
            return

        model = artifact_utils.get_single_instance(input_dict[MODEL_KEY])
        saved_model = path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))
        examples = artifact_utils.get_single_instance(input_dict[EXAMPLES_KEY])
        options = EdgeOptions.model_validate_json(exec_properties[OPTIONS_KEY])
        label_offset = exec_properties[LABEL_OFFSET_KEY]
        # The same SavedModel, model-shaping options and calibration sample make the same model: a version
        # published from them is reused, not converted again (an int8 conversion is not byte-reproducible).
        inputs = edge_inputs(Path(saved_model), examples.uri, options, label_offset=label_offset)
        published = find_edge_version(exec_properties[PUSH_BASE_KEY], inputs.identity)
        if published is not None:
            reused = reuse_published(published, edge_model.uri)
            _record(edge_model, edge_blessing, True, reused["reason"], published, reused["accuracy"]["drop"])
            edge_model.set_string_custom_property("mode", reused["mode"])
            edge_model.set_string_custom_property("reused_version", reused["reused_version"])
            return
        name = str(exec_properties[PUSH_BASE_KEY]).rstrip("/").rsplit("/", 1)[-1]  # <edge base>/<model>
        export = export_edge_model(
            Path(saved_model), examples.uri, options, label_offset=label_offset, inputs=inputs, model_name=name
        )
        if options.verify:  # on the emulated target too; blessed only when that check passed (edge_metadata.json)
            export = verify_export(export, Path(saved_model), examples.uri, options, label_offset)

        pushed_path, reason = None, export.gate.reason
        serving_base = exec_properties.get(HOLD_FOR_KEY)
        if export.blessed and serving_base:
            model = str(inputs.recipe["model"])
            pushed_path, reason = _hold(
                export, edge_model.uri, exec_properties[PUSH_BASE_KEY], (saved_model, model), serving_base
            )
        elif export.blessed:
            # A rerun that produced the same bytes reuses that version instead of duplicating it.
            pushed_path = push_edge_model(export, edge_model.uri, exec_properties[PUSH_BASE_KEY])
        else:
            write_edge_model(export, edge_model.uri)
        _record(edge_model, edge_blessing, export.blessed, reason, pushed_path, export.gate.drop)
        edge_model.set_string_custom_property("mode", export.metadata["mode"])
        if options.verify:
            edge_model.set_string_custom_property("arch_check", export.metadata["arch_check"]["status"])


def _hold(
    export: EdgeExport, out_dir: str, push_base: str, made_from: tuple[str, str], serving_base: str
) -> tuple[str | None, str]:
    """Holds the blessed release until its SavedModel (`made_from`: its path and model identity) is stable
    (`edge.held`), then settles at once: the first model of a base is stable as soon as the Pusher (which runs
    before, under canary) published it. Returns the pushed path (None while held) and the reason to record."""
    saved_model, model = made_from
    hold_edge_model(export, out_dir, push_base, saved_model, model=model)
    state = read_rollout(serving_base)
    for settled in settle_held(push_base, serving_base, state.stable, state.rolled_back):
        if settled.model_identity == model and settled.version_dir is not None:
            record_released(settled.version_dir, out_dir)
            return settled.version_dir, f"{export.gate.reason}; published: its SavedModel is stable"
    return None, f"{export.gate.reason}; {HELD_REASON}"


def _record(
    edge_model: types.Artifact,
    edge_blessing: types.Artifact,
    blessed: bool,
    reason: str,
    pushed_path: str | None,
    accuracy_drop: float | None = None,
) -> None:
    edge_model.set_int_custom_property("blessed", int(blessed))
    edge_model.set_int_custom_property("pushed", int(pushed_path is not None))
    edge_model.set_string_custom_property("pushed_path", pushed_path or "")
    edge_model.set_string_custom_property("reason", reason)
    edge_blessing.set_int_custom_property("blessed", int(blessed))
    edge_blessing.set_string_custom_property("reason", reason)
    if accuracy_drop is not None:
        edge_blessing.set_float_custom_property("accuracy_drop", accuracy_drop)
    tf.io.gfile.makedirs(edge_blessing.uri)
    # An empty file whose name is the verdict, as the Evaluator's blessing has (GFile creates it on write).
    with tf.io.gfile.GFile(f"{edge_blessing.uri}/{'BLESSED' if blessed else 'NOT_BLESSED'}", "w") as handle:
        handle.write("")
