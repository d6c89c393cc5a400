"""Checking input files: which are images the model accepts, fully decoded with Pillow, and how to store them.

Stored examples hold only JPEG (gray or RGB) or PNG, upright: the data contract's `image/encoded`.

- JPEG (gray/RGB) and PNG (any mode: TensorFlow decodes palette, alpha and 16 bit the same way at training and
  serving time) are stored byte for byte.
- CMYK JPEG, GIF (first frame), BMP and WebP (first frame) are re-encoded as PNG: TensorFlow decodes 8-bit BMPs
  as palette indices and not animated WebP at all, and other tools reading the TFRecords expect JPEG or PNG.
- A JPEG or PNG with an EXIF orientation other than "upright" is turned upright (`ImageOps.exif_transpose`) and
  re-encoded in its own format (JPEG at quality 95), because the served model never applies EXIF orientation:
  training sees the photo as a person does, and clients must send upright pixels.
- A JPEG of more scans than the model decodes (`foundation.image_formats.scans_error`: a progressive JPEG's
  decoder re-reads the whole image at every scan) is refused from its bytes, before Pillow decodes it; so is a PNG
  of more compressed data than its rows need (`foundation.png_stream`), which TensorFlow's decoder inflates to
  its end.
- Anything else (TIFF, HEIC, text, ...) is skipped, with a reason naming the detected format; but a file named
  like an image (.jpg, .png, ...) whose content is no known format is broken, like a truncated JPEG.

This module imports neither TensorFlow nor TFX, so process-pool workers start fast.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageOps

from foundation.image_formats import (
    ACCEPTED_FORMATS,
    ACCEPTED_TEXT,
    DEFAULT_MAX_IMAGE_PIXELS,
    HEADER_BYTES,
    UNKNOWN,
    detect_image_format,
    image_dimensions,
    scans_error,
)
from foundation.png_stream import inflates_past_rows, png_stream_error

# Names of image files: one whose content is no known format is broken (an error), not skipped like notes.txt.
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp"})
_GRAY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "F"})
_JPEG_KEPT_MODES = frozenset({"L", "RGB"})
_EXIF_ORIENTATION = 0x0112
_UPRIGHT = 1
_REENCODED_JPEG_QUALITY = 95


@dataclass(frozen=True)
class ImageCheck:
    """The outcome of checking one file.

    Attributes:
        path: The file, as given.
        error: Why a file in an accepted format cannot be used (truncated, corrupt); None when it decoded fully.
        unsupported: Why the file is not taken at all (not an image in an accepted format); None when it is.
        reencoded: PNG or JPEG bytes to store instead of the file (None = store the file's bytes).
        original: What a re-encoded file was and why it changed, e.g. `JPEG CMYK` or `JPEG RGB, EXIF orientation 6`.
    """

    path: str
    error: str | None = None
    unsupported: str | None = None
    reencoded: bytes | None = None
    original: str = ""


def unsupported_reason(name: str) -> str:
    """Why a file of the detected format `name` (a `detect_image_format` result or Pillow's name) is skipped."""
    if name == UNKNOWN:
        return "not an image in a format tfxp knows"
    return f"{name} image: not a format the model accepts ({ACCEPTED_TEXT}); convert it to PNG or JPEG"


def check_image(path: str) -> ImageCheck:
    """Decides from the file's content (not its name) whether and how to store it, decoding it fully.

    Args:
        path: A file in a class folder.

    Returns:
        The check result; never raises for a bad file (the reason is in the result).
    """
    try:
        with open(path, "rb") as file:
            name = detect_image_format(file.read(HEADER_BYTES))
        if name == UNKNOWN:
            name = _pillow_format(path)
            if name == UNKNOWN and Path(path).suffix.lower() in IMAGE_SUFFIXES:  # named as an image: a broken one
                return ImageCheck(
                    path, error=f"not a {Path(path).suffix.lower()[1:].upper()} image: unrecognised content"
                )
        if name not in ACCEPTED_FORMATS:
            return ImageCheck(path, unsupported=unsupported_reason(name))
        if name == "JPEG" and (too_much := _scans_error(path)):
            return ImageCheck(path, error=too_much)  # refused before Pillow spends a minute on its scans
        if name == "PNG" and (too_much := _png_data_error(path)):
            return ImageCheck(path, error=too_much)  # Pillow stops at the rows, the model's decoder would not
        with Image.open(path) as image:
            image.load()  # decodes every pixel (the first frame): truncated or corrupt data raises here
            return _storage(path, name, image)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        # Pillow reports truncation as OSError and broken PNG chunks as SyntaxError.
        return ImageCheck(path, error=f"{type(error).__name__}: {error}")


def _scans_error(path: str) -> str | None:
    """The model's refusal of a JPEG of more scans than its size allows (`scans_error`, at the default pixel
    limit), read from the bytes before anything decodes them."""
    data = Path(path).read_bytes()
    width, height = image_dimensions(data) or (0, 0)
    return scans_error(data, width * height, DEFAULT_MAX_IMAGE_PIXELS) if width * height else None


def _png_data_error(path: str) -> str | None:
    """The model's refusal of a PNG whose compressed data is more than its rows need (`foundation.png_stream`)."""
    data = Path(path).read_bytes()
    return png_stream_error(data) or inflates_past_rows(data)


def _pillow_format(path: str) -> str:
    # Formats without a signature in image_formats (PPM, TGA, ...): Pillow may still name them.
    try:
        with Image.open(path) as image:
            return image.format or UNKNOWN
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return UNKNOWN


def _orientation(image: Image.Image) -> int:
    """The EXIF orientation (1-8), or 1 (upright) when the image has none or an invalid one."""
    orientation = image.getexif().get(_EXIF_ORIENTATION, _UPRIGHT)
    return orientation if orientation in range(1, 9) else _UPRIGHT


def _storage(path: str, name: str, image: Image.Image) -> ImageCheck:
    orientation = _orientation(image)
    if orientation == _UPRIGHT and _kept_as_is(name, image):
        return ImageCheck(path)
    original = f"{name} {image.mode}" + (f", EXIF orientation {orientation}" if orientation != _UPRIGHT else "")
    return ImageCheck(path, reencoded=_reencode(name, image, orientation), original=original)


def _kept_as_is(name: str, image: Image.Image) -> bool:
    return name == "PNG" or (name == "JPEG" and image.mode in _JPEG_KEPT_MODES)


def _reencode(name: str, image: Image.Image, orientation: int) -> bytes:
    upright = ImageOps.exif_transpose(image) if orientation != _UPRIGHT else image
    buffer = io.BytesIO()
    if _kept_as_is(name, image) and name == "JPEG":
        upright.save(buffer, format="JPEG", quality=_REENCODED_JPEG_QUALITY)
    elif _kept_as_is(name, image):
        upright.save(buffer, format="PNG")
    else:
        upright.convert("L" if image.mode in _GRAY_MODES else "RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def upright_image_bytes(data: bytes) -> bytes:
    """Encoded image bytes turned upright by their EXIF orientation, re-encoded as `check_image` stores them.

    What a client must send (the served model never applies EXIF orientation): `tfxp predict` sends files
    through this, so a phone photo is classified as it was stored for training.

    Args:
        data: An encoded image.

    Returns:
        `data` itself when it is upright (no orientation or orientation 1), not in an accepted format, or not
        readable (the server then says what is wrong); else the upright image as JPEG (from a gray or RGB JPEG)
        or PNG.
    """
    name = detect_image_format(data)
    if name not in ACCEPTED_FORMATS:
        return data
    try:
        with Image.open(io.BytesIO(data)) as image:
            orientation = _orientation(image)
            if orientation == _UPRIGHT:
                return data
            image.load()
            return _reencode(name, image, orientation)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return data
