"""Which encoded image formats the model contract accepts, and recognising a format from its first bytes.

The served model (`components.trainer.preprocessing`) and `tfxp data from-folder` (`components.data.images`)
both decide with the tables here; the model evaluates them in-graph on the same first `HEADER_BYTES` bytes, so a
client gets the same verdict from TF Serving, `tfxp serve` and this module. Plain Python: importing it loads
neither TensorFlow nor Pillow.

Accepted: JPEG (RGB, grayscale, CMYK), PNG (8/16-bit, gray, RGBA, palette), GIF (first frame), BMP (24/32-bit)
and still WebP. TensorFlow's `DecodeImage` takes every BMP, but 8-bit BMPs come out as palette indices, not
colours, and 1-bit ones fail; animated WebP fails (and crashes TF 2.21's decoder when asked
for the file's own channel count); JPEG XL decodes only from TF 2.21 on, which TF Serving 2.19 predates.

Example:
    detect_image_format(Path("scan.tif").read_bytes())  # "TIFF"
    served_format_error(Path("scan.tif").read_bytes())  # "unsupported image format TIFF; the model accepts ..."
"""

from __future__ import annotations

from dataclasses import dataclass

ACCEPTED_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WebP")
ACCEPTED_TEXT = "JPEG, PNG, GIF (first frame), BMP (24/32-bit) and WebP (still)"
# Every check reads only this prefix (zero-padded when the data is shorter).
HEADER_BYTES = 32
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Signature:
    """A format's magic bytes: every (offset, bytes) part must match."""

    name: str
    parts: tuple[tuple[int, bytes], ...]


# First match wins. The accepted ones follow TensorFlow's DecodeImage dispatch (decode_image_op.cc).
SIGNATURES = (
    Signature("JPEG", ((0, b"\xff\xd8\xff"),)),
    Signature("PNG", ((0, b"\x89PNG\r\n\x1a\n"),)),
    Signature("GIF", ((0, b"GIF87a"),)),
    Signature("GIF", ((0, b"GIF89a"),)),
    Signature("BMP", ((0, b"BM"),)),
    Signature("WebP", ((0, b"RIFF"), (8, b"WEBP"))),
    Signature("TIFF", ((0, b"II*\x00"),)),
    Signature("TIFF", ((0, b"MM\x00*"),)),
    *(Signature("HEIC", ((4, b"ftyp" + brand),)) for brand in (b"heic", b"heix", b"hevc", b"hevx")),
    *(Signature("HEIF", ((4, b"ftyp" + brand),)) for brand in (b"mif1", b"msf1")),
    *(Signature("AVIF", ((4, b"ftyp" + brand),)) for brand in (b"avif", b"avis")),
    Signature("JPEG XL", ((0, b"\xff\x0a"),)),
    Signature("JPEG XL", ((0, b"\x00\x00\x00\x0cJXL \r\n\x87\n"),)),
    Signature("JPEG 2000", ((0, b"\x00\x00\x00\x0cjP  \r\n\x87\n"),)),
    Signature("JPEG 2000", ((0, b"\xff\x4f\xff\x51"),)),
    Signature("ICO", ((0, b"\x00\x00\x01\x00"),)),
    Signature("PSD", ((0, b"8BPS"),)),
    Signature("PDF", ((0, b"%PDF"),)),
    Signature("SVG", ((0, b"<svg"),)),
    Signature("SVG", ((0, b"<?xml"),)),
)

# Variants of accepted formats that TensorFlow does not decode correctly (see the module docstring).
WEBP_EXTENDED = (12, b"VP8X")  # a VP8X chunk first: its flags byte says whether the file is animated
WEBP_FLAGS_OFFSET = 20
WEBP_ANIMATION_FLAG = 0x02
BMP_BITS_OFFSET = 28  # biBitCount, little-endian uint16, in every BMP info header version
BMP_DECODED_BITS = (24, 32)

# The messages, with `{name}` (the detected format) and, for BMP, `{bits}` filled in; the model builds the same
# text in-graph from these templates.
UNSUPPORTED_TEMPLATE = "unsupported image format {name}; the model accepts " + ACCEPTED_TEXT
UNKNOWN_MESSAGE = "Unknown image file format: the bytes are not an image the model knows; it accepts " + ACCEPTED_TEXT
ANIMATED_WEBP_MESSAGE = (
    "unsupported image format animated WebP; send the first frame as PNG or JPEG (the model accepts "
    + ACCEPTED_TEXT
    + ")"
)
BMP_BITS_TEMPLATE = (
    "unsupported image format BMP with {bits} bits per pixel; send it as PNG (the model accepts " + ACCEPTED_TEXT + ")"
)


def header(data: bytes) -> bytes:
    """The first `HEADER_BYTES` bytes of `data`, zero-padded: what every check reads."""
    return data[:HEADER_BYTES].ljust(HEADER_BYTES, b"\x00")


def detect_image_format(data: bytes) -> str:
    """Names the image format of encoded bytes from their magic bytes.

    Args:
        data: An encoded image (only the first `HEADER_BYTES` bytes are read).

    Returns:
        A `SIGNATURES` name (`JPEG`, `PNG`, `GIF`, `BMP`, `WebP`, `TIFF`, `HEIC`, ...) or `unknown`.
    """
    head = header(data)
    for signature in SIGNATURES:
        if all(head[offset : offset + len(magic)] == magic for offset, magic in signature.parts):
            return signature.name
    return UNKNOWN


def is_animated_webp(data: bytes) -> bool:
    """Whether WebP bytes carry an animation (VP8X chunk with the animation flag)."""
    head = header(data)
    offset, magic = WEBP_EXTENDED
    return head[offset : offset + len(magic)] == magic and bool(head[WEBP_FLAGS_OFFSET] & WEBP_ANIMATION_FLAG)


def bmp_bits_per_pixel(data: bytes) -> int:
    """The bit depth field of BMP bytes."""
    return int.from_bytes(header(data)[BMP_BITS_OFFSET : BMP_BITS_OFFSET + 2], "little")


def served_format_error(data: bytes) -> str | None:
    """Why the served model refuses these bytes before decoding them, or None when it decodes their format.

    Args:
        data: An encoded image, as a client sends it.

    Returns:
        The message the model's INVALID_ARGUMENT error carries, naming the detected format and the accepted ones;
        None for an accepted format (whose data may still turn out corrupt when decoded).
    """
    name = detect_image_format(data)
    if name == UNKNOWN:
        return UNKNOWN_MESSAGE
    if name not in ACCEPTED_FORMATS:
        return UNSUPPORTED_TEMPLATE.format(name=name)
    if name == "WebP" and is_animated_webp(data):
        return ANIMATED_WEBP_MESSAGE
    if name == "BMP" and bmp_bits_per_pixel(data) not in BMP_DECODED_BITS:
        return BMP_BITS_TEMPLATE.format(bits=bmp_bits_per_pixel(data))
    return None
