"""The `data.drift` config section: which drift checks between spans run, their thresholds and what a hit does.

Declared here, where the validator uses it (`components.validation.drift_check`), and composed into `data` by
`pipeline/config.py`. Every threshold is a key a message can name (`data.drift.<key>`). The defaults were measured
on the digits spans (docs/data.md, "Drift between spans"): they do not fire between clean spans and do on a
many-to-one label remap, brightened images, resized images and a share of noise images.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from foundation.config_section import ConfigSection

KEY_PREFIX = "data.drift"


def _span_list(value: Any) -> Any:
    """`4`, `"4,6"` or a list: the spans of `accept` (so `--set data.drift.accept=4,6` needs no brackets)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, str):
        return tuple(int(part) if part.strip().isdigit() else part for part in value.split(",") if part.strip())
    return value


SpanList = Annotated[tuple[int, ...], BeforeValidator(_span_list)]


class DriftOptions(ConfigSection):
    """Attributes:
    enabled: `auto` (on when the data has spans, `data.spans` other than none), `true` or `false`.
    action: `fail` stops the run at the ExampleValidator, before the Trainer; `warn` records the finding in the
      run summary and trains.
    accept: Spans whose findings are accepted (recorded, never a stop), e.g. `4` or `4,6` once they are known
      good.
    label_linf: Most L-infinity distance between a span's label distribution (train split) and the
      previous spans' (TFDV `drift_comparator.infinity_norm`).
    image_js: Most Jensen-Shannon divergence of an image property (height, width, channels, brightness,
      contrast) between a span and the spans before it; `format` uses `label_linf`'s kind, L-infinity,
      with this threshold.
    skew_label_linf: Most L-infinity distance between the eval and the train label distributions of the same
      span (TFDV `skew_comparator`), so a drifted eval split cannot hide a drift.
    skew_image_js: Most Jensen-Shannon divergence of an image property between eval and train of the same span.
    image_sample: Images decoded per split and span for the image properties (the first ones, in file order);
      labels are read from every record.
    agreement_drop: Most drop of the served model's agreement with the labels, on a sample of a span,
      below its agreement on the previous spans' eval splits (a class-to-class relabelling moves no
      distribution; this check sees it). Needs a served model; 1 turns it off.
    agreement_sample: Examples per split the served model predicts for the agreement check.
    image_outlier_share: Most share of a span's sampled images (per split) whose pixels are far from the previous
      spans' images (`components.validation.image_content`: a grey thumbnail's z-scores against theirs, beyond
      Tukey's far-out fence); catches a span with noise or foreign images mixed in, which moves no image
      property's distribution enough to see. 1 turns it off.
    """

    enabled: bool | Literal["auto"] = "auto"
    action: Literal["fail", "warn"] = "fail"
    accept: SpanList = ()
    label_linf: float = Field(0.1, gt=0, le=1)
    image_js: float = Field(0.1, gt=0, le=1)
    skew_label_linf: float = Field(0.1, gt=0, le=1)
    skew_image_js: float = Field(0.2, gt=0, le=1)
    image_sample: int = Field(1000, ge=1)
    agreement_drop: float = Field(0.2, gt=0, le=1)
    agreement_sample: int = Field(256, ge=1)
    image_outlier_share: float = Field(0.05, gt=0, le=1)

    def is_on(self, spans_policy: str | int) -> bool:
        """Whether the checks run for data read with `data.spans = spans_policy`."""
        if self.enabled == "auto":
            return str(spans_policy) != "none"
        return bool(self.enabled)
