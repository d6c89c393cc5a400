"""The in-graph twin of `foundation.png_stream`: the model refuses a PNG whose IDAT chunks hold more compressed
data than any encoder writes for the rows its IHDR declares, with the same message, before decoding.

A PNG no longer than its limit (plus `PNG_FRAMING_BYTES`) passes on its length alone, so the chunk walk, a
`tf.while_loop` of at most `PNG_MAX_CHUNKS` steps over the batch, runs only when some image of the batch is
longer than its rows allow (small images with large metadata, hostile files).

Example:
    messages = png_stream_errors(images, is_png, header_bytes)  # "" where the PNG passes
"""

from __future__ import annotations

import tensorflow as tf

from foundation.graph_bytes import fill, number, window
from foundation.png_stream import (
    ADAM7,
    IHDR_COLOR,
    IHDR_DEPTH,
    IHDR_INTERLACE,
    LITERAL_SLACK_SHIFT,
    PNG_CHANNELS,
    PNG_CHUNK_EXTRA,
    PNG_CHUNK_HEAD,
    PNG_DATA_TEMPLATE,
    PNG_FRAMING_BYTES,
    PNG_MAX_CHANNELS,
    PNG_MAX_CHUNKS,
    PNG_NO_END_MESSAGE,
    PNG_SIGNATURE_BYTES,
    ROW_SLACK_BYTES,
    ZLIB_BOUND_BYTES,
)

_IDAT, _IEND = int.from_bytes(b"IDAT", "big"), int.from_bytes(b"IEND", "big")


def _rows(raw: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """In-graph `foundation.png_stream.png_rows` from the header bytes `raw` (int32 [N, >= 29]): int64 [N]
    bytes and rows."""
    width, height = number(raw, 16, 4, little=False), number(raw, 20, 4, little=False)
    table = [PNG_CHANNELS.get(color, PNG_MAX_CHANNELS) for color in range(256)]
    channels = tf.gather(tf.constant(table, tf.int64), raw[:, IHDR_COLOR])
    bits = tf.cast(raw[:, IHDR_DEPTH], tf.int64) * channels

    def passes(layout: tuple[tuple[int, int, int, int], ...]) -> tuple[tf.Tensor, tf.Tensor]:
        size = rows = tf.zeros_like(width)
        for x, y, dx, dy in layout:
            columns = tf.maximum((width - x + dx - 1) // dx, 0)
            lines = tf.maximum((height - y + dy - 1) // dy, 0)
            lines = tf.where(columns > 0, lines, tf.zeros_like(lines))
            size += lines * (1 + (columns * bits + 7) // 8)
            rows += lines
        return size, rows

    interlaced = tf.not_equal(raw[:, IHDR_INTERLACE], 0)
    (plain_size, plain_rows), (adam7_size, adam7_rows) = passes(((0, 0, 1, 1),)), passes(ADAM7)
    return tf.where(interlaced, adam7_size, plain_size), tf.where(interlaced, adam7_rows, plain_rows)


def _idat_bytes(data: tf.Tensor, walk: tf.Tensor, limit: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """In-graph `foundation.png_stream.idat_bytes` of the [N] strings where `walk`: (IDAT bytes, exhausted)."""
    length = tf.cast(tf.strings.length(data), tf.int64)

    def over(position: tf.Tensor, total: tf.Tensor) -> tf.Tensor:
        return (position + PNG_CHUNK_HEAD > length) | (total > limit)

    def step(
        count: tf.Tensor, position: tf.Tensor, active: tf.Tensor, total: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        raw = window(data, position, length, PNG_CHUNK_HEAD)
        chunk, kind = number(raw, 0, 4, little=False), number(raw, 4, 4, little=False)
        live = active & ~over(position, total) & tf.not_equal(kind, _IEND)
        present = tf.minimum(chunk, length - position - PNG_CHUNK_HEAD)
        total += tf.where(live & tf.equal(kind, _IDAT), present, tf.zeros_like(present))
        return count + 1, tf.where(live, position + PNG_CHUNK_EXTRA + chunk, position), live, total

    start = tf.fill(tf.shape(length), tf.constant(PNG_SIGNATURE_BYTES, tf.int64))
    _, position, active, total = tf.while_loop(
        lambda count, position, active, total: (count < PNG_MAX_CHUNKS) & tf.reduce_any(active),
        step,
        (tf.constant(0), start, walk, tf.zeros_like(length)),
        # As in image_checks' walks: a batch traced at a fixed size leaves the loop with an unknown one.
        shape_invariants=(tf.TensorShape([]), *[tf.TensorShape([None])] * 3),
        maximum_iterations=PNG_MAX_CHUNKS,
    )
    return total, active & ~over(position, total)


def png_stream_errors(data: tf.Tensor, is_png: tf.Tensor, raw: tf.Tensor) -> tf.Tensor:
    """In-graph `foundation.png_stream.png_stream_error` over [N] strings, `is_png` where they are PNGs whose
    first chunk is IHDR, `raw` their first bytes (int32 [N, >= 29]): string [N], "" where they pass."""
    size, rows = _rows(raw)
    bound = size + size // 4096 + size // 16384 + size // 2**25 + ZLIB_BOUND_BYTES
    limit = bound + size // 2**LITERAL_SLACK_SHIFT + ROW_SLACK_BYTES * rows
    walk = is_png & (tf.cast(tf.strings.length(data), tf.int64) - PNG_FRAMING_BYTES > limit)
    total, exhausted = tf.cond(
        tf.reduce_any(walk),
        lambda: _idat_bytes(data, walk, limit),
        lambda: (tf.zeros_like(limit), tf.zeros_like(walk)),
    )
    values = {"data": total, "limit": limit, "raw": size, "bound": bound}
    values |= {"width": number(raw, 16, 4, little=False), "height": number(raw, 20, 4, little=False)}
    message = tf.where(walk & (total > limit), fill(PNG_DATA_TEMPLATE, values), "")
    return tf.where(walk & exhausted, PNG_NO_END_MESSAGE, message)
