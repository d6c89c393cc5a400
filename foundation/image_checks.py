"""The in-graph twin of `foundation.image_formats`: the model refuses formats it does not decode and images whose
header declares more pixels than its limit, with the same messages as the Python functions, before decoding.

Each check reads only the first `HEADER_BYTES` bytes of each image (JPEG's and GIF's blocks are walked up to a cap),
with the tables of `foundation.image_formats`, so TF Serving, `tfxp serve` and `tfxp data from-folder` give a
client the same verdict for the same bytes.

Example:
    images = check_image_formats(tf.constant([png_bytes]), max_pixels=40_000_000)  # raises when evaluated if refused
"""

from __future__ import annotations

import functools

import tensorflow as tf

from foundation.graph_bytes import fill, number, string_bytes, window
from foundation.image_formats import (
    ACCEPTED_FORMATS,
    ANIMATED_WEBP_MESSAGE,
    BMP_BITS_OFFSET,
    BMP_BITS_TEMPLATE,
    BMP_DECODED_BITS,
    BMP_SIZE_OFFSET,
    DEFAULT_MAX_IMAGE_PIXELS,
    GIF_EXTENSION,
    GIF_FRAMES_TEMPLATE,
    GIF_IMAGE,
    GIF_IMAGE_BYTES,
    GIF_MAX_STEPS,
    GIF_NO_END_MESSAGE,
    GIF_PACKED_OFFSET,
    GIF_SCREEN_BYTES,
    GIF_SIZE_OFFSET,
    GIF_WINDOW,
    HEADER_BYTES,
    JPEG_MAX_SCANS,
    JPEG_MAX_STEPS,
    JPEG_NO_FRAME_MESSAGE,
    JPEG_NO_LENGTH_MARKERS,
    JPEG_SCAN_BUDGET,
    JPEG_SOF_MARKERS,
    JPEG_SOS,
    JPEG_WINDOW,
    OVERSIZED_TEMPLATE,
    PNG_SIZE_OFFSET,
    SCANS_TEMPLATE,
    SIGNATURES,
    UNKNOWN,
    UNKNOWN_MESSAGE,
    UNSUPPORTED_TEMPLATE,
    WEBP_ANIMATION_FLAG,
    WEBP_EXTENDED,
    WEBP_FLAGS_OFFSET,
)
from foundation.png_checks import png_stream_errors


def _all(conditions: list[tf.Tensor]) -> tf.Tensor:
    return functools.reduce(tf.logical_and, conditions)


def _any(conditions: list[tf.Tensor]) -> tf.Tensor:
    return functools.reduce(tf.logical_or, conditions)


def _header(image_bytes: tf.Tensor) -> tf.Tensor:
    return tf.strings.join([tf.strings.substr(image_bytes, 0, HEADER_BYTES), b"\x00" * HEADER_BYTES])


def _format_names(head: tf.Tensor) -> tf.Tensor:
    def at(offset: int, magic: bytes) -> tf.Tensor:
        return tf.equal(tf.strings.substr(head, offset, len(magic)), magic)

    name = tf.fill(tf.shape(head), UNKNOWN)
    for signature in reversed(SIGNATURES):  # the first signature that matches wins, as in detect_image_format
        name = tf.where(_all([at(offset, magic) for offset, magic in signature.parts]), signature.name, name)
    return name


