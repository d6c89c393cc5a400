"""The validator's drift checks between spans, end to end: which spans, their statistics, the served model, a verdict.

Each span the run reads is judged against the previous spans until it passes: the spans the served model was trained
on (its push record's `spans`, `foundation.publish.trained_spans`) that are older than it and still under
`data.path`, else every older span folder (`previous_spans`). So a refused span that was never trained on is not the
reference for the spans after it. Their
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

import dataclasses
import hashlib
import json
import logging
import posixpath
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf

from components.baseline.served import find_served_model
from components.validation.drift import (
    DriftDecision,
    Finding,
    agreement_findings,
    content_findings,
    decide,
    measure_drift,
    measure_skew,
)
from components.validation.drift_options import DriftOptions
from components.validation.image_content import THUMBNAIL_FEATURE, ContentReference
from components.validation.label_agreement import agreement, load_served_model, read_records
from components.validation.span_statistics import (
    LABEL_FEATURE,
    SpanSplitFiles,
    pooled,
    span_entry,
    span_split_files,
    span_tables,
    split_statistics,
)
from foundation.bounded import parse_json
from foundation.data.spans import find_spans, format_spans, inside_span, select_spans

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
        values = parse_json(text)
        return cls(**{**values, "options": DriftOptions.model_validate(values["options"])})


def check_drift(run: DriftRun, input_base: str = "", spans: list[int] | None = None) -> DriftDecision:
    """Judges each span the run reads that has not passed before against the spans before it, and decides.

    A span passes when none of its distances is above its threshold; that verdict is kept in the statistics
    cache (keyed by the span's files and the thresholds), so a span is judged until it passes: a refused span
    stays refused when newer spans arrive, until it is fixed, removed or accepted (`data.drift.accept`).

    Args:
        run: The settings.
        input_base: Where the run's ExampleGen read the spans (the Examples artifact's `input_base`; on Kubeflow
            the `data_path` run parameter); "" = `run.input_base`.
        spans: The spans the run's ExampleGen read (its `spans` property; on Kubeflow the `spans` run parameter
            may have changed the policy); None = those `run.spans_policy` selects.

    Returns:
        The decision; its `findings` list every distance measured (none when the run reads no spans).
    """
    gfile = tf.io.gfile
    base = input_base or run.input_base
    names = [name.rstrip("/") for name in gfile.listdir(base)]
    folders = find_spans(name for name in names if gfile.isdir(posixpath.join(base, name)))
    if not folders:
        return DriftDecision(())
    selected = [span for span in spans or [] if span in folders] or select_spans(folders, run.spans_policy)
    patterns = {split: inside_span(pattern) for split, pattern in run.split_patterns.items()}
    files = {span: span_split_files(base, folders[span], span, patterns) for span in folders if span <= selected[-1]}
    verdicts = {span: _verdict_path(run, files[span]) for span in selected}
    judged = [span for span in selected if not gfile.exists(verdicts[span])]
    run.timings.update(statistics_s=0.0, agreement_s=0.0)
    tables: dict[int, dict[str, Any]] = {}

    def table(span: int) -> dict[str, Any]:
        if span not in tables:
            started = time.monotonic()
            tables[span], _cached = span_tables(files[span], run.cache_dir, run.options.image_sample)
            run.timings["statistics_s"] += time.monotonic() - started
        return tables[span]

    model = _ServedModel(run)
    served = find_served_model(run.serving_base) if run.serving_base else None
    findings: list[Finding] = []
    for span in judged:
        previous, source = previous_spans(span, files, served.trained_spans if served else None)
        span_findings = _judge(run, span, previous, table, files, model, source)
        if not any(finding.exceeded for finding in span_findings):
            _write_verdict(verdicts[span], span)
        findings += span_findings
    decision = decide(findings, run.options.action, run.options.accept)
    train = TRAIN_SPLIT if TRAIN_SPLIT in run.split_patterns else next(iter(run.split_patterns))
    return dataclasses.replace(decision, label_counts={span: label_counts(table(span)[train]) for span in files})


def label_counts(table: Any) -> dict[str, int]:
    """Records per label of a span's table (`span_statistics.read_split_table`), in label order."""
    counts = {str(label): int(count) for label, count in table[LABEL_FEATURE].dropna().value_counts().items()}
    numeric = all(label.isascii() and label.lstrip("-").isdigit() for label in counts)
    return dict(sorted(counts.items(), key=lambda item: int(item[0]) if numeric else item[0]))


