"""Decoding bounded by work (issue 35): libpng inflates a PNG's zlib stream to its end, however few rows the IHDR
declares, so the model refuses IDAT chunks holding more than any encoder writes for those rows, in Python and in
the graph alike, before decoding; Python readers also check that the stream ends with the rows."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import tensorflow as tf
from image_bombs import _chunk, idat_bomb
from PIL import Image

from components.data.digits import digits_records
from foundation.image_checks import image_size_errors
from foundation.image_formats import oversized_error
from foundation.png_stream import (
    PNG_MAX_CHUNKS,
    compress_bound,
    idat_limit,
    inflates_past_rows,
    png_rows,
    png_stream_error,
)
from foundation.preprocessing import preprocess_image_bytes
from foundation.preprocessing_spec import PreprocessingSpec

LIMIT = 40_000_000
RNG = np.random.default_rng(35)
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def _graph(images: list[bytes]) -> list[str]:
    check = tf.function(
        lambda batch: image_size_errors(batch, LIMIT), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    return [message.decode() for message in check(tf.constant(images)).numpy()]


def _pillow(array: np.ndarray, mode: str | None = None, **options: object) -> bytes:
    image = Image.fromarray(array)
    buffer = io.BytesIO()
    (image.convert(mode) if mode else image).save(buffer, "PNG", **options)
    return buffer.getvalue()


def _png(width: int, height: int, color: int, interlace: int, stream: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, interlace)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", stream) + _chunk(b"IEND", b"")


def _interlaced(pixels: np.ndarray) -> bytes:
    """An Adam7-interlaced 8-bit RGB PNG of `pixels` (Pillow writes none)."""
    rows = [
        b"\x00" + line.tobytes() for x, y, dx, dy in ADAM7 if pixels[y::dy, x::dx].size for line in pixels[y::dy, x::dx]
    ]
    return _png(pixels.shape[1], pixels.shape[0], 2, 1, zlib.compress(b"".join(rows), 9))


def _row_blocks(pixels: np.ndarray) -> bytes:
    """An RGB PNG whose zlib stream stores each row in its own stored block, as svpng writes them."""
    height, width = pixels.shape[:2]
    stream, data = b"\x78\x01", b""
    for index, line in enumerate(pixels):
        row = b"\x00" + line.tobytes()
        data += row
        stream += bytes([index == height - 1]) + struct.pack("<HH", len(row), 0xFFFF ^ len(row)) + row
    return _png(width, height, 2, 0, stream + struct.pack(">I", zlib.adler32(data)))


def _legit() -> dict[str, bytes]:
    noise = RNG.integers(0, 256, (300, 250, 3), dtype=np.uint8)
    return {
        "noise RGB (zlib-ng writes more than zlib's compressBound)": _pillow(noise),
        "noise RGB, stored": _pillow(noise, compress_level=0),
        "flat RGBA": _pillow(np.full((900, 1200, 4), 7, np.uint8)),
        "1 x 1 gray": _pillow(np.zeros((1, 1), np.uint8)),
        "palette": _pillow(noise[:64, :64], "P"),
        "16-bit gray": _pillow(RNG.integers(0, 65535, (40, 30), dtype=np.uint16)),
        "1-bit": _pillow(noise[:37, :33, 0], "1"),
        "gray + alpha": _pillow(noise[:20, :20], "LA"),
        "TensorFlow, 16-bit RGBA": tf.io.encode_png(RNG.integers(0, 65535, (50, 70, 4), dtype=np.uint16)).numpy(),
        "interlaced": _interlaced(noise[:13, :11]),
        "interlaced 1 x 1": _interlaced(noise[:1, :1]),
        "a stored block per row": _row_blocks(noise[:40, :16]),
        "tiny, with 4 KB of metadata": (lambda png: png[:33] + _chunk(b"iTXt", bytes(4096)) + png[33:])(
            _pillow(noise[:8, :8])
        ),
    }


def test_the_rows_are_what_the_stream_inflates_to_and_every_real_png_passes() -> None:
    legit = _legit()
    digits = [record.encoded for record in digits_records()[::36]]
    for name, data in [*legit.items(), *(("digit", image) for image in digits)]:
        header = struct.unpack(">IIBBBBB", data[16:29])
        channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[header[3]]
        raw, _ = png_rows(header[0], header[1], header[2], channels, header[6])
        inflated = zlib.decompress(b"".join(_idat(data)))
        assert raw == len(inflated), name
        assert tf.io.decode_png(data).shape[:2] == (header[1], header[0]), name  # TensorFlow decodes it
        assert png_stream_error(data) is None and inflates_past_rows(data) is None, name
    assert _graph([*legit.values(), *digits]) == [""] * (len(legit) + len(digits))


def _idat(data: bytes) -> list[bytes]:
    position, parts = 8, []
    while position < len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        if data[position + 4 : position + 8] == b"IDAT":
            parts.append(data[position + 8 : position + 8 + length])
        position += 12 + length
    return parts


def test_the_limit_is_zlibs_bound_with_room_for_other_encoders() -> None:
    assert [compress_bound(size) for size in (0, 272, 1 << 20)] == [13, 285, (1 << 20) + 256 + 64 + 13]
    assert png_rows(16, 16, 8, 1, 0) == (16 * 17, 16)
    assert png_rows(1, 1, 8, 3, 1) == (4, 1)  # interlaced: only the first pass has a pixel
    assert png_rows(8, 8, 8, 1, 1) == (1 * 2 + 1 * 2 + 1 * 3 + 2 * 3 + 2 * 5 + 4 * 5 + 4 * 9, 15)
    assert idat_limit(272, 16) == 285 + 34 + 128


def test_a_png_of_16x16_carrying_a_gigabyte_stream_is_refused_in_python_and_the_graph_alike() -> None:
    bomb = idat_bomb(64)  # 66 KB: 64 MiB of zeros behind 272 bytes of rows
    expected = (
        "PNG of 16x16 pixels whose image data (IDAT chunks) take 65536 bytes, over the 447 bytes any encoder "
        "needs for its 272 bytes of rows (zlib writes at most 285); the decoder would inflate all of it: "
        "re-encode the image"
    )
    assert oversized_error(bomb, LIMIT) == png_stream_error(bomb) == expected
    assert _graph([_pillow(np.zeros((16, 16), np.uint8)), bomb]) == ["", expected]
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"whose image data \(IDAT chunks\) take 65536 bytes"):
        preprocess_image_bytes(tf.constant([bomb]), PreprocessingSpec(image_size=8, channels=1))


def test_a_png_of_endless_chunks_is_refused_after_the_walk() -> None:
    small = _pillow(np.zeros((16, 16), np.uint8))
    endless = small[:33] + _chunk(b"tEXt", b"") * (PNG_MAX_CHUNKS + 1) + small[33:]
    message = f"PNG whose chunks do not end within its first {PNG_MAX_CHUNKS} chunks"
    assert (png_stream_error(endless) or "").startswith(message)
    assert _graph([endless])[0] == png_stream_error(endless)
    fewer = small[:33] + _chunk(b"tEXt", b"") * (PNG_MAX_CHUNKS - 3) + small[33:]  # IHDR ... IEND: the most
    assert png_stream_error(fewer) is None and _graph([fewer]) == [""]


def test_a_large_image_within_its_bound_still_inflating_past_its_rows_is_caught_where_python_reads() -> None:
    # 1000 x 1000 declared (1 MB of rows, a 1.1 MB limit): 200 KB of IDAT hold 200 MiB of zeros. The graph's
    # bound passes it; inflating one byte past the rows finds it.
    bomb = idat_bomb(200, 1000)
    assert len(bomb) < 250_000 and png_stream_error(bomb) is None
    assert inflates_past_rows(bomb) == (
        "PNG of 1000x1000 pixels whose compressed data inflates to more than the 1001000 bytes its rows take (the "
        "decoder would inflate all of it): re-encode the image"
    )
    assert inflates_past_rows(idat_bomb(1, 1000)) is None  # 1 MiB: short enough that it need not inflate it
