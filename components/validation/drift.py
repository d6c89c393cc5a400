"""Drift between spans: the distances TFDV measures, judged against `data.drift`'s thresholds, and the decision.

Three kinds of finding, each naming the span, the feature, the distance, the threshold and the key that sets it:

- `drift`: the judged span's train split against the previous spans' (TFDV `drift_comparator`): L-infinity on
  the label and the image format, Jensen-Shannon divergence on the numeric image properties;
- `skew`: the judged span's eval split against its train split (TFDV `skew_comparator`), so an eval split that
  drifted with the train split cannot hide the drift;
- `agreement`: how much less the served model agrees with the judged span's labels than with the previous spans'
  (`components.validation.label_agreement`), which sees a class-to-class relabelling no distribution shows;
- `content`: the share of the judged span's images whose pixels are far from the previous spans' images
  (`components.validation.image_content`), which sees noise or foreign images mixed into a span.

`decide` turns findings into stops (action `fail`), warnings (`warn`) and accepted ones (`data.drift.accept`).
TFDV is used for the distances (`measure_drift`, `measure_skew`); the rest is plain Python.

Example:
    findings = measure_drift(4, new_train, previous_train, options) + measure_skew(4, new_train, new_eval, options)
    decision = decide(findings, options.action, options.accept)
    if decision.stops:
        raise DriftError(stop_message(decision))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from components.validation.drift_options import KEY_PREFIX, DriftOptions
from components.validation.image_content import THUMBNAIL_FEATURE, ContentReference
from components.validation.span_statistics import FORMAT_FEATURE, LABEL_FEATURE, NUMERIC_PROPERTIES
from foundation.bounded import parse_json

# The first words of a drift stop's message (`stop_message`): how the run summary tells it from other failures.
STOP_MARK = "does not look like the spans before it"
STOPPED_DECISION: Final = "stopped by the drift check"
# Custom properties of the ExampleValidator's anomalies artifact (JSON lists of `Finding.describe` lines).
RECORD_PROPERTIES = ("drift_warnings", "drift_accepted")
DRIFT = "drift"
SKEW = "skew"
AGREEMENT = "agreement"
CONTENT = "content"
L_INFINITY = "L-infinity distance"
JENSEN_SHANNON = "Jensen-Shannon divergence"
AGREEMENT_DROP = "drop in the served model's agreement with the labels"
FAR_IMAGES = "share of images far from the previous spans' pixels"


@dataclass(frozen=True)
class Finding:
    """One measured distance.

    Attributes:
        span: The span judged.
        check: `drift`, `skew` or `agreement`.
        feature: `label`, an image property, or (agreement) the split whose labels were compared.
        measure: What `distance` is (`L_INFINITY`, `JENSEN_SHANNON`, `AGREEMENT_DROP`).
        distance: The measured value.
        threshold: The most it may be.
        key: The config key that sets `threshold`, `data.drift.label_linf`.
        detail: Words on what was compared, e.g. `against spans 1,2,3`.
    """

    span: int
    check: str
    feature: str
    measure: str
    distance: float
    threshold: float
    key: str
    detail: str = ""

    @property
    def exceeded(self) -> bool:
        return self.distance > self.threshold

    def describe(self) -> str:
        """`span 4, feature 'label' (drift against spans 1,2,3): L-infinity distance 0.301 above the threshold 0.1
        (data.drift.label_linf)`."""
        where = f"{self.check} {self.detail}".strip()
        relation = "above" if self.exceeded else "within"
        return (
            f"span {self.span}, feature '{self.feature}' ({where}): {self.measure} {self.distance:.3f} {relation} "
            f"the threshold {self.threshold:g} ({self.key})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exceeded": self.exceeded}


@dataclass(frozen=True)
class DriftDecision:
    """What the findings mean for the run.

    Attributes:
        findings: Every distance measured, above its threshold or not (the run summary records them).
        stops: Findings above their threshold that stop the run (`action: fail`, span not accepted).
        warnings: Findings above their threshold that do not (`action: warn`).
        accepted: Findings above their threshold on an accepted span (`data.drift.accept`).
        label_counts: Examples per label in the train split of each span up to the newest (span → label → count),
            for the report's label distribution per span.
    """

    findings: tuple[Finding, ...]
    stops: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()
    accepted: tuple[Finding, ...] = field(default=())
    label_counts: dict[int, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [finding.to_dict() for finding in self.findings],
            "stops": [finding.describe() for finding in self.stops],
            "warnings": [finding.describe() for finding in self.warnings],
            "accepted": [finding.describe() for finding in self.accepted],
            "label_counts": {str(span): counts for span, counts in sorted(self.label_counts.items())},
        }


def decide(findings: Iterable[Finding], action: str, accept: Sequence[int]) -> DriftDecision:
    """Stops, warnings and accepted findings: only a finding above its threshold counts; an accepted span's
    findings never stop; `action` (`fail` or `warn`) decides for the others."""
    measured = tuple(findings)
    over = [finding for finding in measured if finding.exceeded]
    accepted = tuple(finding for finding in over if finding.span in accept)
    counted = tuple(finding for finding in over if finding.span not in accept)
    if action == "fail":
        return DriftDecision(measured, stops=counted, accepted=accepted)
    return DriftDecision(measured, warnings=counted, accepted=accepted)


def stop_message(decision: DriftDecision) -> str:
    """The error of a drift stop: every finding above its threshold, and the three ways out."""
    spans = sorted({finding.span for finding in decision.stops})
    lines = "\n  - ".join(finding.describe() for finding in decision.stops)
    span_text = ",".join(str(span) for span in spans)
    return (
        f"span {span_text} {STOP_MARK}, so training was not started:\n  - {lines}\n"
        "Fix or remove the span folder; if the change is real, accept the span "
        f"(`--set {KEY_PREFIX}.accept={span_text}`), raise the threshold named above, or record instead of "
        f"stopping (`--set {KEY_PREFIX}.action=warn`)."
    )


def stop_decision(decision: DriftDecision) -> str:
    """A drift stop as the run's decision, on one line (the run record and the notice): `stopped by the drift
    check: span 4, feature 'label' (...): L-infinity distance 0.301 above the threshold 0.1 (data.drift.label_linf);
    if the change is real: --set data.drift.accept=4`."""
    spans = ",".join(str(span) for span in sorted({finding.span for finding in decision.stops}))
    findings = "; ".join(finding.describe() for finding in decision.stops)
    return f"{STOPPED_DECISION}: {findings}; if the change is real: --set {KEY_PREFIX}.accept={spans}"


def summary_entry(
    properties: dict[str, str | None], error: str | None, stop_record: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The run summary's `data.drift`: the warnings and accepted findings recorded by the validator, and
    `stopped` (the stop's message) when the run failed on a drift stop; {} when there is nothing to say.

    A stopped validator publishes no artifact (no `drift.json` to read), so a stop's `findings` (every distance
    measured) and `label_counts` come from its `DriftError.record` (`stop_record`), for the report."""
    entry: dict[str, Any] = {}
    for name in RECORD_PROPERTIES:
        lines = parse_json(properties.get(name) or "[]")
        if lines:
            entry[name.removeprefix("drift_")] = lines
    if error and STOP_MARK in error:
        entry["stopped"] = error
        for key in ("findings", "label_counts"):
            if stop_record and stop_record.get(key):
                entry[key] = stop_record[key]
    return entry


def agreement_findings(
    span: int, reference: float, agreements: dict[str, float], options: DriftOptions, detail: str
) -> list[Finding]:
    """One finding per split of the judged span: the reference agreement (previous spans) minus the split's."""
    return [
        Finding(span, AGREEMENT, f"{split} labels", AGREEMENT_DROP, reference - value, options.agreement_drop,
                f"{KEY_PREFIX}.agreement_drop", f"{value:.3f} against {reference:.3f} {detail}".strip())
        for split, value in sorted(agreements.items())
    ]  # fmt: skip


def content_findings(
    span: int, reference: ContentReference | None, tables: dict[str, Any], options: DriftOptions, detail: str
) -> list[Finding]:
    """One finding per split of the judged span: the share of its images far from the reference's (none without
    a reference, `image_content.MIN_REFERENCE_IMAGES`, or without images)."""
    if reference is None:
        return []
    findings = []
    for split, table in sorted(tables.items()):
        share = reference.far_share(table[THUMBNAIL_FEATURE]) if THUMBNAIL_FEATURE in table else None
        if share is not None:
            findings.append(Finding(span, CONTENT, f"{split} images", FAR_IMAGES, share, options.image_outlier_share,
                                    f"{KEY_PREFIX}.image_outlier_share", detail))  # fmt: skip
    return findings


def comparator_schema(statistics: Any, check: str, options: DriftOptions) -> Any:
    """A schema from `statistics` (TFDV's `infer_schema`) with a drift or skew comparator on every feature the
    checks read, at the thresholds of `options`."""
    import tensorflow_data_validation as tfdv

    schema = tfdv.infer_schema(statistics)
    present = {feature.name for feature in schema.feature}
    label_threshold = options.label_linf if check == DRIFT else options.skew_label_linf
    image_threshold = options.image_js if check == DRIFT else options.skew_image_js
    for name in present:
        feature = tfdv.get_feature(schema, name)
        comparator = feature.drift_comparator if check == DRIFT else feature.skew_comparator
        if name == LABEL_FEATURE:
            comparator.infinity_norm.threshold = label_threshold
        elif name == FORMAT_FEATURE:
            comparator.infinity_norm.threshold = image_threshold
        elif name in NUMERIC_PROPERTIES:
            comparator.jensen_shannon_divergence.threshold = image_threshold
    return schema


def findings_from_anomalies(span: int, check: str, anomalies: Any, options: DriftOptions, detail: str) -> list[Finding]:
    """The measurements in TFDV's `Anomalies.drift_skew_info`, one finding a feature and measure."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    kinds = {
        anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY: L_INFINITY,
        anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE: JENSEN_SHANNON,
    }
    findings = []
    for info in anomalies.drift_skew_info:
        feature = ".".join(info.path.step)
        measurements = info.drift_measurements if check == DRIFT else info.skew_measurements
        for measurement in measurements:
            if measurement.type not in kinds:
                continue
            findings.append(
                Finding(span, check, feature, kinds[measurement.type], float(measurement.value),
                        float(measurement.threshold), _threshold_key(check, feature), detail)
            )  # fmt: skip
    return sorted(findings, key=lambda finding: finding.feature)


def _threshold_key(check: str, feature: str) -> str:
    kind = "label_linf" if feature == LABEL_FEATURE else "image_js"
    return f"{KEY_PREFIX}.{'skew_' if check == SKEW else ''}{kind}"


def measure_drift(span: int, current: Any, previous: Any, options: DriftOptions, detail: str) -> list[Finding]:
    """A span's statistics against the previous spans' (TFDV statistics lists of one data set each)."""
    import tensorflow_data_validation as tfdv

    schema = comparator_schema(previous, DRIFT, options)
    anomalies = tfdv.validate_statistics(current, schema, previous_statistics=previous)
    return findings_from_anomalies(span, DRIFT, anomalies, options, detail)


def measure_skew(span: int, train: Any, evaluation: Any, options: DriftOptions) -> list[Finding]:
    """A span's eval statistics against its train statistics (TFDV's training-serving skew)."""
    import tensorflow_data_validation as tfdv

    schema = comparator_schema(train, SKEW, options)
    anomalies = tfdv.validate_statistics(train, schema, serving_statistics=evaluation)
    return findings_from_anomalies(span, SKEW, anomalies, options, "eval against train")
