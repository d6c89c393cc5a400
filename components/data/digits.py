"""The embedded default data set: scikit-learn's bundled digits as PNG tf.Examples.

1,797 grayscale 8x8 images of the digits 0-9 ship inside scikit-learn, so tfxp has a real
data set without any download. Pixel values 0-16 are scaled to 0-255 and PNG-encoded.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from components.data.dataset import DatasetSummary, Record, check_corrupt_fraction, check_eval_fraction, write_dataset
from components.data.span_writer import check_span_cut, cut_into_spans, prepare_span
from foundation.data.errors import DataError

DIGIT_NAMES = tuple(str(digit) for digit in range(10))
DIGITS_MAX_VALUE = 16  # load_digits() pixels are counts of set pixels in 4x4 blocks: 0..16
SOURCE = "sklearn.datasets.load_digits (pixels 0-16 scaled to 0-255, PNG)"


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
    out: Path,
    *,
    eval_fraction: float = 0.2,
    shards: int = 2,
    overwrite: bool = False,
    seed: int = 0,
    corrupt_labels: float = 0.0,
) -> DatasetSummary:
    """Writes the digits data set as DIR/train, DIR/eval (GZIP TFRecords) and DIR/labels.txt.

    The split is stratified per digit and deterministic: the same arguments give the same bytes.

    Args:
        out: Output directory; must be new or empty unless `overwrite`.
        eval_fraction: Share of each digit that goes to eval (0.2 → 360 eval, 1,437 train).
        shards: TFRecord files per split.
        overwrite: Replace a data set `tfxp data` wrote in `out` earlier.
        seed: Split and order seed.
        corrupt_labels: Share of the train examples given a wrong label (`dataset.corrupt_labels`).

    Returns:
        Counts per split and digit, and shard counts.

    Raises:
        DataError: bad `out`, `eval_fraction`, `shards` or `corrupt_labels`.

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
        provenance={"source": SOURCE},
        corrupt_train_labels=corrupt_labels,
    )


def write_digit_spans(
    out: Path,
    *,
    spans: int = 1,
    only: int | None = None,
    eval_fraction: float = 0.2,
    shards: int = 2,
    overwrite: bool = False,
    seed: int = 0,
    corrupt_labels: float = 0.0,
) -> list[DatasetSummary]:
    """Cuts the digits into `spans` seeded, disjoint parts and writes part N as DIR/span-N (train/ and eval/),
    with DIR/labels.txt beside the span folders: data that arrives over time, for continuous-training demos.

    Args:
        out: The span root; other span folders in it stay as they are.
        spans: Parts to cut the digits into; 1 = the span holds all 1,797 digits.
        only: Write only this span: 1..spans, or any span number when `spans` is 1; None = every span.
        eval_fraction: Share of each digit that goes to eval, within each span.
        shards: TFRecord files per split.
        overwrite: Replace span folders `tfxp data` wrote earlier.
        seed: Cut, split and order seed: the same arguments give the same bytes.
        corrupt_labels: Share of each written span's train examples given a wrong label.

    Returns:
        One summary per span written, in span order.

    Raises:
        DataError: `only` outside 1..spans, too many spans, a root holding data without spans, an existing span
            (without `overwrite`), a label map beside the spans with other classes, digits spans beside them cut
            otherwise (spans, seed or eval fraction: the parts would overlap), or a bad fraction.

    Example:
        write_digit_spans(Path("data/stream"), spans=4, only=1)  # data/stream/span-1, about 450 digits
    """
    check_eval_fraction(eval_fraction)
    check_corrupt_fraction(corrupt_labels)
    if only is not None and spans > 1 and not 1 <= only <= spans:
        raise DataError(f"--span {only} is not one of the {spans} spans (1..{spans}) the digits are cut into")
    records = digits_records()
    parts = cut_into_spans([record.label for record in records], spans, seed)
    wanted = [only] if only is not None else list(range(1, spans + 1))
    check_span_cut(out, wanted, SOURCE, {"spans": spans, "seed": seed, "eval_fraction": eval_fraction})
    targets = {span: prepare_span(out, span, DIGIT_NAMES, overwrite) for span in wanted}
    return [
        write_dataset(
            target,
            [records[index] for index in parts[(span - 1) % spans]],
            DIGIT_NAMES,
            eval_fraction=eval_fraction,
            shards=shards,
            overwrite=overwrite,
            seed=seed,
            provenance={"source": SOURCE, "span": span, "spans": spans},
            write_labels=False,
            corrupt_train_labels=corrupt_labels,
        )
        for span, target in targets.items()
    ]
