"""Damaged copies of a span, for showing and measuring the drift checks: labels remapped, images brightened, resized
or replaced by noise.

Each of these is a real way a span goes wrong: a labelling bug that maps several classes to one (or class to
class), a camera or exposure change (brighter images), a preprocessing change (another image size), a failing
sensor or a scraper that stored junk (a share of the images noise). The copy keeps the span's layout and file
names; only the named property changes.

Example:
    rewrite_span(Path("stream/span-4"), Path("stream-bad/span-4"), relabel={1: 7, 2: 7, 3: 7})
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from foundation.contract import IMAGE_KEY, LABEL_KEY, SYNSET_KEY, TEXT_KEY
from foundation.data.record_frames import check_record_frames
from foundation.data.tfrecords import compression_for


def damage_image(encoded: bytes, brighten: float = 0.0, scale: float = 1.0) -> bytes:
    """The image with `brighten` (0..1 of full scale) added to every pixel and its size times `scale`, as PNG."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(encoded)) as image:
        pixels = np.asarray(image, dtype=np.float32)
        mode = image.mode
    pixels = np.clip(pixels + 255.0 * brighten, 0, 255).astype(np.uint8)
    result = Image.fromarray(pixels, mode=mode)
    if scale != 1.0:
        result = result.resize((max(1, round(result.width * scale)), max(1, round(result.height * scale))))
    buffer = io.BytesIO()
    result.save(buffer, format="PNG")
    return buffer.getvalue()


def noise_image(encoded: bytes, rng: Any) -> bytes:
    """Uniform noise of the image's size and mode, as PNG (drawn from the NumPy generator `rng`)."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(encoded)) as image:
        shape = np.asarray(image).shape
        mode = image.mode
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, size=shape, dtype=np.uint8), mode=mode).save(buffer, format="PNG")
    return buffer.getvalue()


def rewrite_span(
    source: Path,
    target: Path,
    relabel: Mapping[int, int] | None = None,
    brighten: float = 0.0,
    scale: float = 1.0,
    splits: tuple[str, ...] = ("train", "eval"),
    noise: float = 0.0,
) -> None:
    """Copies span folder `source` to `target` (replaced), changing the records of `splits` as asked; `noise` is
    the share of records whose image becomes noise (each drawn with that chance, seeded: the same bytes each time).
    """
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    for path in sorted(staging.rglob("*")):
        if not path.is_file() or path.relative_to(staging).parts[0] not in splits or "tfrecord" not in path.name:
            continue
        compression = compression_for(path)
        check_record_frames(str(path))
        records = list(tf.data.TFRecordDataset(str(path), compression_type=compression).as_numpy_iterator())
        options = tf.io.TFRecordOptions(compression_type=compression)
        with tf.io.TFRecordWriter(str(path), options) as writer:
            for record in records:
                example = tf.train.Example.FromString(record)
                feature = example.features.feature
                if relabel:
                    labels = feature[LABEL_KEY].int64_list.value
                    labels[:] = [relabel.get(label, label) for label in labels]
                    # A labeller's bug writes wrong labels, not a class name that contradicts them: without the
                    # names the span passes the validator's class check and only the drift checks can see it.
                    for key in (TEXT_KEY, SYNSET_KEY):
                        if key in feature:
                            del feature[key]
                if brighten or scale != 1.0:
                    images = feature[IMAGE_KEY].bytes_list.value
                    images[:] = [damage_image(image, brighten, scale) for image in images]
                if noise and rng.random() < noise:
                    images = feature[IMAGE_KEY].bytes_list.value
                    images[:] = [noise_image(image, rng) for image in images]
                writer.write(example.SerializeToString())
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
