"""The ImportExampleGen executor that reads only the spans `data.spans` selects and records them.

TFX's own span support cannot do this: ExampleGen's RangeConfig takes a single span (`RollingRange.num_spans`
must be 1), and the resolvers that gather several spans do not run on open-source KFP. The selection therefore
happens here, inside the component, on LocalDagRunner and on Kubeflow alike. The split patterns it receives are
plain globs over every span (`span-*/train/*`). The input fingerprint that keys the cache is not TFX's glob over
them (which would count staged `span-5.tmp/` folders and spans outside the window) but the files of the selected
spans (`components.data.fingerprint`), taken from one listing together with the selection (`selected_spans`):
by the driver (`components.example_gen.driver`) on LocalDagRunner, by the InputFingerprint task on Kubeflow. The
executor reads exactly those spans (without `selected_spans`, it lists and selects itself), reads
`span-N/<pattern>` of each (compression from the file name, as ImportExampleGen does) and records the spans on
the Examples artifact: `spans` ("3,4,5") and TFX's `span` (the newest).
"""

from __future__ import annotations

import os

import apache_beam as beam
import tensorflow as tf
from tfx.components.example_gen.import_example_gen import executor as import_executor
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs

from components.data.fingerprint import incomplete_span_error, list_span_folders
from components.executor_types import ArtifactDict, ExecProperties
from foundation.data.spans import (
    INPUT_BASE_PROPERTY,
    NO_SPANS,
    SELECTED_SPANS_KEY,
    SPAN_GLOB,
    SPANS_PROPERTY,
    SpanError,
    format_spans,
    inside_span,
    parse_policy,
    parse_spans,
    select_spans,
)

SPANS_KEY = "spans"
"""The exec property holding `data.spans` (`none`, `latest`, `all` or N, as a string)."""
SPAN_PROPERTY = "span"
"""TFX's custom property of the Examples artifact (`tfx.components.example_gen.utils.SPAN_PROPERTY_NAME`)."""


def span_file_patterns(input_base: str, split_pattern: str, folders: list[str]) -> list[str]:
    """The per-span globs of a split pattern over all spans: `span-*/train/*` → `<base>/span-3/train/*`, ...

    Raises:
        SpanError: the pattern does not start with `span-*/`, or a selected span has no files for it.
    """
    rest = inside_span(split_pattern)
    if rest == split_pattern or not rest:
        raise SpanError(f"split pattern {split_pattern!r} does not start with {SPAN_GLOB}/ although data.spans is set")
    patterns = [os.path.join(input_base, folder, rest) for folder in folders]
    for folder, pattern in zip(folders, patterns, strict=True):
        if not fileio.glob(pattern):
            raise incomplete_span_error(os.path.join(input_base, folder), rest)
    return patterns


class Executor(import_executor.Executor):
    """ImportExampleGen's executor, reading the selected spans when `spans` is not `none`."""

    _span_folders: list[str] | None = None

    def Do(self, input_dict: ArtifactDict, output_dict: ArtifactDict, exec_properties: ExecProperties) -> None:  # noqa: N802  (TFX's API)
        policy = parse_policy(exec_properties.get(SPANS_KEY) or NO_SPANS)
        if policy == NO_SPANS and _reads_span_folders(exec_properties):
            raise SpanError(
                f"spans = {NO_SPANS}, but this pipeline was compiled for data in span folders ({SPAN_GLOB}/...): "
                "set the spans parameter to latest, all or a number of newest spans"
            )
        if policy == NO_SPANS:
            self._span_folders = None
            super().Do(input_dict, output_dict, exec_properties)
            return
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        folders = list_span_folders(input_base)
        selected = exec_properties.get(SELECTED_SPANS_KEY)
        spans = parse_spans(selected) if selected else select_spans(folders, policy)
        missing = [span for span in spans if span not in folders]
        if missing:
            raise SpanError(
                f"span {missing[0]} was selected (and fingerprinted) under {input_base}, but its folder is gone; "
                "spans must stay in place while a run reads them: run again"
            )
        self._span_folders = [folders[span] for span in spans]
        super().Do(input_dict, output_dict, exec_properties)
        for examples in output_dict[standard_component_specs.EXAMPLES_KEY]:
            examples.set_string_custom_property(SPANS_PROPERTY, format_spans(spans))
            examples.set_int_custom_property(SPAN_PROPERTY, spans[-1])
            # Where the spans were read (the `data_path` run parameter on Kubeflow): the drift checks read there.
            examples.set_string_custom_property(
                INPUT_BASE_PROPERTY, exec_properties[standard_component_specs.INPUT_BASE_KEY]
            )

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802  (TFX's executor API)
        read_all_spans = super().GetInputSourceToExamplePTransform()
        folders = self._span_folders
        if folders is None:
            return read_all_spans

        @beam.ptransform_fn
        def read_selected_spans(
            pipeline: beam.Pipeline, exec_properties: ExecProperties, split_pattern: str
        ) -> beam.pvalue.PCollection:
            base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
            patterns = span_file_patterns(base, split_pattern, folders)
            records = [
                pipeline | f"Read[{folder}]" >> beam.io.ReadFromTFRecord(file_pattern=pattern)
                for folder, pattern in zip(folders, patterns, strict=True)
            ]
            serialized = records | "FlattenSpans" >> beam.Flatten()
            payload = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
            if payload == example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE:
                return serialized | "ToTFExample" >> beam.Map(tf.train.Example.FromString)
            if payload == example_gen_pb2.PayloadFormat.FORMAT_PROTO:
                return serialized
            raise ValueError(f"spans are read as tf.Examples or serialized protos, not payload format {payload}")

        return read_selected_spans


def _reads_span_folders(exec_properties: ExecProperties) -> bool:
    """Whether the input config's split patterns go through the span folders (`span-*/...`)."""
    from tfx.utils import proto_utils

    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
    return any(split.pattern.startswith(f"{SPAN_GLOB}/") for split in input_config.splits)
