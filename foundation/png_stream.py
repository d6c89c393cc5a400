"""A PNG's compressed image data, bounded by the rows its IHDR declares, checked before decoding.

libpng (TensorFlow's PNG decoder) reads the rows it needs, then `png_read_end` inflates the rest of the zlib
stream to its end ("Too much image data" is only a warning): a 2 MB PNG declaring 16 x 16 whose IDAT chunks
inflate to 2 GiB of zeros took 4.5 s of CPU and decoded fine. No encoder needs that much data for so few rows: the
rows take `raw` bytes (each row a filter byte and its packed pixels, seven Adam7 passes when interlaced), and zlib
never writes more than `compressBound(raw) = raw + raw/4096 + raw/16384 + raw/2^25 + 13` bytes (zlib's
compress.c). Other encoders write a little more, so `idat_limit` allows an eighth more (fixed-Huffman-only
encoders such as stb_image_write before 1.16 spend 9 bits on a literal byte) and 8 bytes a row (encoders that
write each row as its own stored block, as svpng does, or flush the stream at every row, libpng's
`png_set_flush(1)`: 5 bytes a block). A PNG whose IDAT chunks hold more is refused. The sum is read from the chunk
headers alone, and only when the file is longer than the limit (`PNG_FRAMING_BYTES`: no shorter file can hold
more); the walk stops after `PNG_MAX_CHUNKS` chunks. The model walks the same chunks in-graph
(`foundation.image_checks`).

That bounds what the decoder inflates to about 1032 times the limit (DEFLATE's largest ratio), for any declared
size. Where Python decodes, `inflates_past_rows` checks the exact rule, at the cost of inflating the rows once:
the stream must end where the rows do. APNG's fdAT chunks are not counted: TensorFlow decodes a PNG's default
image only, and libpng skips them unread.

Example:
    png_stream_error(Path("bomb.png").read_bytes())  # "PNG of 16x16 pixels whose image data (IDAT) ..."
"""

from __future__ import annotations

import zlib

PNG_SIGNATURE_BYTES = 8
IHDR_DEPTH, IHDR_COLOR, IHDR_INTERLACE = 24, 25, 28  # byte offsets in the file
# Samples per pixel by colour type: gray, RGB, palette index, gray + alpha, RGBA; an unknown type (which the
# decoder refuses) counts the most, so it is never refused here first.
PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
PNG_MAX_CHANNELS = 4
ADAM7 = (
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
)  # x, y, dx, dy
ZLIB_BOUND_BYTES = 13  # compressBound's constant: zlib's header and checksum, a stored block's framing
LITERAL_SLACK_SHIFT = 3  # an eighth more: 9 bits per literal byte in fixed-Huffman blocks
ROW_SLACK_BYTES = 8  # a stored block (5 bytes) or a flush per row, rounded up
# Signature 8 + IHDR chunk 25 + one IDAT chunk's length, type and CRC 12: a file of n bytes holds at most
# n - PNG_FRAMING_BYTES bytes of image data.
PNG_FRAMING_BYTES = 45
PNG_CHUNK_HEAD = 8  # length, type
PNG_CHUNK_EXTRA = 12  # length, type, CRC
# Walked only where the file is longer than its limit (small images with metadata, hostile files): libpng writes
# 8 KB IDAT chunks, so 4096 chunks hold 32 MB.
PNG_MAX_CHUNKS = 4096
PNG_EXHAUSTED = -1
PNG_DATA_TEMPLATE = (
    "PNG of {width}x{height} pixels whose image data (IDAT chunks) take {data} bytes, over the {limit} bytes any "
    "encoder needs for its {raw} bytes of rows (zlib writes at most {bound}); the decoder would inflate all of it: "
    "re-encode the image"
)
PNG_NO_END_MESSAGE = (
    f"PNG whose chunks do not end within its first {PNG_MAX_CHUNKS} chunks; the model sums its image data "
    "before decoding: re-encode the image"
)
DEFLATE_MAX_RATIO = 1032  # DEFLATE's largest ratio: a 258-byte match in 2 bits at best
PAST_ROWS_SKIP = 16
PNG_PAST_ROWS_TEMPLATE = (
    "PNG of {width}x{height} pixels whose compressed data inflates to more than the {raw} bytes its rows take (the "
    "decoder would inflate all of it): re-encode the image"
)


def compress_bound(size: int) -> int:
    """zlib's `compressBound`: the most bytes `compress` writes for `size` bytes (zlib 1.2.9+, compress.c)."""
    return size + (size >> 12) + (size >> 14) + (size >> 25) + ZLIB_BOUND_BYTES


