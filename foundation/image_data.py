"""The bytes of an encoded image that carry its pixels, without metadata or padding.

`serving.limits` bounds a request's decoded pixels per byte of image data; counting the whole file let padding
(zeros after a PNG's IEND, a megabyte tEXt chunk, a JPEG COM segment), which a gzip body carries in a few
kilobytes, buy any flat image through. So only the data the decoder inflates or entropy-decodes counts:

- PNG: its IDAT chunks' bytes (`foundation.png_stream.idat_bytes`, at most `PNG_MAX_CHUNKS` chunks; a PNG whose
  chunks do not end there counts none, the model refuses it).
- JPEG: the file from SOI to EOI, less its APPn and COM segments (EXIF, ICC profiles, thumbnails, comments):
  markers and segment lengths are walked as the decoder reads them, entropy-coded data skipped by a regular
  expression (in it an 0xFF is followed by 0x00 or RSTn), at most `JPEG_MAX_STEPS` markers (a hostile file
  counts what those reach).
- other formats: the whole file.

Example:
    image_data_bytes(png_with_a_megabyte_text_chunk)  # its IDAT bytes only
"""

from __future__ import annotations

import re

from foundation.image_formats import JPEG_MAX_STEPS, detect_image_format
from foundation.png_stream import PNG_EXHAUSTED, idat_bytes

# A marker: 0xFF and a code that is not stuffing (0x00), a restart marker (RSTn, in scans) or a fill byte (the
# search then matches at the last 0xFF). A literal first byte keeps the search at memchr speed: 5 ms for a 10 MB
# JPEG of noise, where `\xff+` took 130.
JPEG_MARKER = re.compile(rb"\xff([\x01-\xcf\xd8-\xfe])")
JPEG_EOI = 0xD9
JPEG_TEM = 0x01  # no length field, like SOI and RSTn
JPEG_APP_MARKERS = range(0xE0, 0xF0)
JPEG_COM = 0xFE


def jpeg_data_bytes(data: bytes) -> int:
    """A JPEG's bytes from its start to EOI (or the end of the data), less its APPn and COM segments."""
    position, skipped = 2, 0  # after SOI
    for _ in range(JPEG_MAX_STEPS):
        marker = JPEG_MARKER.search(data, position)
        if marker is None:
            return len(data) - skipped
        code, after = marker[1][0], marker.end()
        if code == JPEG_EOI:
            return after - skipped
        if code == JPEG_TEM:
            position = after
            continue
        position = min(after + int.from_bytes(data[after : after + 2], "big"), len(data))
        if code in JPEG_APP_MARKERS or code == JPEG_COM:
            skipped += position - marker.start()
    return position - skipped


def image_data_bytes(data: bytes) -> int:
    """The bytes of `data` that carry image data (see the module docstring)."""
    name = detect_image_format(data)
    if name == "PNG":
        total = idat_bytes(data, len(data))
        return 0 if total == PNG_EXHAUSTED else total
    if name == "JPEG":
        return jpeg_data_bytes(data)
    return len(data)
