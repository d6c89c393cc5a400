"""Decompression bombs for the serving tests: small files whose headers declare huge images.

`png_bomb` is a real one (every row is there, zlib-compressed zeros: 10000 x 10000 in about 97 KB); the
others are small valid images whose header is rewritten to declare `width` x `height`, which is what a decoder
allocates for before it finds the data missing.
"""

from __future__ import annotations

import functools
import io
import struct
import zlib

from PIL import Image


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@functools.cache
def png_bomb(width: int = 10000, height: int = 10000) -> bytes:
    """A complete 8-bit grayscale PNG of zeros: `width` x `height` pixels in a few dozen KB."""
    rows = zlib.compressobj(9)
    row = b"\x00" * (width + 1)  # filter byte + pixels
    data = b"".join(rows.compress(row) for _ in range(height)) + rows.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def _small(format_name: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (90, 40, 200)).save(buffer, format_name, **options)
    return buffer.getvalue()


def header_bomb(format_name: str, width: int, height: int) -> bytes:
    """A 16 x 16 image of `format_name` (PNG, JPEG, GIF, BMP, WebP, WebP-lossless) declaring width x height."""
    if format_name == "PNG":
        data = bytearray(_small("PNG"))
        data[16:24] = struct.pack(">II", width, height)
        data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
        return bytes(data)
    if format_name == "JPEG":
        data = bytearray(_small("JPEG"))
        sof = data.find(b"\xff\xc0")
        data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
        return bytes(data)
    if format_name == "GIF":
        data = bytearray(_small("GIF"))
        data[6:10] = struct.pack("<HH", width, height)
        return bytes(data)
    if format_name == "BMP":
        data = bytearray(_small("BMP"))
        data[18:26] = struct.pack("<ii", width, -height)  # top-down: a negative height
        return bytes(data)
    if format_name == "WebP-lossless":
        data = bytearray(_small("WEBP", lossless=True))
        bits = int.from_bytes(data[21:25], "little") & ~((1 << 28) - 1)
        data[21:25] = (bits | (width - 1) | ((height - 1) << 14)).to_bytes(4, "little")
        return bytes(data)
    if format_name == "WebP":
        data = bytearray(_small("WEBP"))
        data[26:30] = struct.pack("<HH", width, height)
        return bytes(data)
    raise ValueError(f"no bomb for {format_name}")


BOMB_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WebP", "WebP-lossless")


@functools.cache
def gif_bomb(frames: int = 200, side: int = 3000) -> bytes:
    """An animated GIF of `frames` black frames of `side` x `side`, one frame's LZW data repeated: 200 of
    3000 x 3000 take 1.5 MB and cost 1.75 GB in TF's decoder, which reads every frame before keeping the first."""
    buffer = io.BytesIO()
    Image.new("L", (side, side)).save(buffer, "GIF")
    data = buffer.getvalue()
    packed = data[10]
    start = 13 + (3 * 2 ** ((packed & 0x07) + 1) if packed & 0x80 else 0)
    assert data[start] == 0x2C and data[-1] == 0x3B, "Pillow's GIF: screen, color table, one image, trailer"
    return data[:start] + data[start:-1] * frames + b";"


def _segments_end(data: bytes, start: int) -> int:
    """Where the entropy-coded data after a JPEG segment header at `start` ends: the next marker that is not a
    stuffed 0xFF00 or an RSTn."""
    position = start + 2 + int.from_bytes(data[start + 2 : start + 4], "big")
    while True:
        position = data.index(b"\xff", position)
        if data[position + 1] == 0x00 or 0xD0 <= data[position + 1] <= 0xD7:
            position += 2
            continue
        return position


@functools.cache
def scan_bomb(scans: int = 400, side: int = 64) -> bytes:
    """A progressive JPEG of `side` x `side` whose smallest scan is repeated until it holds `scans` scans (SOS
    segments): libjpeg re-reads the whole coefficient buffer at every scan, so 20,000 scans of 5900 x 5900
    take 1.26 MB and a minute of CPU. Pillow's progressive JPEGs hold 10 scans (6 in grayscale)."""
    buffer = io.BytesIO()
    Image.new("RGB", (side, side), (90, 40, 200)).save(buffer, "JPEG", progressive=True, quality=50)
    data = buffer.getvalue()
    starts = [index for index in range(len(data) - 1) if data[index : index + 2] == b"\xff\xda"]
    scan = min((data[start : _segments_end(data, start)] for start in starts), key=len)  # the smallest one
    real = len(starts)
    assert real <= scans and data.endswith(b"\xff\xd9"), "Pillow's progressive JPEG: a few scans, then EOI"
    return data[:-2] + scan * (scans - real) + b"\xff\xd9"


@functools.cache
def idat_bomb(inflated_mib: int = 2048, side: int = 16, chunk_bytes: int = 1 << 16) -> bytes:
    """A `side` x `side` 8-bit grayscale PNG whose IDAT chunks (of `chunk_bytes`) hold one zlib stream of
    `inflated_mib` MiB of zeros: its rows are there (filter 0, zeros), then far more data than they need, which
    libpng's `png_read_end` inflates to the end (2 GiB in about 2 MB took 4.5 s of CPU). Built from one
    full-flushed 1 MiB deflate segment repeated (each one starts afresh), so 2 GiB take milliseconds."""
    compressor = zlib.compressobj(9)
    first = compressor.compress(bytes(1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    segment = compressor.compress(bytes(1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    total = inflated_mib << 20
    adler = (total % 65521) << 16 | 1  # adler32 of zeros: a stays 1, b grows by 1 a byte
    stream = first + segment * (inflated_mib - 1) + b"\x01\x00\x00\xff\xff" + struct.pack(">I", adler)
    idat = b"".join(_chunk(b"IDAT", stream[at : at + chunk_bytes]) for at in range(0, len(stream), chunk_bytes))
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + idat + _chunk(b"IEND", b"")
