"""Reading the bytes of string tensors in-graph, for the image checks: fixed-size windows of bytes, the unsigned
integers in them, and messages filled from templates, element-wise over a batch.

Example:
    raw = window(images, position, tf.strings.length(images), 8)  # int32 [N, 8], zero-padded past the end
    width = number(raw, 0, 4, little=False)  # int64 [N]
"""

from __future__ import annotations

import tensorflow as tf


def string_bytes(strings: tf.Tensor, size: int) -> tf.Tensor:
    """int32 [N, size]: the bytes of N strings of exactly `size` bytes (N may be 0)."""
    raw = tf.cast(tf.io.decode_raw(strings, tf.uint8), tf.int32)
    return tf.reshape(raw, [-1, size])


def window(data: tf.Tensor, position: tf.Tensor, length: tf.Tensor, size: int) -> tf.Tensor:
    """int32 [N, size]: the `size` bytes of each of N strings from `position` (int32 or int64) on, zero-padded past
    the end."""
    start = tf.minimum(position, tf.cast(length, position.dtype))  # int32 or int64 positions
    sizes = tf.fill(tf.shape(start), tf.constant(size, start.dtype))
    piece = tf.strings.substr(tf.strings.join([tf.strings.substr(data, start, sizes), b"\x00" * size]), 0, size)
    return string_bytes(piece, size)


def number(raw: tf.Tensor, offset: int, size: int, little: bool) -> tf.Tensor:
    """int64 [N]: the unsigned integer in bytes offset..offset+size of `raw` [N, width]."""
    weights = [256**index for index in range(size)]
    weights = weights if little else weights[::-1]
    return tf.reduce_sum(tf.cast(raw[:, offset : offset + size], tf.int64) * weights, axis=1)


def fill(template: str, values: dict[str, tf.Tensor | int]) -> tf.Tensor:
    """`template.format(**values)` element-wise, for int64 [N] tensors and plain ints."""
    parts = template.format(**{key: f"\0{key}\0" for key in values}).split("\0")
    pieces: list[str | tf.Tensor] = []
    for index, part in enumerate(parts):
        value = values[part] if index % 2 else part
        pieces.append(str(value) if isinstance(value, (str, int)) else tf.strings.as_string(value))
    return tf.strings.join(pieces)