def _ihdr(data: bytes) -> tuple[int, int, int, int, int] | None:
    """(width, height, bit depth, channels, interlace) of a PNG whose first chunk is IHDR, else None."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n") or data[12:16] != b"IHDR" or len(data) <= IHDR_INTERLACE:
        return None
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    channels = PNG_CHANNELS.get(data[IHDR_COLOR], PNG_MAX_CHANNELS)
    return width, height, data[IHDR_DEPTH], channels, data[IHDR_INTERLACE]


def png_rows(width: int, height: int, depth: int, channels: int, interlace: int) -> tuple[int, int]:
    """(bytes, rows) of a PNG's filtered rows: each row a filter byte and (width x channels x depth + 7) // 8
    bytes; interlaced (any method but 0, as libpng reads it), the seven Adam7 passes' rows, a pass of no columns
    or rows taking none."""
    passes = ADAM7 if interlace else ((0, 0, 1, 1),)
    raw = rows = 0
    for x, y, dx, dy in passes:
        columns, lines = max(0, (width - x + dx - 1) // dx), max(0, (height - y + dy - 1) // dy)
        if columns and lines:
            raw += lines * (1 + (columns * channels * depth + 7) // 8)
            rows += lines
    return raw, rows


def idat_limit(raw: int, rows: int) -> int:
    """The most IDAT bytes the model accepts for `rows` rows of `raw` bytes (see the module docstring)."""
    return compress_bound(raw) + (raw >> LITERAL_SLACK_SHIFT) + ROW_SLACK_BYTES * rows


def idat_bytes(data: bytes, enough: int) -> int:
    """The bytes of a PNG's IDAT chunks, walking the chunk headers to IEND or the end of the data (a chunk cut
    short counts the bytes present); the walk stops once the sum is over `enough`, and gives `PNG_EXHAUSTED`
    when `PNG_MAX_CHUNKS` chunks do not finish it."""
    position, total = PNG_SIGNATURE_BYTES, 0
    for _ in range(PNG_MAX_CHUNKS):
        if position + PNG_CHUNK_HEAD > len(data) or total > enough:
            return total
        length, kind = int.from_bytes(data[position : position + 4], "big"), data[position + 4 : position + 8]
        if kind == b"IEND":
            return total
        if kind == b"IDAT":
            total += min(length, len(data) - position - PNG_CHUNK_HEAD)
        position += PNG_CHUNK_EXTRA + length
    return total if position + PNG_CHUNK_HEAD > len(data) or total > enough else PNG_EXHAUSTED


def png_stream_error(data: bytes) -> str | None:
    """The model's refusal of a PNG whose IDAT chunks hold more than `idat_limit` of its rows, or whose chunks
    do not end within `PNG_MAX_CHUNKS`, else None (also for other data). Files no longer than the limit plus
    `PNG_FRAMING_BYTES` pass unwalked."""
    header = _ihdr(data)
    if header is None:
        return None
    width, height = header[0], header[1]
    raw, rows = png_rows(*header)
    limit = idat_limit(raw, rows)
    if len(data) - PNG_FRAMING_BYTES <= limit:
        return None
    total = idat_bytes(data, limit)
    if total == PNG_EXHAUSTED:
        return PNG_NO_END_MESSAGE
    if total <= limit:
        return None
    return PNG_DATA_TEMPLATE.format(
        width=width, height=height, data=total, limit=limit, raw=raw, bound=compress_bound(raw)
    )


def _idat_data(data: bytes) -> bytes:
    """The IDAT chunks' data of a PNG, concatenated (up to `PNG_MAX_CHUNKS` chunks)."""
    position, parts = PNG_SIGNATURE_BYTES, []
    for _ in range(PNG_MAX_CHUNKS):
        if position + PNG_CHUNK_HEAD > len(data) or data[position + 4 : position + 8] == b"IEND":
            break
        length = int.from_bytes(data[position : position + 4], "big")
        if data[position + 4 : position + 8] == b"IDAT":
            parts.append(data[position + PNG_CHUNK_HEAD : position + PNG_CHUNK_HEAD + length])
        position += PNG_CHUNK_EXTRA + length
    return b"".join(parts)


def inflates_past_rows(data: bytes) -> str | None:
    """The exact rule, for Python readers: the refusal of a PNG whose zlib stream inflates to more bytes than its
    rows take, found by inflating at most one byte more than the rows (what decoding costs anyway); else None
    (also for other data, for a stream too damaged to inflate, which the decoder reports, and for a file too short
    to inflate to more than `PAST_ROWS_SKIP` times its rows)."""
    header = _ihdr(data)
    if header is None:
        return None
    raw, _ = png_rows(*header)
    if len(data) * DEFLATE_MAX_RATIO <= PAST_ROWS_SKIP * raw:
        return None  # too short to inflate to more than PAST_ROWS_SKIP times its rows: not worth inflating
    try:
        inflated = zlib.decompressobj().decompress(_idat_data(data), raw + 1)
    except zlib.error:
        return None
    if len(inflated) <= raw:
        return None
    return PNG_PAST_ROWS_TEMPLATE.format(width=header[0], height=header[1], raw=raw)
