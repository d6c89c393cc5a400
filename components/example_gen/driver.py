"""The SpanImportExampleGen driver: one listing decides which spans the run reads and what keys its cache.

TFX's FileBasedDriver fingerprints the files its split patterns match; with spans those are globs over every
span folder (`span-*/train/*`), so a staged `span-5.tmp/` folder, or a span outside the `data.spans` window,
changes the fingerprint and reruns the pipeline on the same spans. And the executor lists the span folders again
when it starts: a span moved in between the two listings is read but not fingerprinted, so the next run on the
same spans retrains.

This driver (run by TFX's local launcher before the cache lookup) lists the span folders once, selects the spans
(`components.data.fingerprint.data_files`), sets `input_fingerprint` to the files of those spans only, and hands
the selection to the executor as `selected_spans`, which it reads instead of listing again. Kubeflow's V2 runner
ignores custom drivers: there the InputFingerprint task does the same (`components.kfp.fingerprint_task`).
"""

from __future__ import annotations

from typing import Any

from tfx.components.example_gen import driver, utils
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from components.data.fingerprint import data_files
from components.example_gen.executor import SPANS_KEY
from foundation.data.spans import NO_SPANS, SELECTED_SPANS_KEY, format_spans, parse_policy


def select_and_fingerprint(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """`exec_properties` with `input_fingerprint` and `selected_spans` from one listing of the span folders;
    unchanged for data without spans (`spans: none`, TFX's fingerprint stands).

    Raises:
        foundation.data.spans.SpanError: the policy selects no span, or a selected span lacks a split's files.
    """
    policy = parse_policy(exec_properties.get(SPANS_KEY) or NO_SPANS)
    if policy == NO_SPANS:
        return exec_properties
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
    patterns = [split.pattern for split in input_config.splits]
    selection = data_files(exec_properties[standard_component_specs.INPUT_BASE_KEY], patterns, policy)
    return {
        **exec_properties,
        utils.FINGERPRINT_PROPERTY_NAME: selection.fingerprint(),
        SELECTED_SPANS_KEY: format_spans(selection.spans),
    }


class SpanDriver(driver.FileBasedDriver):
    """FileBasedDriver whose fingerprint and span selection come from one listing (see the module docstring)."""

    def resolve_exec_properties(
        self, exec_properties: dict[str, Any], pipeline_info: Any, component_info: Any
    ) -> dict[str, Any]:
        resolved = super().resolve_exec_properties(exec_properties, pipeline_info, component_info)
        return select_and_fingerprint(resolved)
