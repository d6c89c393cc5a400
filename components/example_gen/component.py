"""SpanImportExampleGen: TFX's ImportExampleGen plus the `spans` policy its executor applies (see executor.py).

It is a `FileBasedExampleGen`, so both runners treat it as ImportExampleGen (the Kubeflow V2 compiler's ExampleGen
container); the driver (the selected spans' fingerprint, see driver.py), the executor and one string parameter
differ.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tfx import types
from tfx.components.example_gen import utils
from tfx.components.example_gen.import_example_gen.component import ImportExampleGen
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ExecutionParameter

from components.example_gen.driver import SpanDriver
from components.example_gen.executor import SPANS_KEY, Executor
from foundation.data.spans import NO_SPANS, parse_policy


class SpanImportExampleGenSpec(standard_component_specs.FileBasedExampleGenSpec):
    """FileBasedExampleGen's spec plus `spans`."""

    PARAMETERS: ClassVar[dict[str, Any]] = {
        **standard_component_specs.FileBasedExampleGenSpec.PARAMETERS,
        SPANS_KEY: ExecutionParameter(type=str),
    }


class SpanImportExampleGen(ImportExampleGen):
    """ImportExampleGen that reads the span folders `spans` selects (`none`: no span folders, as ImportExampleGen).

    Args:
        input_base: The data directory (`data.path`).
        input_config: The input splits (`foundation.data.layout.split_patterns`; with spans they start with `span-*/`).
        output_config: Hash-bucket output splits, or None when the input splits are the output splits.
        spans: `data.spans`: `none`, `latest`, `all` or N (the newest N spans).

    Example:
        SpanImportExampleGen(input_base="data/digits", input_config=..., spans="all").with_id("ImportExampleGen")
    """

    SPEC_CLASS = SpanImportExampleGenSpec
    DRIVER_CLASS = SpanDriver
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(
        self,
        input_base: str,
        input_config: example_gen_pb2.Input,
        output_config: example_gen_pb2.Output | None = None,
        spans: str | int = NO_SPANS,
    ) -> None:
        output_config = output_config or utils.make_default_output_config(input_config)
        spec: Any = SpanImportExampleGenSpec(
            input_base=input_base,
            input_config=input_config,
            output_config=output_config,
            output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
            spans=str(parse_policy(spans)),
            examples=types.Channel(type=standard_artifacts.Examples),
        )
        base_beam_component.BaseBeamComponent.__init__(self, spec=spec)
