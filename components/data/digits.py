"""The embedded default data set: scikit-learn's bundled digits as PNG tf.Examples.

1,797 grayscale 8x8 images of the digits 0-9 ship inside scikit-learn, so tfxp has a real
data set without any download. Pixel values 0-16 are scaled to 0-255 and PNG-encoded.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from components.data.dataset import DatasetSummary, Record, write_dataset

DIGIT_NAMES = tuple(str(digit) for digit in range(10))
DIGITS_MAX_VALUE = 16  # load_digits() pixels are counts of set pixels in 4x4 blocks: 0..16


def encode_png(pixels: np.ndarray) -> bytes:
    """PNG bytes of a 2-D uint8 array (grayscale); same array → same bytes."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def digits_records() -> list[Record]:
    """The 1,797 digits as PNG records, in scikit-learn's order."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    scaled = np.rint(digits.images * (255.0 / DIGITS_MAX_VALUE)).astype(np.uint8)
    return [Record(int(label), encoded=encode_png(image)) for image, label in zip(scaled, digits.target, strict=True)]


def write_digits(
    out: Path, *, eval_fraction: float = 0.2, shards: int = 2, overwrite: bool = False, seed: int = 0
) -> DatasetSummary:
    """Writes the digits data set as DIR/train, DIR/eval (GZIP TFRecords) and DIR/labels.txt.

    The split is stratified per digit and deterministic: the same arguments give the same bytes.

    Args:
        out: Output directory; must be new or empty unless `overwrite`.
        eval_fraction: Share of each digit that goes to eval (0.2 → 360 eval, 1,437 train).
        shards: TFRecord files per split.
        overwrite: Replace a data set `tfxp data` wrote in `out` earlier.
        seed: Split and order seed.

    Returns:
        Counts per split and digit, and shard counts.

    Raises:
        DataError: bad `out`, `eval_fraction` or `shards`.

    Example:
        summary = write_digits(Path("data/digits"))
        summary.split_total("eval")  # 360
    """
    return write_dataset(
        out,
        digits_records(),
        DIGIT_NAMES,
        eval_fraction=eval_fraction,
        shards=shards,
        overwrite=overwrite,
        seed=seed,
        provenance={"source": "sklearn.datasets.load_digits (pixels 0-16 scaled to 0-255, PNG)"},
    )
