"""The container entrypoint of every TFX task on Kubeflow: TFX's v2 executor runner, given the executor input as
the open-source KFP backend builds it.

TFX's `kubeflow_v2_run_executor` was written against Vertex AI Pipelines, whose executor input carries each
input artifact's type and `gs://` URIs. Open-source KFP (2.0 to master, read at kubeflow/pipelines commit
7b70c7b) differs in three ways, each of which fails every task before any tfxp code runs; this module fixes
them on the way in and out, then calls TFX's runner unchanged (`kubeflow_v2_run_executor.main`):

1. **Input artifact types are empty.** The driver rebuilds upstream artifacts from MLMD with
   `Schema: ""` (`backend/src/v2/metadata/client.go:1144`, `OutputArtifact.ToRuntimeArtifact` :245-258), so
   the type is `instanceSchema: ""` and TFX's `_retrieve_class_path` does `yaml.safe_load("").get(...)`
   (tensorflow/tfx#7768). The task's own `--json_serialized_inputs_spec_args` (compiled by TFX) declares
   every input's type: it is restored from there. An input artifact's `name` is its MLMD id there
   (`metadata/converter.go:187`); TFX hashes it into an id, which is all it needs.
2. **The launcher adds outputs of its own.** With `publish_logs` on (the default since KFP 2.5) the driver
   adds `executor-logs` of schema title `system.Artifact` (`driver/driver.go:747-758`), which TFX would
   import as a class path. Outputs typed `system.*` are the launcher's: they are removed here and the
   launcher writes them (its log writer, `launcher_v2.go:632`).
3. **Artifact URIs TensorFlow cannot open.** The default pipeline root is `minio://mlpipeline/v2/artifacts`
   (`config/env.go:38`) and S3 roots are common; TensorFlow has no `minio://`/`s3://` filesystem in the tfxp
   image. The launcher downloads every input to `LocalPathForURI(uri)` before the task and uploads every
   output from there after it (`launcher_v2.go:927-1004`, :778-857, :1239), so such URIs are replaced by
   those local paths for the executor, and the original URIs are written back into the executor output:
   the launcher takes a non-empty URI from it (`mergeRuntimeArtifacts`, :1188) and uploads from that URI's
   local path. `gs://` stays direct (TensorFlow streams it; Beam on Dataflow needs it).

Parameters named `tfxp_cache_*` exist only to key KFP's cache (see `components.kfp.fingerprint_task`); they
are removed before TFX parses the execution properties, and the spans the data fingerprint was taken of become
ImportExampleGen's `selected_spans`, so it reads what keyed its cache. Vertex AI's executor input passes through
unchanged.

Example (the compiled command of every TFX task):
    python -m components.kfp.entrypoint --executor_class_path ... --json_serialized_invocation_args '{{$}}' \
        --json_serialized_inputs_spec_args '{...}'
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from components.data.fingerprint import fingerprinted_spans
from components.kfp.fingerprint_task import DATA_OUTPUT
from components.kfp.launcher_paths import local_path_for_uri, opens_directly
from foundation.data.spans import SELECTED_SPANS_KEY
from foundation.errors import TfxpError

TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
"""The module TFX's compiler runs in every task's container."""
ENTRYPOINT = "components.kfp.entrypoint"
"""This module: what `tfxp compile` runs instead."""
CACHE_KEY_PREFIX = "tfxp_cache_"
"""Input parameters with this prefix only key KFP's cache; the executor never sees them."""
LAUNCHER_TYPE_PREFIX = "system."
"""Schema titles of artifacts the launcher itself writes (`executor-logs` is `system.Artifact`)."""


class EntrypointError(TfxpError, ValueError):
    """The executor input cannot be given to TFX (the message names the input and what is missing)."""


@dataclass
class AdaptedInput:
    """What `adapt_executor_input` changed.

    Attributes:
        local_to_remote: Local path given to the executor → the artifact URI it stands for.
        restored_types: Input keys whose empty type was restored from the inputs spec.
        dropped_outputs: Launcher-managed output keys removed.
        dropped_parameters: Cache-key parameters removed.
        selected_spans: The spans handed to ImportExampleGen from the data fingerprint (`3,4`), or "".
    """

    local_to_remote: dict[str, str] = field(default_factory=dict)
    restored_types: list[str] = field(default_factory=list)
    dropped_outputs: list[str] = field(default_factory=list)
    dropped_parameters: list[str] = field(default_factory=list)
    selected_spans: str = ""


def _has_type(schema: pipeline_spec_pb2.ArtifactTypeSchema) -> bool:
    kind = schema.WhichOneof("kind")
    return bool(kind and getattr(schema, kind))


def _local(artifact: pipeline_spec_pb2.RuntimeArtifact, adapted: AdaptedInput, root: str | None) -> None:
    if opens_directly(artifact.uri):
        return
    local = local_path_for_uri(artifact.uri, root)
    adapted.local_to_remote[local] = artifact.uri
    artifact.uri = local


