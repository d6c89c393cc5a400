"""The eval images as apps hand them to MediaPipe's ImageClassifier: whole frames, which it resizes itself.

The EdgeExporter's first MediaPipe check feeds frames already at the model's size (`edge.data.camera_frame`), so
MediaPipe resizes nothing and sees what LiteRT saw. An app does not: it passes the camera's frame whole, and
MediaPipe resizes it to the model input with OpenCV, whose bilinear sample grid is half a pixel off TensorFlow's
(`edge.app_client.central_square_roi`). So the gate also feeds each eval image

- at its own size (`own`): decoded to RGB as it is stored, as an app classifying a photo does;
- at a camera size (`camera`, `edge.app_frame_size`, e.g. 240 × 240 or 480 × 640): the image resized to it
  (TensorFlow's bilinear, with antialiasing when it shrinks), as a camera that sees the scene at that size.

Frames come in chunks (`CHUNK_FRAMES`), decoded when the chunk is written, so large images are never all in
memory at once.

Example:
    sets = app_frame_sets(eval_data.encoded, (240, 240))
    answers = classify_sets(tflite, sets, spec)  # {"own": ClientResult, "camera": ClientResult}
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow as tf

OWN_SIZE = "own"
CAMERA_SIZE = "camera"
CHUNK_FRAMES = 256


def own_size_frame(encoded: bytes) -> np.ndarray:
    """An encoded image as RGB uint8 [height, width, 3] at its own size."""
    return tf.io.decode_image(encoded, channels=3, expand_animations=False).numpy()


def camera_size_frame(encoded: bytes, size: tuple[int, int]) -> np.ndarray:
    """An encoded image as an RGB uint8 frame of `size` (height, width): resized bilinear, antialiased."""
    pixels = tf.cast(tf.io.decode_image(encoded, channels=3, expand_animations=False), tf.float32)
    resized = tf.image.resize(pixels, size, method="bilinear", antialias=True)
    return tf.cast(tf.round(tf.clip_by_value(resized, 0.0, 255.0)), tf.uint8).numpy()


def _chunks(encoded: Sequence[bytes], size: tuple[int, int] | None) -> Iterator[list[np.ndarray]]:
    for start in range(0, len(encoded), CHUNK_FRAMES):
        part = encoded[start : start + CHUNK_FRAMES]
        yield [own_size_frame(image) if size is None else camera_size_frame(image, size) for image in part]


def app_frame_sets(encoded: Sequence[bytes], camera_size: tuple[int, int]) -> dict[str, Iterator[list[np.ndarray]]]:
    """{`own`: the images at their own size, `camera`: at `camera_size`}, each as lazy chunks of frames."""
    return {OWN_SIZE: _chunks(encoded, None), CAMERA_SIZE: _chunks(encoded, camera_size)}


def describe_size(name: str, camera_size: tuple[int, int]) -> str:
    """`at their own size` or `at 240×240` (height × width), for the gate's reason."""
    return "at their own size" if name == OWN_SIZE else f"at {camera_size[0]}×{camera_size[1]}"
