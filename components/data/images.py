"""Checking input images: fully decoded with Pillow, kept as is when TensorFlow can decode them.

This module imports neither TensorFlow nor TFX, so process-pool workers start fast.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png"})
# Stored byte-for-byte: PNG in any mode (tf.io.decode_png handles palette, alpha and 16 bit) and
# JPEG in gray or RGB. Anything else (CMYK JPEG, a GIF or WebP named .png, ...) is re-encoded as PNG.
_KEEP_MODES = {"JPEG": frozenset({"L", "RGB"}), "PNG": None}
_GRAY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "F"})


@dataclass(frozen=True)
class ImageCheck:
    """The outcome of checking one image file.

    Attributes:
        path: The file, as given.
        error: Why it cannot be used (None when it decoded fully).
        reencoded: PNG bytes to store instead of the file (None = store the file's bytes).
        original: Format and mode of a re-encoded file, e.g. `JPEG CMYK`.
    """

    path: str
    error: str | None = None
    reencoded: bytes | None = None
    original: str = ""


def check_image(path: str) -> ImageCheck:
    """Decodes the whole image (so truncated files fail) and decides how to store it.

    Args:
        path: An image file.

    Returns:
        The check result; never raises for a bad file (the error is in the result).
    """
    try:
        with Image.open(path) as image:
            image.load()  # decodes every pixel: truncated or corrupt data raises here
            keep_modes = _KEEP_MODES.get(image.format or "", frozenset())
            if keep_modes is None or image.mode in keep_modes:
                return ImageCheck(path)
            converted = image.convert("L" if image.mode in _GRAY_MODES else "RGB")
            buffer = io.BytesIO()
            converted.save(buffer, format="PNG")
            return ImageCheck(path, reencoded=buffer.getvalue(), original=f"{image.format} {image.mode}")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        # Pillow reports unknown formats as UnidentifiedImageError (an OSError), truncation as OSError,
        # broken PNG chunks as SyntaxError.
        return ImageCheck(path, error=f"{type(error).__name__}: {error}")