def _jpeg_dimensions(data: tf.Tensor, is_jpeg: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """In-graph `foundation.image_formats.jpeg_dimensions` over [N] strings: (width, height, exhausted)."""
    length = tf.strings.length(data)
    sof = tf.constant(sorted(JPEG_SOF_MARKERS), tf.int32)
    no_length = tf.constant(sorted(JPEG_NO_LENGTH_MARKERS), tf.int32)
    zeros = tf.zeros_like(length, tf.int64)

    def step(
        count: tf.Tensor, position: tf.Tensor, active: tf.Tensor, width: tf.Tensor, height: tf.Tensor
    ) -> tuple[tf.Tensor, ...]:
        raw = window(data, position, length, JPEG_WINDOW)
        ended = position + JPEG_WINDOW > length
        stray = tf.not_equal(raw[:, 0], 0xFF) | tf.equal(raw[:, 1], 0xFF)
        marker = raw[:, 1:2]
        found = active & ~ended & ~stray & tf.reduce_any(tf.equal(marker, sof), axis=1)
        width = tf.where(found, number(raw, 7, 2, little=False), width)
        height = tf.where(found, number(raw, 5, 2, little=False), height)
        size = tf.where(
            stray,
            1,
            tf.where(tf.reduce_any(tf.equal(marker, no_length), axis=1), 2, 2 + raw[:, 2] * 256 + raw[:, 3]),
        )
        moving = active & ~ended & ~found
        return count + 1, tf.where(moving, position + size, position), moving, width, height

    _, _, exhausted, width, height = tf.while_loop(
        lambda count, position, active, *_: (count < JPEG_MAX_STEPS) & tf.reduce_any(active),
        step,
        (tf.constant(0), tf.fill(tf.shape(length), 2), is_jpeg, zeros, zeros),
        # A batch traced at a fixed size (the Trainer's batch of 1) leaves the loop with an unknown one.
        shape_invariants=(tf.TensorShape([]), *[tf.TensorShape([None])] * 4),
        maximum_iterations=JPEG_MAX_STEPS,
    )
    return width, height, exhausted


def _sos_markers(one: tf.Tensor) -> tf.Tensor:
    """`foundation.image_formats.jpeg_scans` of one string, in memory a few times its size: the bytes read as
    little-endian 16-bit words at even and at odd offsets, each compared with the marker. (Splitting on the marker
    made a string per piece: a body of nothing but markers took 28 times its size.)"""
    padded = tf.strings.join([one, "\0\0"])  # at least 2 bytes, so both views exist
    size = tf.strings.length(padded)
    marker = tf.constant(int.from_bytes(JPEG_SOS, "little"), tf.uint16)
    count = tf.constant(0, tf.int64)
    for offset in (0, 1):
        words = tf.strings.substr(padded, offset, (size - offset) // 2 * 2)
        count += tf.math.count_nonzero(tf.equal(tf.io.decode_raw(words, tf.uint16, little_endian=True), marker))
    return count


def _scans_errors(
    data: tf.Tensor, is_jpeg: tf.Tensor, width: tf.Tensor, height: tf.Tensor, max_pixels: int
) -> tf.Tensor:
    """In-graph `foundation.image_formats.scans_error` over [N] strings whose JPEG frame header declares
    `width` x `height`: the SOS markers counted by splitting the bytes on them (one pass, no loop)."""
    scans = tf.map_fn(_sos_markers, tf.where(is_jpeg, data, ""), fn_output_signature=tf.int64)
    pixels = width * height
    allowed = tf.minimum(tf.constant(JPEG_MAX_SCANS, tf.int64), JPEG_SCAN_BUDGET * max_pixels // tf.maximum(pixels, 1))
    values = {"width": width, "height": height, "scans": scans, "allowed": allowed, "limit": max_pixels}
    return tf.where(is_jpeg & (pixels > 0) & (scans > allowed), fill(SCANS_TEMPLATE, values), "")


def _color_table_bytes(packed: tf.Tensor) -> tf.Tensor:
    """int32: the bytes of the color table a GIF packed field (int32 byte values) announces, 0 for none."""
    entries = tf.bitwise.left_shift(tf.ones_like(packed), tf.bitwise.bitwise_and(packed, 0x07) + 1)
    return tf.where(tf.bitwise.bitwise_and(packed, 0x80) != 0, 3 * entries, 0)


def _gif_frames(data: tf.Tensor, is_gif: tf.Tensor, packed: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """In-graph `foundation.image_formats.gif_frames` over [N] strings: (frames, the largest frame's width
    and height, exhausted)."""
    length = tf.strings.length(data)

    def step(
        count: tf.Tensor,
        position: tf.Tensor,
        in_chain: tf.Tensor,
        active: tf.Tensor,
        frames: tf.Tensor,
        width: tf.Tensor,
        height: tf.Tensor,
    ) -> tuple[tf.Tensor, ...]:
        raw = window(data, position, length, GIF_WINDOW)
        live = active & (position < length)
        chain = live & in_chain
        image = live & ~in_chain & tf.equal(raw[:, 0], GIF_IMAGE)
        extension = live & ~in_chain & tf.equal(raw[:, 0], GIF_EXTENSION)
        size = tf.where(chain, 1 + raw[:, 0], tf.where(image, GIF_IMAGE_BYTES + _color_table_bytes(raw[:, 9]), 2))
        moving = chain | image | extension
        in_chain = tf.where(chain, tf.not_equal(raw[:, 0], 0), image | extension)
        frames = frames + tf.cast(image, tf.int64)
        frame_width, frame_height = number(raw, 5, 2, little=True), number(raw, 7, 2, little=True)
        larger = image & (frame_width * frame_height > width * height)
        width, height = tf.where(larger, frame_width, width), tf.where(larger, frame_height, height)
        return count + 1, tf.where(moving, position + size, position), in_chain, moving, frames, width, height

    _, _, _, exhausted, frames, width, height = tf.while_loop(
        lambda count, position, in_chain, active, *_: (count < GIF_MAX_STEPS) & tf.reduce_any(active),
        step,
        (
            tf.constant(0),
            GIF_SCREEN_BYTES + _color_table_bytes(packed),
            tf.zeros_like(is_gif),
            is_gif,
            *[tf.zeros_like(length, tf.int64)] * 3,
        ),
        # As in _jpeg_dimensions: a batch traced at a fixed size leaves the loop with an unknown one.
        shape_invariants=(tf.TensorShape([]), *[tf.TensorShape([None])] * 6),
        maximum_iterations=GIF_MAX_STEPS,
    )
    return frames, width, height, exhausted


def _header_dimensions(head: tf.Tensor, name: tf.Tensor, raw: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """int64 [N] width and height that PNG, GIF, BMP and WebP headers declare (0 for the other formats, and for a
    PNG without its IHDR chunk first)."""
    zeros = tf.zeros_like(name, tf.int64)

    def signed(value: tf.Tensor) -> tf.Tensor:  # BMP's int32 fields, |value|
        return tf.abs(tf.where(value >= 2**31, value - 2**32, value))

    dims = {
        "PNG": (number(raw, PNG_SIZE_OFFSET, 4, False), number(raw, PNG_SIZE_OFFSET + 4, 4, False)),
        "GIF": (number(raw, GIF_SIZE_OFFSET, 2, True), number(raw, GIF_SIZE_OFFSET + 2, 2, True)),
        "BMP": (signed(number(raw, BMP_SIZE_OFFSET, 4, True)), signed(number(raw, BMP_SIZE_OFFSET + 4, 4, True))),
    }
    chunk = tf.strings.substr(head, 12, 4)
    vp8l = number(raw, 21, 4, True)
    webp = [
        (
            tf.equal(chunk, "VP8 ") & tf.equal(tf.strings.substr(head, 23, 3), b"\x9d\x01\x2a"),
            number(raw, 26, 2, True) % 16384,
            number(raw, 28, 2, True) % 16384,
        ),
        (tf.equal(chunk, "VP8L") & tf.equal(raw[:, 20], 0x2F), vp8l % 16384 + 1, (vp8l // 16384) % 16384 + 1),
        (tf.equal(chunk, "VP8X"), number(raw, 24, 3, True) + 1, number(raw, 27, 3, True) + 1),
    ]
    width, height = zeros, zeros
    for format_name, (format_width, format_height) in dims.items():
        width = tf.where(tf.equal(name, format_name), format_width, width)
        height = tf.where(tf.equal(name, format_name), format_height, height)
    png_ok = tf.equal(tf.strings.substr(head, 12, 4), "IHDR")
    width, height = tf.where(tf.equal(name, "PNG") & ~png_ok, zeros, width), height
    for condition, format_width, format_height in webp:
        width = tf.where(tf.equal(name, "WebP") & condition, format_width, width)
        height = tf.where(tf.equal(name, "WebP") & condition, format_height, height)
    return width, height


def image_size_errors(image_bytes: tf.Tensor, max_pixels: int) -> tf.Tensor:
    """In-graph `foundation.image_formats.oversized_error`: string [N] messages for [N] encoded images whose
    header declares more than `max_pixels` pixels, JPEGs of too many scans and PNGs of too much image data
    (`foundation.png_checks`) ("" for the others), read before anything is decoded."""
    head = _header(image_bytes)
    name = _format_names(head)
    raw = string_bytes(tf.strings.substr(head, 0, HEADER_BYTES), HEADER_BYTES)
    zeros = tf.zeros_like(name, tf.int64)
    width, height = _header_dimensions(head, name, raw)
    is_jpeg = tf.equal(name, "JPEG")
    jpeg_width, jpeg_height, exhausted = tf.cond(
        tf.reduce_any(is_jpeg),
        lambda: _jpeg_dimensions(image_bytes, is_jpeg),
        lambda: (zeros, zeros, tf.zeros_like(is_jpeg)),
    )
    width, height = tf.where(is_jpeg, jpeg_width, width), tf.where(is_jpeg, jpeg_height, height)
    is_gif = tf.equal(name, "GIF")
    gif_frames, frame_width, frame_height, gif_exhausted = tf.cond(
        tf.reduce_any(is_gif),
        lambda: _gif_frames(image_bytes, is_gif, raw[:, GIF_PACKED_OFFSET]),
        lambda: (zeros, zeros, zeros, tf.zeros_like(is_gif)),
    )
    frames = tf.where(is_gif, tf.maximum(gif_frames, 1), tf.ones_like(zeros))
    larger = is_gif & (frame_width * frame_height > width * height)  # giflib allocates each frame at its size
    width, height = tf.where(larger, frame_width, width), tf.where(larger, frame_height, height)
    pixels = width * height * frames
    sizes = {"width": width, "height": height, "limit": max_pixels}
    message = tf.where(
        frames > 1,
        fill(GIF_FRAMES_TEMPLATE, {**sizes, "frames": frames, "pixels": pixels}),
        fill(OVERSIZED_TEMPLATE, sizes),
    )
    is_png = tf.equal(name, "PNG") & tf.equal(tf.strings.substr(head, 12, 4), "IHDR") & (pixels <= max_pixels)
    within = tf.where(
        is_png,
        png_stream_errors(image_bytes, is_png, raw),
        _scans_errors(image_bytes, is_jpeg, width, height, max_pixels),
    )
    message = tf.where(pixels > max_pixels, message, within)
    message = tf.where(is_gif & gif_exhausted, GIF_NO_END_MESSAGE, message)
    return tf.where(exhausted, JPEG_NO_FRAME_MESSAGE, message)


def image_format_errors(image_bytes: tf.Tensor) -> tf.Tensor:
    """In-graph `foundation.image_formats.served_format_error`, element-wise.

    Reads only the first `HEADER_BYTES` bytes of each element, with the same tables as the Python function, so
    both give the same message for the same bytes.

    Args:
        image_bytes: String tensor of any shape holding encoded images.

    Returns:
        String tensor of the same shape: the refusal message, or "" for an accepted format.
    """
    head = _header(image_bytes)

    def at(offset: int, magic: bytes) -> tf.Tensor:
        return tf.equal(tf.strings.substr(head, offset, len(magic)), magic)

    name = _format_names(head)
    flags = tf.io.decode_raw(tf.strings.substr(head, WEBP_FLAGS_OFFSET, 1), tf.uint8)[..., 0]
    animated = _all(
        [
            tf.equal(name, "WebP"),
            at(*WEBP_EXTENDED),
            tf.not_equal(tf.bitwise.bitwise_and(flags, WEBP_ANIMATION_FLAG), 0),
        ]
    )
    bits = tf.io.decode_raw(tf.strings.substr(head, BMP_BITS_OFFSET, 2), tf.uint16, little_endian=True)[..., 0]
    bits = tf.cast(bits, tf.int32)
    odd_bmp = tf.equal(name, "BMP") & tf.logical_not(_any([tf.equal(bits, depth) for depth in BMP_DECODED_BITS]))

    before, after = UNSUPPORTED_TEMPLATE.split("{name}")
    bmp_before, bmp_after = BMP_BITS_TEMPLATE.split("{bits}")
    accepted = _any([tf.equal(name, accepted_name) for accepted_name in ACCEPTED_FORMATS])
    message = tf.where(accepted, "", tf.strings.join([before, name, after]))
    message = tf.where(tf.equal(name, UNKNOWN), UNKNOWN_MESSAGE, message)
    message = tf.where(animated, ANIMATED_WEBP_MESSAGE, message)
    return tf.where(odd_bmp, tf.strings.join([bmp_before, tf.strings.as_string(bits), bmp_after]), message)


def check_image_formats(image_bytes: tf.Tensor, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> tf.Tensor:
    """`image_bytes`, gated on every element being in a format the model decodes, of at most `max_pixels`.

    One vectorised check per batch (about 80 string ops, plus a few per JPEG marker and per GIF block): run inside the
    per-image loop it would cost more than decoding a small PNG.

    Args:
        image_bytes: String tensor of any shape holding encoded images.
        max_pixels: Largest width x height a header may declare (`image_size_errors`).

    Returns:
        The same tensor; evaluating it raises InvalidArgumentError("assertion failed: [<message>]") with the
        message of the first refused element (`foundation.image_formats.served_format_error`).
    """
    flat = tf.reshape(image_bytes, [-1])
    messages = image_format_errors(flat)
    messages = tf.where(tf.equal(messages, ""), image_size_errors(flat, max_pixels), messages)
    refused = tf.not_equal(messages, "")
    first = tf.concat([tf.boolean_mask(messages, refused), [""]], axis=0)[0]
    check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(refused)), [first], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(image_bytes)
