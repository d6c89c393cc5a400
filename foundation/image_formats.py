"""Which encoded image formats the model contract accepts, and recognising a format from its first bytes.

The served model (`foundation.image_checks`) and `tfxp data from-folder` (`components.data.images`)
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

from foundation.png_stream import png_stream_error

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


# Decoded-size limit: every accepted format states its width and height before its pixel data, so the model
# refuses an image whose header promises more than `max_image_pixels` pixels before DecodeImage allocates them
# (a 97 KB PNG can declare 10000 x 10000 and cost gigabytes). 40 MP keeps every camera photo and an 8K frame
# (7680 x 4320 = 33 MP) and refuses the 100 MP bomb; decoding to float costs about 17 bytes a pixel.
DEFAULT_MAX_IMAGE_PIXELS = 40_000_000
MAX_PIXELS_SETTING = "trainer.max_image_pixels"
# No apostrophes: TF's Assert quotes them (`\\'`) in the error message.
OVERSIZED_TEMPLATE = (
    "image of {width}x{height} pixels is over the limit of {limit} pixels per image the model was exported with ("
    + MAX_PIXELS_SETTING
    + "); send it downscaled"
)
PNG_SIZE_OFFSET = 16  # IHDR width, height: big-endian uint32
GIF_SIZE_OFFSET = 6  # logical screen width, height: little-endian uint16 (what TF's decoder allocates)
BMP_SIZE_OFFSET = 18  # width, height: little-endian int32 (height < 0 = top-down), as TF's decoder reads them
WEBP_CHUNK_OFFSET = 12  # "VP8 ", "VP8L" or "VP8X"
JPEG_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOFn; C4/C8/CC are DHT, JPG, DAC
JPEG_NO_LENGTH_MARKERS = frozenset((0x01, *range(0xD0, 0xD9)))  # TEM, RSTn, SOI: no length field
JPEG_MAX_STEPS = 1024  # markers, fill bytes and stray bytes walked to the frame header; real files take < 30
JPEG_NO_FRAME_MESSAGE = (
    f"JPEG whose frame header (SOFn, where its size is) is not within its first {JPEG_MAX_STEPS} markers and "
    "bytes; the model reads the size before decoding: re-encode the image"
)
JPEG_WINDOW = 9  # bytes read at each step: marker, length, and SOFn's precision, height and width
EXHAUSTED = "exhausted"
# JPEG decoding work: a progressive JPEG's decoder re-reads its whole coefficient buffer at every scan (SOS
# segment), so its CPU grows with scans x pixels, not with the file: 20,000 repeated scans of 5900 x 5900 take
# 1.26 MB and a minute of CPU (libjpeg-turbo's report "Two Issues with the JPEG Standard", LJT-01-003: the fix is to
# "abort after decoding a specific number of scans"; NVIDIA's nvImageCodec stops at 256 scans, DALI at 500).
# Encoders write 10 scans (libjpeg's and Pillow's progressive script; 6 in grayscale, 18 in CMYK), Photoshop 3 to
# 5, so the model refuses more than `JPEG_MAX_SCANS` scans, and more than `JPEG_SCAN_BUDGET` scans' worth of its
# pixel limit: a 40 MP image may hold 20 scans, a 4 MP one 100. Scans are counted as SOS markers (0xFFDA) in the
# bytes: entropy-coded data never holds one (an 0xFF there is followed by 0x00 or RSTn) and fill bytes before a
# marker keep it whole, so the count is never below what the decoder reads; metadata (an EXIF thumbnail) adds a few
# at most.
JPEG_SOS = b"\xff\xda"
JPEG_MAX_SCANS = 100
JPEG_SCAN_BUDGET = 20
SCANS_TEMPLATE = (
    "progressive JPEG of {width}x{height} pixels in {scans} scans is over the limit of {allowed} scans for an "
    "image of its size (the decoder re-reads the whole image at every scan; the model decodes at most "
    f"{JPEG_MAX_SCANS} scans, and at most {JPEG_SCAN_BUDGET} scans of {{limit}} pixels, "
    + MAX_PIXELS_SETTING
    + "); re-encode it (encoders write about 10 scans)"
)
# GIF: TF's decoder (giflib's DGifSlurp) reads every frame before keeping the first, so a GIF decodes to
# frames x screen width x height pixels: 200 frames of 3000 x 3000 take 1.7 MB and cost 1.75 GB. The frames
# are counted by walking the blocks, one step per block or data sub-block (at most 255 bytes), so the cap
# bounds the walk to GIFs of about 16 MB.
GIF_MAX_STEPS = 65536
GIF_SCREEN_BYTES = 13  # header 6 + logical screen descriptor 7
GIF_PACKED_OFFSET = 10  # the screen's packed field: bit 7 = a global color table of 3 * 2^(bits 0-2 + 1) bytes
GIF_IMAGE, GIF_EXTENSION = 0x2C, 0x21
GIF_IMAGE_BYTES = 11  # separator, left, top, width, height, packed, then the LZW minimum code size byte
GIF_WINDOW = 10  # bytes read at each step: up to the image descriptor's packed field
GIF_FRAMES_TEMPLATE = (
    "animated GIF of {frames} frames of {width}x{height} pixels ({pixels} pixels once decoded, as the decoder "
    "holds every frame) is over the limit of {limit} pixels per image the model was exported with ("
    + MAX_PIXELS_SETTING
    + "); send its first frame as PNG or JPEG"
)
GIF_NO_END_MESSAGE = (
    f"GIF whose frames do not end within its first {GIF_MAX_STEPS} blocks and data sub-blocks; the model counts "
    "the frames before decoding: send its first frame as PNG or JPEG"
)


def _color_table_bytes(packed: int) -> int:
    return 3 * 2 ** ((packed & 0x07) + 1) if packed & 0x80 else 0


@dataclass(frozen=True)
class GifFrames:
    """What a GIF's image descriptors declare: how many there are, and the largest one's width and height."""

    count: int
    width: int
    height: int


def gif_frames(data: bytes) -> GifFrames | str:
    """The image descriptors (frames) a GIF holds, walking its blocks one step per block or data sub-block as
    giflib does, which allocates each frame at its descriptor's size; a walk cut short by the end of the data,
    the trailer or an unknown block counts the frames it met, and `EXHAUSTED` when `GIF_MAX_STEPS` steps do
    not finish it. The model walks the same steps in-graph."""
    position = GIF_SCREEN_BYTES + _color_table_bytes(header(data)[GIF_PACKED_OFFSET])
    frames, in_chain = GifFrames(0, 0, 0), False
    for _ in range(GIF_MAX_STEPS):
        if position >= len(data):
            return frames
        window = data[position : position + GIF_WINDOW].ljust(GIF_WINDOW, b"\x00")
        if in_chain:
            in_chain = window[0] != 0
            position += 1 + window[0]
        elif window[0] == GIF_IMAGE:
            width, height = int.from_bytes(window[5:7], "little"), int.from_bytes(window[7:9], "little")
            if width * height > frames.width * frames.height:
                frames = GifFrames(frames.count, width, height)
            frames = GifFrames(frames.count + 1, frames.width, frames.height)
            in_chain = True
            position += GIF_IMAGE_BYTES + _color_table_bytes(window[9])
        elif window[0] == GIF_EXTENSION:
            in_chain = True
            position += 2
        else:
            return frames
    return EXHAUSTED


def _webp_dimensions(head: bytes) -> tuple[int, int] | None:
    chunk = head[WEBP_CHUNK_OFFSET : WEBP_CHUNK_OFFSET + 4]
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        return int.from_bytes(head[26:28], "little") & 0x3FFF, int.from_bytes(head[28:30], "little") & 0x3FFF
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
    return None


def jpeg_dimensions(data: bytes) -> tuple[int, int] | str | None:
    """The SOFn frame header's (width, height), walking markers as libjpeg does, one step per marker, fill
    byte or stray byte (libjpeg skips the last two); None when the data ends first, `EXHAUSTED` when
    `JPEG_MAX_STEPS` steps do not reach it. The model walks the same steps in-graph."""
    position = 2  # after SOI
    for _ in range(JPEG_MAX_STEPS):
        window = data[position : position + JPEG_WINDOW]
        if len(window) < JPEG_WINDOW:
            return None
        if window[0] != 0xFF or window[1] == 0xFF:
            position += 1
        elif window[1] in JPEG_SOF_MARKERS:
            return int.from_bytes(window[7:9], "big"), int.from_bytes(window[5:7], "big")
        elif window[1] in JPEG_NO_LENGTH_MARKERS:
            position += 2
        else:
            position += 2 + int.from_bytes(window[2:4], "big")
    return EXHAUSTED


def image_dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) an accepted image's header declares, read without decoding; None for other data or a
    header cut short. The model reads the same fields in-graph (`foundation.image_checks`)."""
    name, head = detect_image_format(data), header(data)
    if name == "PNG":
        if head[12:16] != b"IHDR":
            return None
        offset = PNG_SIZE_OFFSET
        return int.from_bytes(head[offset : offset + 4], "big"), int.from_bytes(head[offset + 4 : offset + 8], "big")
    if name == "GIF":
        offset = GIF_SIZE_OFFSET
        return int.from_bytes(head[offset : offset + 2], "little"), int.from_bytes(
            head[offset + 2 : offset + 4], "little"
        )
    if name == "BMP":
        offset = BMP_SIZE_OFFSET
        width = int.from_bytes(head[offset : offset + 4], "little", signed=True)
        return abs(width), abs(int.from_bytes(head[offset + 4 : offset + 8], "little", signed=True))
    if name == "WebP":
        return _webp_dimensions(head)
    if name == "JPEG":
        dimensions = jpeg_dimensions(data)
        return dimensions if isinstance(dimensions, tuple) else None
    return None


