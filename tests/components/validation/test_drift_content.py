"""The drift check on image content (`components.validation.image_content`): a span whose images are partly noise
is stopped by name; clean digit spans pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from components.data.digits import digits_records, write_digit_spans
from components.data.span_damage import noise_image, rewrite_span
from components.validation.drift import CONTENT, FAR_IMAGES, content_findings
from components.validation.drift_check import DriftRun, check_drift
from components.validation.drift_options import DriftOptions
from components.validation.image_content import THUMBNAIL_FEATURE, ContentReference
from components.validation.span_statistics import image_properties
from pipeline.config import ConfigError, build_config


def _thumbnails(encoded: list[bytes]) -> list[bytes]:
    return [image_properties(image)[THUMBNAIL_FEATURE] for image in encoded]  # type: ignore[misc]


def test_digits_far_from_other_digits_are_rare_and_noise_images_are_all_far() -> None:
    images = [record.encoded for record in digits_records()]
    reference = ContentReference.from_thumbnails(_thumbnails(images[:1200]))
    assert reference is not None and reference.count == 1200
    clean = _thumbnails(images[1200:])
    rng = np.random.default_rng(1)
    noisy = [noise_image(image, rng) if rng.random() < 0.15 else image for image in images[1200:]]

    assert reference.far_share(clean) < 0.01
    share = reference.far_share(_thumbnails(noisy))
    assert share is not None and 0.12 < share < 0.2
    assert reference.distances(_thumbnails([noise_image(images[0], rng)]))[0] > reference.fence


def test_a_content_finding_names_span_split_measure_threshold_and_key() -> None:
    images = [record.encoded for record in digits_records()]
    reference = ContentReference.from_thumbnails(_thumbnails(images[:300]))
    rng = np.random.default_rng(2)
    table = {THUMBNAIL_FEATURE: _thumbnails([noise_image(image, rng) for image in images[300:330]])}

    (finding,) = content_findings(4, reference, {"train": table}, DriftOptions(), "against spans 1,2,3")
    assert (finding.check, finding.measure, finding.distance) == (CONTENT, FAR_IMAGES, 1.0)
    assert finding.describe() == (
        "span 4, feature 'train images' (content against spans 1,2,3): share of images far from the previous "
        "spans' pixels 1.000 above the threshold 0.05 (data.drift.image_outlier_share)"
    )
    # Too few reference images: no fence worth the name, no finding.
    assert (
        content_findings(4, ContentReference.from_thumbnails(table[THUMBNAIL_FEATURE][:5]), {}, DriftOptions(), "")
        == []
    )


def test_the_threshold_is_a_typed_key_under_data_drift() -> None:
    assert build_config({}).data.drift.image_outlier_share == 0.05
    assert build_config({}, ["data.drift.image_outlier_share=0.2"]).data.drift.image_outlier_share == 0.2
    with pytest.raises(ConfigError, match="image_outlier_share"):
        build_config({}, ["data.drift.image_outlier_share=0"])


@pytest.fixture(scope="module")
def digit_spans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("content") / "clean"
    write_digit_spans(root, spans=4)
    return root


def _run(data: Path, cache: Path) -> DriftRun:
    patterns = {"train": "span-*/train/*", "eval": "span-*/eval/*"}
    return DriftRun(DriftOptions(), str(data), patterns, "all", str(cache), str(cache / "no-serving"))


def test_check_drift_stops_a_span_with_15_percent_noise_images_by_name_and_passes_clean_digit_spans(
    digit_spans: Path, tmp_path: Path
) -> None:
    clean = check_drift(_run(digit_spans, tmp_path / "clean-cache"))
    content = [finding for finding in clean.findings if finding.check == CONTENT]
    assert clean.stops == () and {(finding.span, finding.feature) for finding in content} == {
        (span, f"{split} images") for span in (2, 3, 4) for split in ("train", "eval")
    }
    assert max(finding.distance for finding in content) < 0.03  # measured: 0.022, 2 of 90 eval images

    noisy = tmp_path / "noisy"
    for span in (1, 2, 3):
        rewrite_span(digit_spans / f"span-{span}", noisy / f"span-{span}")
    rewrite_span(digit_spans / "span-4", noisy / "span-4", noise=0.15)
    decision = check_drift(_run(noisy, tmp_path / "noisy-cache"))

    # Every other check lets the span through: only the content check sees it.
    assert [finding for finding in decision.findings if finding.exceeded and finding.check != CONTENT] == []
    assert [(finding.span, finding.feature) for finding in decision.stops] == [(4, "eval images"), (4, "train images")]
    assert all(0.1 < finding.distance < 0.25 for finding in decision.stops), decision.stops
    assert "data.drift.image_outlier_share" in decision.stops[0].describe()