SERVED_SPANS = "the served model's"
EARLIER_SPANS = "every earlier"


def previous_spans(span: int, available: Iterable[int], served_spans: Sequence[int] | None) -> tuple[list[int], str]:
    """The spans span `span` is judged against, and which rule chose them.

    Args:
        span: The span judged.
        available: The span folders under `data.path`.
        served_spans: The spans the served model was trained on (its push record); None when not recorded.

    Returns:
        (the served model's spans older than `span` that are still there, `SERVED_SPANS`), or, when there are none
        (nothing served, not recorded, or all removed), (every older span, `EARLIER_SPANS`).
    """
    present = sorted(set(available))
    served = [earlier for earlier in sorted(set(served_spans or ())) if earlier < span and earlier in present]
    if served:
        return served, SERVED_SPANS
    return [earlier for earlier in present if earlier < span], EARLIER_SPANS


def _judge(
    run: DriftRun,
    span: int,
    previous: list[int],
    table: Callable[[int], dict[str, Any]],
    files: dict[int, SpanSplitFiles],
    model: _ServedModel,
    source: str = EARLIER_SPANS,
) -> list[Finding]:
    """Every distance of one span: drift and image content against `previous`, eval/train skew, the served model's
    agreement."""
    patterns = files[span].splits
    train = TRAIN_SPLIT if TRAIN_SPLIT in patterns else next(iter(patterns))
    findings: list[Finding] = []
    new_train = split_statistics(table(span)[train])
    if previous:
        detail = f"against span{'s' if len(previous) > 1 else ''} {format_spans(previous)}"
        if source == SERVED_SPANS:
            detail += ", the served model's"
        previous_table = pooled([table(earlier)[train] for earlier in previous])
        findings += measure_drift(span, new_train, split_statistics(previous_table), run.options, detail)
        reference = ContentReference.from_thumbnails(previous_table[THUMBNAIL_FEATURE])
        findings += content_findings(span, reference, table(span), run.options, detail)
    if EVAL_SPLIT in patterns and train == TRAIN_SPLIT:
        findings += measure_skew(span, new_train, split_statistics(table(span)[EVAL_SPLIT]), run.options)
    started = time.monotonic()
    findings += _agreement(run, span, previous, files, model)
    run.timings["agreement_s"] += time.monotonic() - started
    return findings


class _ServedModel:
    """The served version and its SavedModel, loaded once, when the agreement check first needs it."""

    def __init__(self, run: DriftRun) -> None:
        self.served = find_served_model(run.serving_base) if run.options.agreement_drop < 1 else None
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None and self.served is not None:
            self._model = load_served_model(self.served.path)
        return self._model


def _agreement(
    run: DriftRun, span: int, previous: list[int], files: dict[int, SpanSplitFiles], served: _ServedModel
) -> list[Finding]:
    """The labels-against-images findings; none without a served model, previous spans or an eval split."""
    if served.served is None or not previous or EVAL_SPLIT not in files[span].splits:
        return []
    sample = run.options.agreement_sample
    per_span = max(1, sample // len(previous))
    reference_records = [
        record for earlier in previous for record in read_records(files[earlier].splits[EVAL_SPLIT], per_span)
    ]
    reference = agreement(served.model, reference_records)
    if reference is None:
        return []
    measured = {}
    for split, paths in files[span].splits.items():
        value = agreement(served.model, read_records(paths, sample))
        if value is not None:
            measured[split] = value
    detail = f"on the eval splits of spans {format_spans(previous)}, served version {served.served.version}"
    return agreement_findings(span, reference, measured, run.options, detail)


def _verdict_path(run: DriftRun, files: SpanSplitFiles) -> str:
    """Where a span's pass is kept: beside its statistics, keyed by the thresholds (not `action` or `accept`)."""
    thresholds = run.options.model_dump(mode="json", exclude={"action", "accept", "enabled"})
    key = hashlib.sha256(json.dumps(thresholds, sort_keys=True).encode()).hexdigest()[:16]
    return f"{span_entry(run.cache_dir, files, run.options.image_sample)}/passed-{key}.json"


def _write_verdict(path: str, span: int) -> None:
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps({"span": span, "passed": True}) + "\n")
