"""The uncached task that keys KFP's cache: fingerprints of the data a run reads and of the served versions.

KFP's cache key is a task's input artifacts' MLMD ids, its input parameter values, its output types, image and
command (kubeflow/pipelines `backend/src/v2/cacheutils/cache.go:173-229`, at commit 7b70c7b); nothing outside
the pipeline enters it, and TFX's ExampleGen `preCacheCheck` lifecycle hook is never run by the open-source
backend. So a cached ImportExampleGen would never read a new span, and an uncached one makes every downstream
task (Trainer included) rerun on unchanged data. This task runs on every run (`enableCache: false`), is cheap
(a listing and a stat per file) and hands two strings to the tasks that depend on outside state, as input
parameters named `tfxp_cache_*` (`components.kfp.entrypoint` removes them before TFX sees them):

    tfxp_cache_data    → ImportExampleGen: the selected spans' files (`components.data.fingerprint`)
    tfxp_cache_served  → ServedBaseline: the served version (`components.baseline.served.served_fingerprint`)
    tfxp_cache_labels  → Trainer: the label map's content (`foundation.contract.label_map_digest`), so a renamed
                         class retrains, as the local runner's Trainer driver (`components.trainer.label_map_driver`)
                         makes it

With no new data and nothing pushed or rolled back, both are unchanged, so ImportExampleGen … Evaluator are
cache hits; a new span reruns everything; a rollback reruns the baseline, the Evaluator and the Pusher.

It is a plain KFP container component: `python -m components.kfp.fingerprint_task --executor_input '{{$}}'`;
the launcher reads the outputs from their files (`launcher_v2.go` `collectOutputParameters`, :484-515).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from foundation.bounded import parse_json
from foundation.errors import TfxpError

TASK = "InputFingerprint"
"""The task's name in the compiled spec."""
DATA_OUTPUT = "tfxp_cache_data"
SERVED_OUTPUT = "tfxp_cache_served"
LABELS_OUTPUT = "tfxp_cache_labels"
INPUT_BASE, INPUT_CONFIG, SPANS, SERVING_BASE = "input_base", "input_config", "spans", "serving_base"
TRAINER_CONFIG = "trainer_custom_config"
"""The Trainer's `custom_config` (JSON), which names the label map."""
LABELS_PATH = "labels_path"
"""The key naming the label map in the Trainer's `custom_config` (`components.trainer.options.RunOptions`)."""
INPUTS = (INPUT_BASE, INPUT_CONFIG, SPANS, SERVING_BASE, TRAINER_CONFIG)
"""The task's input parameters (all strings)."""


class FingerprintTaskError(TfxpError, RuntimeError):
    """The data or the serving base cannot be listed (the message names the path)."""


def split_patterns(input_config: str) -> list[str]:
    """The split patterns of ImportExampleGen's `input_config` (an `example_gen_pb2.Input` as JSON)."""
    return [split["pattern"] for split in parse_json(input_config).get("splits", [])]


def fingerprints(parameters: dict[str, str]) -> dict[str, str]:
    """The task's outputs from its input parameters.

    Raises:
        FingerprintTaskError: the data or the serving base cannot be read.
    """
    from components.baseline.served import served_fingerprint
    from components.data.fingerprint import data_fingerprint
    from foundation.contract import label_map_digest
    from foundation.data.spans import SpanError

    input_base = parameters[INPUT_BASE]
    try:
        data = data_fingerprint(input_base, split_patterns(parameters[INPUT_CONFIG]), parameters[SPANS] or "none")
    except (OSError, SpanError) as error:
        raise FingerprintTaskError(f"cannot fingerprint the data under data.path={input_base}: {error}") from error
    base = parameters[SERVING_BASE]
    try:
        served = served_fingerprint(base) if base else "none"
    except OSError as error:
        raise FingerprintTaskError(f"cannot list the served versions under {base}: {error}") from error
    trainer = parse_json(parameters.get(TRAINER_CONFIG) or "{}")  # the Trainer's custom_config names its label map
    labels = label_map_digest(trainer.get(LABELS_PATH) if isinstance(trainer, dict) else None)
    return {DATA_OUTPUT: data, SERVED_OUTPUT: served, LABELS_OUTPUT: labels}


def main(argv: Sequence[str] | None = None) -> None:
    """Reads the executor input, writes each output parameter to the file the driver named for it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor_input", required=True, help="the ExecutorInput as JSON ({{$}})")
    args = parser.parse_args(argv)
    executor_input = json_format.Parse(args.executor_input, pipeline_spec_pb2.ExecutorInput())
    values = executor_input.inputs.parameter_values
    parameters = {name: values[name].string_value if name in values else "" for name in INPUTS}
    outputs = fingerprints(parameters)
    for name, value in outputs.items():
        if name not in executor_input.outputs.parameters:
            continue  # a spec compiled before this output existed (`tfxp_cache_labels`) does not take it
        path = executor_input.outputs.parameters[name].output_file
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(value)
        print(f"{name} = {value}")


if __name__ == "__main__":
    try:
        main()
    except FingerprintTaskError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
