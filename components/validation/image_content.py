"""What the images show, against the spans before: the share of a span's images whose pixels are far from theirs.

The image properties (`span_statistics`: size, format, brightness, contrast) are distributions; a span whose
images are 15 % noise moves none of them enough to see (noise has a mean and a spread like a digit's). This check
looks at the pixels themselves: every sampled image becomes a grey `THUMBNAIL_SIDE` × `THUMBNAIL_SIDE` thumbnail
(Pillow's bilinear resize, which averages when it shrinks), and the previous spans' thumbnails give a mean and a
standard deviation per pixel. An image's distance is the root mean square of its pixels' z-scores (the deviation
floored at `STD_FLOOR`, so pixels that are nearly constant in the reference, a digit's empty border, do not turn
rounding into distance). An image is *far* beyond Tukey's far-out fence of the reference's own distances
(Q3 + 3 × IQR; Tukey, "Exploratory Data Analysis", 1977), and the finding is the share of a split's images that
are far (`data.drift.image_outlier_share`).

Measured on the digits (sklearn, 1,797 images; 1,200 as reference): 0.2 % of the other clean digits are far, every
uniform-noise image is (its smallest distance is 1.8 × the fence). A thumbnail averages away the noise of a large
image, so on photographs this sees content changes (other objects, blank or inverted frames) rather than noise.

Example:
    reference = ContentReference.from_thumbnails(previous_table[THUMBNAIL_FEATURE])
    share = reference.far_share(new_table[THUMBNAIL_FEATURE])  # 0.15 for a span with 15 % noise images
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

THUMBNAIL_FEATURE = "thumbnail"
THUMBNAIL_SIDE = 8
STD_FLOOR = 0.1
FAR_OUT_IQR = 3.0
# Fewer reference images than this give no fence worth the name: the check is then skipped.
MIN_REFERENCE_IMAGES = 20


def thumbnail(image: Any) -> bytes:
    """A PIL image's grey `THUMBNAIL_SIDE`² thumbnail, as that many uint8 bytes (row by row)."""
    from PIL import Image

    grey = image.convert("L").resize((THUMBNAIL_SIDE, THUMBNAIL_SIDE), Image.Resampling.BILINEAR)
    return np.asarray(grey, dtype=np.uint8).tobytes()


def _matrix(thumbnails: Iterable[Any]) -> np.ndarray:
    """float [N, side²] in [0, 1] of the thumbnails that are there (rows past the image sample hold none)."""
    rows = [np.frombuffer(value, np.uint8) for value in thumbnails if isinstance(value, bytes | bytearray)]
    rows = [row for row in rows if row.size == THUMBNAIL_SIDE**2]
    return np.stack(rows).astype(np.float64) / 255.0 if rows else np.zeros((0, THUMBNAIL_SIDE**2))


@dataclass(frozen=True)
class ContentReference:
    """The previous spans' thumbnails, summed up.

    Attributes:
        mean: Mean of each thumbnail pixel.
        scale: Its standard deviation, at least `STD_FLOOR`.
        fence: Distances above this are far (Tukey's far-out fence of the reference's own distances).
        count: Reference images.
    """

    mean: np.ndarray
    scale: np.ndarray
    fence: float
    count: int

    @classmethod
    def from_thumbnails(cls, thumbnails: Iterable[Any]) -> ContentReference | None:
        """The reference of these thumbnails; None when fewer than `MIN_REFERENCE_IMAGES`."""
        matrix = _matrix(thumbnails)
        if len(matrix) < MIN_REFERENCE_IMAGES:
            return None
        mean, scale = matrix.mean(axis=0), np.maximum(matrix.std(axis=0), STD_FLOOR)
        distances = np.sqrt((((matrix - mean) / scale) ** 2).mean(axis=1))
        first, third = np.percentile(distances, [25, 75])
        return cls(mean=mean, scale=scale, fence=float(third + FAR_OUT_IQR * (third - first)), count=len(matrix))

    def distances(self, thumbnails: Iterable[Any]) -> np.ndarray:
        """Each thumbnail's root-mean-square z-score against the reference."""
        matrix = _matrix(thumbnails)
        return np.sqrt((((matrix - self.mean) / self.scale) ** 2).mean(axis=1))

    def far_share(self, thumbnails: Iterable[Any]) -> float | None:
        """The share of the thumbnails beyond the fence; None when there are none."""
        distances = self.distances(thumbnails)
        return float(np.mean(distances > self.fence)) if len(distances) else None