def adapt_executor_input(
    executor_input: pipeline_spec_pb2.ExecutorInput,
    inputs_spec: pipeline_spec_pb2.ComponentInputsSpec | None,
    launcher_root: str | None = None,
) -> AdaptedInput:
    """Makes `executor_input` (changed in place) what TFX's v2 runner can read; see the module docstring.

    Args:
        executor_input: As the driver built it (`{{$}}`).
        inputs_spec: The task's `--json_serialized_inputs_spec_args`; None when the command has none.
        launcher_root: The directory standing for `/` in the launcher's local paths (default: the environment's).

    Returns:
        What changed, with the local → remote URI map that `restore_output_uris` needs.

    Raises:
        EntrypointError: an input artifact without a type that the inputs spec does not declare either.
        components.kfp.launcher_paths.LauncherPathError: a URI neither TensorFlow nor the launcher can open.
    """
    adapted = AdaptedInput()
    for key, artifacts in executor_input.inputs.artifacts.items():
        declared = inputs_spec.artifacts[key].artifact_type if inputs_spec and key in inputs_spec.artifacts else None
        for artifact in artifacts.artifacts:
            if not _has_type(artifact.type):
                if declared is None or not _has_type(declared):
                    raise EntrypointError(
                        f"input artifact {key} has no type (open-source KFP rebuilds inputs from MLMD without "
                        "one) and the task's --json_serialized_inputs_spec_args does not declare it; recompile "
                        "the pipeline with `tfxp compile`"
                    )
                artifact.type.CopyFrom(declared)
                adapted.restored_types.append(key)
            _local(artifact, adapted, launcher_root)
    for key in sorted(executor_input.outputs.artifacts):
        artifacts = executor_input.outputs.artifacts[key].artifacts
        if any(artifact.type.schema_title.startswith(LAUNCHER_TYPE_PREFIX) for artifact in artifacts):
            del executor_input.outputs.artifacts[key]
            adapted.dropped_outputs.append(key)
            continue
        for artifact in artifacts:
            _local(artifact, adapted, launcher_root)
    values = executor_input.inputs.parameter_values
    for name in sorted(values):
        if name.startswith(CACHE_KEY_PREFIX):
            if name == DATA_OUTPUT and (spans := fingerprinted_spans(values[name].string_value)):
                # ImportExampleGen reads the spans the InputFingerprint task fingerprinted, not a later listing.
                values[SELECTED_SPANS_KEY].string_value = spans
                adapted.selected_spans = spans
            del values[name]
            adapted.dropped_parameters.append(name)
    return adapted


def restore_output_uris(executor_output: pipeline_spec_pb2.ExecutorOutput, local_to_remote: dict[str, str]) -> None:
    """Puts the original URIs back in the executor output (in place), where the executor was given local paths."""
    for artifacts in executor_output.artifacts.values():
        for artifact in artifacts.artifacts:
            artifact.uri = local_to_remote.get(artifact.uri, artifact.uri)


def main(parsed_argv: tuple[Any, list[str]]) -> None:
    """Adapts the executor input, runs TFX's v2 runner, restores the output URIs.

    Args:
        parsed_argv: TFX's flags as its `_parse_flags` returns them (`--executor_class_path`,
            `--json_serialized_invocation_args`, `--json_serialized_inputs_spec_args`) and the Beam flags.
    """
    from absl import logging
    from tfx.dsl.io import fileio
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor

    args, beam_args = parsed_argv
    executor_input = pipeline_spec_pb2.ExecutorInput()
    json_format.Parse(args.json_serialized_invocation_args, executor_input, ignore_unknown_fields=True)
    inputs_spec = None
    if getattr(args, "json_serialized_inputs_spec_args", None):
        inputs_spec = pipeline_spec_pb2.ComponentInputsSpec()
        json_format.Parse(args.json_serialized_inputs_spec_args, inputs_spec, ignore_unknown_fields=True)
    adapted = adapt_executor_input(executor_input, inputs_spec)
    logging.info(
        "tfxp entrypoint: restored types of %s, left %s to the launcher, removed cache keys %s, local paths %s",
        adapted.restored_types or "none",
        adapted.dropped_outputs or "none",
        adapted.dropped_parameters or "none",
        adapted.local_to_remote or "none",
    )
    args.json_serialized_invocation_args = json_format.MessageToJson(executor_input)
    kubeflow_v2_run_executor.main((args, beam_args))
    if not adapted.local_to_remote:
        return
    output_file = executor_input.outputs.output_file
    executor_output = pipeline_spec_pb2.ExecutorOutput()
    with fileio.open(output_file, "rb") as handle:
        json_format.Parse(handle.read(), executor_output, ignore_unknown_fields=True)
    restore_output_uris(executor_output, adapted.local_to_remote)
    with fileio.open(output_file, "wb") as handle:
        handle.write(json_format.MessageToJson(executor_output))


def run(argv: Sequence[str] | None = None) -> None:
    """The command line, parsed by TFX's own flag parser under absl (as TFX's runner runs itself)."""
    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor

    app.run(
        main,
        argv=["entrypoint", *(sys.argv[1:] if argv is None else argv)],
        flags_parser=kubeflow_v2_run_executor._parse_flags,
    )


if __name__ == "__main__":
    run()
