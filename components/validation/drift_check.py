"""The validator's drift checks between spans, end to end: which spans, their statistics, the served model, a verdict.

The newest span the run reads is judged against the previous spans: every span folder under `data.path` older
than it (the spans the served model was trained on are not recorded with it yet, so all earlier ones). Their
statistics come from the cache under `<pipeline.output>/statistics` (`components.validation.span_statistics`), so
the same checks run on Kubeflow without an ML Metadata resolver: the pods read the same cache and the same serving
base. The served model (`components.baseline.served.find_served_model`) is run on a sample for the
labels-against-images check; with nothing served yet that check is skipped.

`DriftRun` is what the pipeline factory hands the ExampleValidator (one JSON execution property).

Example:
    decision = check_drift(DriftRun.from_json(exec_properties["drift"]))
    if decision.stops:
        raise DriftError(stop_message(decision))
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf

from components.baseline.served import find_served_model
from components.data.spans import SPAN_GLOB, find_spans, format_spans, select_spans
from components.validation.drift import (
    DriftDecision,
    Finding,
    agreement_findings,
    decide,
    measure_drift,
    measure_skew,
)
from components.validation.drift_options import DriftOptions
from components.validation.label_agreement import agreement, load_served_model, read_records
from components.validation.span_statistics import (
    SpanSplitFiles,
    pooled,
    span_split_files,
    span_tables,
    split_statistics,
)

logger = logging.getLogger(__name__)
TRAIN_SPLIT = "train"
EVAL_SPLIT = "eval"


@dataclass(frozen=True)
class DriftRun:
    """What the drift checks need, all from the config.

    Attributes:
        options: `data.drift`.
        input_base: `data.path`.
        split_patterns: ImportExampleGen's split patterns (`span-*/train/*`); the part after `span-*/` is read
            inside each span folder.
        spans_policy: `data.spans`.
        cache_dir: `<pipeline.output>/statistics`.
        serving_base: The TF Serving base path (the served model for the agreement check).
    """

    options: DriftOptions
    input_base: str
    split_patterns: dict[str, str]
    spans_policy: str
    cache_dir: str
    serving_base: str
    timings: dict[str, float] = field(default_factory=dict, compare=False)

    def to_json(self) -> str:
        return json.dumps(
            {
                "options": self.options.model_dump(mode="json"),
                "input_base": self.input_base,
                "split_patterns": self.split_patterns,
                "spans_policy": self.spans_policy,
                "cache_dir": self.cache_dir,
                "serving_base": self.serving_base,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> DriftRun:
        values = json.loads(text)
        return cls(**{**values, "options": DriftOptions.model_validate(values["options"])})


def inside_span(pattern: str) -> str:
    """`train/*` for `span-*/train/*`: the split's glob inside one span folder."""
    head, _, rest = pattern.partition("/")
    return rest if head == SPAN_GLOB else pattern


def check_drift(run: DriftRun, input_base: str = "", newest: int | None = None) -> DriftDecision:
    """Measures the newest span against the previous spans and decides (see the module docstring).

    Args:
        run: The settings.
        input_base: Where the run's ExampleGen read the spans (the Examples artifact's `input_base`; on Kubeflow
            the `data_path` run parameter); "" = `run.input_base`.
        newest: The newest span the run's ExampleGen read (the `span` property; the `spans` run parameter may
            have changed the policy); None = the newest `run.spans_policy` selects.

    Returns:
        The decision; its `findings` list every distance measured (none when the run reads no spans).
    """
    gfile = tf.io.gfile
    base = input_base or run.input_base
    names = [name.rstrip("/") for name in gfile.listdir(base)]
    folders = find_spans(name for name in names if gfile.isdir(posixpath.join(base, name)))
    if not folders:
        return DriftDecision(())
    if newest is None or newest not in folders:
        newest = select_spans(folders, run.spans_policy)[-1]
    previous = [span for span in sorted(folders) if span < newest]
    patterns = {split: inside_span(pattern) for split, pattern in run.split_patterns.items()}
    started = time.monotonic()
    files = {span: span_split_files(base, folders[span], span, patterns) for span in [*previous, newest]}
    tables = {}
    for span, span_files in files.items():
        tables[span], _cached = span_tables(span_files, run.cache_dir, run.options.image_sample)
    run.timings["statistics_s"] = time.monotonic() - started
    train = TRAIN_SPLIT if TRAIN_SPLIT in patterns else next(iter(patterns))
    findings: list[Finding] = []
    new_train = split_statistics(tables[newest][train])
    if previous:
        detail = f"against span{'s' if len(previous) > 1 else ''} {format_spans(previous)}"
        previous_train = split_statistics(pooled([tables[span][train] for span in previous]))
        findings += measure_drift(newest, new_train, previous_train, run.options, detail)
    if EVAL_SPLIT in patterns and train == TRAIN_SPLIT:
        findings += measure_skew(newest, new_train, split_statistics(tables[newest][EVAL_SPLIT]), run.options)
    started = time.monotonic()
    findings += _agreement(run, newest, previous, files)
    run.timings["agreement_s"] = time.monotonic() - started
    return decide(findings, run.options.action, run.options.accept)


def _agreement(run: DriftRun, newest: int, previous: list[int], files: dict[int, SpanSplitFiles]) -> list[Finding]:
    """The labels-against-images findings; none without a served model, previous spans or an eval split."""
    served = find_served_model(run.serving_base) if run.options.agreement_drop < 1 else None
    if served is None or not previous or EVAL_SPLIT not in files[newest].splits:
        return []
    model: Any = load_served_model(served.path)
    sample = run.options.agreement_sample
    per_span = max(1, sample // len(previous))
    reference_records = [
        record for span in previous for record in read_records(files[span].splits[EVAL_SPLIT], per_span)
    ]
    reference = agreement(model, reference_records)
    if reference is None:
        return []
    measured = {}
    for split, paths in files[newest].splits.items():
        value = agreement(model, read_records(paths, sample))
        if value is not None:
            measured[split] = value
    detail = f"on the eval splits of spans {format_spans(previous)}, served version {served.version}"
    return agreement_findings(newest, reference, measured, run.options, detail)