def decoded_size(data: bytes) -> tuple[int, int, int] | str | None:
    """(frames, width, height) an accepted image decodes to, read without decoding: one frame at its header's
    size, and for a GIF every frame (at least one) at its screen's size or, where larger, its largest frame's;
    `EXHAUSTED` for a GIF whose walk does not finish (`gif_frames`); None where `image_dimensions` is None."""
    dimensions = image_dimensions(data)
    if dimensions is None:
        return None
    width, height = dimensions
    if detect_image_format(data) != "GIF":
        return 1, width, height
    frames = gif_frames(data)
    if not isinstance(frames, GifFrames):
        return EXHAUSTED
    if frames.width * frames.height > width * height:
        width, height = frames.width, frames.height
    return max(frames.count, 1), width, height


def image_pixels(data: bytes) -> int | None:
    """The pixels an accepted image decodes to (`decoded_size`: frames x width x height; a GIF whose walk does
    not finish counts its screen once, the model refuses it); None where `image_dimensions` is None."""
    size = decoded_size(data)
    if size is None:
        return None
    if isinstance(size, str):
        width, height = image_dimensions(data) or (0, 0)
        return width * height
    return size[0] * size[1] * size[2]


def jpeg_scans(data: bytes) -> int:
    """The scans (SOS markers) in JPEG bytes: never fewer than the decoder reads (see `JPEG_SOS`)."""
    return data.count(JPEG_SOS)


