"""The preprocessing spec of the model contract, and its rules that need no TensorFlow.

`PreprocessingSpec` says how encoded images become model inputs (size, channels, the pixel limit, the central
crop) and is what `assets/preprocessing.json` holds; `central_square` is the crop's arithmetic and `LUMA_WEIGHTS`
the grayscale conversion, for callers without TensorFlow (the device app's region of interest, the camera model).
The in-graph preprocessing that follows the spec is `foundation.preprocessing`. Plain Python: importing it loads
no TensorFlow.

Example:
    spec = PreprocessingSpec.from_json('{"channels": 1, "image_size": 32}')
    spec.shape  # (32, 32, 1)
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from foundation.bounded import parse_json
from foundation.image_formats import DEFAULT_MAX_IMAGE_PIXELS

_VALID_CHANNELS = (1, 3)
MAX_IMAGE_SIZE = 4096
"""The largest `image_size` a spec may say: a 4096² RGB float32 input is already 200 MB per image; a larger size
in a hand-edited `preprocessing.json` would make device models of frames no camera gives."""
# ITU-R BT.601 luma, as libjpeg and Pillow's convert("L"); they sum to 1, so gray pixels stay exactly as they are.
# The edge model's camera input (edge/camera.py) uses them too.
LUMA_WEIGHTS = (0.299, 0.587, 0.114)


@dataclass(frozen=True)
class PreprocessingSpec:
    """How encoded images become model inputs.

    Attributes:
        image_size: Square output size in pixels (height = width).
        channels: 1 (grayscale) or 3 (RGB); decoding converts the image to this many channels.
        max_image_pixels: Largest width x height an image's header may declare; larger ones are refused before
            decoding (`foundation.image_formats.DEFAULT_MAX_IMAGE_PIXELS`). Specs written before it existed
            read as the default.
        central_crop: The central square's side as a share of the image's shorter side, cropped before the
            resize (`foundation.preprocessing.center_crop`; `trainer.eval_crop`, Model Garden's 0.875). Defaults
            to 1.0: the whole image, squashed to a square, as specs written before it existed read.
    """

    image_size: int
    channels: int
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    central_crop: float = 1.0

    def __post_init__(self) -> None:
        size = self.image_size
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_IMAGE_SIZE:
            raise ValueError(f"PreprocessingSpec.image_size must be an int in 1..{MAX_IMAGE_SIZE}, got {size!r}")
        if self.channels not in _VALID_CHANNELS:
            raise ValueError(f"PreprocessingSpec.channels must be 1 (grayscale) or 3 (RGB), got {self.channels!r}")
        if not isinstance(self.max_image_pixels, int) or self.max_image_pixels < 1:
            raise ValueError(
                f"PreprocessingSpec.max_image_pixels must be a positive int, got {self.max_image_pixels!r}"
            )
        if (
            not isinstance(self.central_crop, (int, float))
            or isinstance(self.central_crop, bool)
            or not 0 < self.central_crop <= 1
        ):
            raise ValueError(
                f"PreprocessingSpec.central_crop must be a share of the shorter side in (0, 1] (1 = the whole "
                f"image, Model Garden's 0.875), got {self.central_crop!r}"
            )

    @property
    def shape(self) -> tuple[int, int, int]:
        """The [H, W, C] shape of one preprocessed image."""
        return (self.image_size, self.image_size, self.channels)

    def to_json(self) -> str:
        """The spec as JSON (what `assets/preprocessing.json` holds)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PreprocessingSpec:
        """Reads a spec written by `to_json`.

        Raises:
            ValueError: the text is not a JSON object, or has missing or unknown keys.
        """
        try:
            values: Any = parse_json(text)
        except ValueError as error:  # not JSON, or nested too deep to read
            raise ValueError(f"preprocessing spec is not valid JSON ({error}); expected e.g. {_EXAMPLE}") from None
        if not isinstance(values, dict):
            raise ValueError(f"preprocessing spec must be a JSON object like {_EXAMPLE}, got {text[:80]!r}")
        fields = {field.name for field in dataclasses.fields(cls)}
        optional = {field.name for field in dataclasses.fields(cls) if field.default is not dataclasses.MISSING}
        unknown, missing = sorted(set(values) - fields), sorted(fields - optional - set(values))
        if unknown or missing:
            raise ValueError(
                f"preprocessing spec has unknown keys {unknown} and missing keys {missing}; "
                f"expected exactly {sorted(fields)}, e.g. {_EXAMPLE}"
            )
        return cls(**values)


_EXAMPLE = '{"channels": 1, "image_size": 32}'


def central_square(height: int, width: int, fraction: float) -> tuple[int, int, int]:
    """(top, left, side) in pixels of the central square `foundation.preprocessing.center_crop` keeps of a
    height × width image.

    The same arithmetic as `center_crop`, for callers without TensorFlow (the device model's region of
    interest, `edge.app_client.central_square_roi`): side = ⌊fraction · min(h, w)⌋ (at least 1),
    offset = ⌊(size − fraction · min(h, w)) / 2⌋ on each axis, as Model Garden truncates them.
    """
    crop = fraction * min(height, width)
    return int((height - crop) / 2.0), int((width - crop) / 2.0), max(int(crop), 1)
