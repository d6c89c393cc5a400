"""Decoding bounded by work (issue 35): a progressive JPEG's decoder re-reads the whole image at every scan, so
the model refuses more scans than its size allows, in Python and in the graph alike, before decoding."""

from __future__ import annotations

import io

import pytest
import tensorflow as tf
from image_bombs import scan_bomb
from PIL import Image

from foundation.image_checks import image_size_errors
from foundation.image_formats import (
    JPEG_MAX_SCANS,
    allowed_scans,
    decode_work,
    jpeg_scans,
    oversized_error,
)
from foundation.preprocessing import preprocess_image_bytes
from foundation.preprocessing_spec import PreprocessingSpec

LIMIT = 40_000_000


def _graph(images: list[bytes], limit: int = LIMIT) -> list[str]:
    check = tf.function(
        lambda batch: image_size_errors(batch, limit), input_signature=[tf.TensorSpec([len(images)], tf.string)]
    )
    return [message.decode() for message in check(tf.constant(images)).numpy()]


def _jpeg(mode: str = "RGB", side: int = 64, **options: object) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (side, side), 90).save(buffer, "JPEG", **options)
    return buffer.getvalue()


def test_a_jpeg_of_400_scans_is_refused_by_python_and_by_the_graph_alike() -> None:
    bomb = scan_bomb(400)
    assert jpeg_scans(bomb) == 400 and len(bomb) < 20_000
    expected = (
        "progressive JPEG of 64x64 pixels in 400 scans is over the limit of 100 scans for an image of its size (the "
        "decoder re-reads the whole image at every scan; the model decodes at most 100 scans, and at most 20 scans "
        "of 40000000 pixels, trainer.max_image_pixels); re-encode it (encoders write about 10 scans)"
    )
    assert oversized_error(bomb, LIMIT) == expected
    assert _graph([bomb, _jpeg()]) == [expected, ""]
    spec = PreprocessingSpec(image_size=8, channels=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="in 400 scans is over the limit of 100 scans"):
        preprocess_image_bytes(tf.constant([_jpeg(), bomb]), spec)


def test_what_encoders_write_passes_and_the_limit_is_exact() -> None:
    real = [
        _jpeg(),
        _jpeg(progressive=True),
        _jpeg("L", progressive=True),
        _jpeg("CMYK", progressive=True),
        _jpeg(side=2000, progressive=True, optimize=True),
    ]
    assert [jpeg_scans(data) for data in real] == [1, 10, 6, 18, 10]
    at_limit, over = scan_bomb(JPEG_MAX_SCANS), scan_bomb(JPEG_MAX_SCANS + 1)
    assert [oversized_error(data, LIMIT) for data in [*real, at_limit]] == [None] * 6
    assert _graph([*real, at_limit, over])[:6] == [""] * 6
    assert "in 101 scans is over the limit of 100 scans" in _graph([over])[0] == oversized_error(over, LIMIT)


def test_a_large_image_may_hold_fewer_scans() -> None:
    # 20 scans of the pixel limit: a 2000 x 2000 JPEG under a 4 MP limit may hold 20 scans, not 21.
    limit = 4_000_000
    assert allowed_scans(2000 * 2000, limit) == 20 and allowed_scans(64 * 64, limit) == JPEG_MAX_SCANS
    twenty, over = scan_bomb(20, 2000), scan_bomb(21, 2000)
    assert oversized_error(twenty, limit) is None
    message = oversized_error(over, limit)
    assert message is not None and "of 2000x2000 pixels in 21 scans is over the limit of 20 scans" in message
    assert _graph([twenty, over], limit) == ["", message]


def test_the_decoding_work_counts_scans_times_pixels() -> None:
    assert decode_work(scan_bomb(400)) == 400 * 64 * 64
    assert decode_work(_jpeg()) == 64 * 64 and decode_work(b"not an image") is None


def test_the_graph_counts_markers_as_python_does_at_any_offset() -> None:
    # The graph reads the bytes as 16-bit words at even and odd offsets; a marker straddling either, next to a
    # lone 0xFF or 0xDA, or at the very end, counts once, as `bytes.count` counts it.
    from foundation.image_checks import _sos_markers

    pieces = [b"\xff", b"\xda", b"\x00", b"a"]
    cases = [b"", b"\xff\xda", b"\xff\xff\xda", b"a\xff\xda", b"\xda\xff", b"\xff\xda\xff\xda"]
    cases += [bytes(b"".join(pieces[(seed * 7 + i * i) % 4] for i in range(seed % 23))) for seed in range(200)]
    assert [int(_sos_markers(tf.constant(case))) for case in cases] == [jpeg_scans(case) for case in cases]