def allowed_scans(pixels: int, max_pixels: int) -> int:
    """The most scans the model decodes in a JPEG of `pixels` pixels: `JPEG_MAX_SCANS`, and no more than
    `JPEG_SCAN_BUDGET` scans of `max_pixels` pixels in all."""
    return min(JPEG_MAX_SCANS, JPEG_SCAN_BUDGET * max_pixels // max(pixels, 1))


def decode_work(data: bytes) -> int | None:
    """Pixels x scans: what decoding an accepted image costs (`image_pixels`, times `jpeg_scans` for a JPEG of
    more than one scan); None where `image_pixels` is None."""
    pixels = image_pixels(data)
    if pixels is None or detect_image_format(data) != "JPEG":
        return pixels
    return pixels * max(jpeg_scans(data), 1)


def scans_error(data: bytes, pixels: int, max_pixels: int) -> str | None:
    """The model's refusal of a JPEG of more scans than `allowed_scans` for its `pixels`, else None."""
    if detect_image_format(data) != "JPEG":
        return None
    scans, allowed = jpeg_scans(data), allowed_scans(pixels, max_pixels)
    if scans <= allowed:
        return None
    width, height = image_dimensions(data) or (0, 0)
    return SCANS_TEMPLATE.format(width=width, height=height, scans=scans, allowed=allowed, limit=max_pixels)


def oversized_error(data: bytes, max_pixels: int) -> str | None:
    """The model's refusal of an image that decodes to more than `max_pixels` pixels by its header (and, for
    a GIF, its frames: `decoded_size`), of a JPEG or GIF whose size walk does not finish
    (`JPEG_NO_FRAME_MESSAGE`, `GIF_NO_END_MESSAGE`), or of a JPEG of more scans than its size allows
    (`scans_error`), else None."""
    if detect_image_format(data) == "JPEG" and jpeg_dimensions(data) == EXHAUSTED:
        return JPEG_NO_FRAME_MESSAGE
    size = decoded_size(data)
    if size == EXHAUSTED:
        return GIF_NO_END_MESSAGE
    if not isinstance(size, tuple):
        return None
    frames, width, height = size
    if frames * width * height <= max_pixels:
        return scans_error(data, width * height, max_pixels) or png_stream_error(data)
    if frames != 1:
        pixels = frames * width * height
        return GIF_FRAMES_TEMPLATE.format(frames=frames, width=width, height=height, pixels=pixels, limit=max_pixels)
    return OVERSIZED_TEMPLATE.format(width=width, height=height, limit=max_pixels)


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
