"""Every image a run reads, judged before training by the rules the model applies, and named when it fails them.

The Trainer checks each record's `image/encoded` in the graph (`foundation.image_checks`: format, pixels, JPEG
scans) and decodes it (`foundation.preprocessing.decode_pixels`); an image refused or not decodable ends training in
a raw "Graph execution error" that names no span, file or record, and a 42 MP PNG passed TFDV's format statistics.
So the ExampleValidator reads every record of each span the run reads (of `data.path` when it has no spans) and
stops the run naming the span, the file, the record and the reason:

- the model's own refusals (`foundation.image_formats.served_format_error` and `oversized_error` with
  `trainer.max_image_pixels`, the Python twins of the graph's checks), read from the bytes: nothing refused is
  decoded;
- then every other image decoded by the model's decoder in tf.data; the records missing from its output
  (`ignore_errors`) are those that do not decode (truncated, corrupt), each decoded once more alone for its error.

A file that passed is remembered under `<pipeline.output>/statistics/images/` by its name, size, time and the pixel
limit (`passed_key`), so a span is decoded once, not at every run (the Trainer decodes every image at every epoch;
this is one pass more, once).

Example:
    problems = check_span_images(ImageCheck(40_000_000, {"train": "span-*/train/*"}, "data"), "data", [1, 2])
    # ["span 2 (data/span-2), file data/span-2/train/a.gz, record 7: image of 7000x6000 pixels is over ..."]
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import tensorflow as tf

from components.data.fingerprint import list_span_folders
from foundation.bounded import parse_json
from foundation.contract import IMAGE_KEY
from foundation.data.record_frames import tf_error_text
from foundation.data.spans import inside_span
from foundation.data.tfrecords import compression_for
from foundation.image_formats import oversized_error, served_format_error
from foundation.png_stream import inflates_past_rows
from foundation.preprocessing import decode_pixels
from foundation.preprocessing_spec import PreprocessingSpec

MAX_REPORTED = 5  # records named per file, and files named in all
IMAGES_HINT = (
    "the Trainer would stop on these records: re-create them from image files (`tfxp data from-folder SRC --out "
    "DIR` checks each image), or remove them from the span; a larger image limit is trainer.max_image_pixels"
)
_BATCH = 256
_FEATURES = {IMAGE_KEY: tf.io.VarLenFeature(tf.string)}
_DECODE_SPEC = PreprocessingSpec(image_size=1, channels=3)
IMAGES_CACHE = "images"
# Bump when the rules change meaning (a new limit in `refusal`): files passed before are then read again.
RULES_VERSION = 2


@dataclass(frozen=True)
class ImageCheck:
    """What the ExampleValidator's image check needs, from the config (one JSON execution property).

    Attributes:
        max_pixels: `trainer.max_image_pixels`, the limit the model is exported with.
        split_patterns: ImportExampleGen's split patterns (`span-*/train/*`, or `train/*` without spans).
        input_base: `data.path`: where the files are when the run reads no spans.
        cache_dir: Where files that passed are remembered (`<pipeline.output>/statistics`); "" = nowhere.
    """

    max_pixels: int
    split_patterns: dict[str, str]
    input_base: str
    cache_dir: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "max_pixels": self.max_pixels,
                "split_patterns": self.split_patterns,
                "input_base": self.input_base,
                "cache_dir": self.cache_dir,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ImageCheck:
        values = parse_json(text)
        split_patterns, input_base = dict(values["split_patterns"]), str(values["input_base"])
        return cls(int(values["max_pixels"]), split_patterns, input_base, str(values.get("cache_dir", "")))


def passed_key(path: str, max_pixels: int) -> str:
    """The name under which a file that passed is remembered: its path, size and time, the limit, the rules."""
    stat = tf.io.gfile.stat(path)
    text = f"{path}|{stat.length}|{stat.mtime_nsec}|{max_pixels}|v{RULES_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def refusal(value: bytes, max_pixels: int) -> str | None:
    """Why the model refuses `value` before decoding it (format, pixels, scans, PNG data past its rows), or None."""
    return served_format_error(value) or oversized_error(value, max_pixels) or inflates_past_rows(value)


def _firsts(records: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    values = tf.io.parse_example(records, {IMAGE_KEY: tf.io.RaggedFeature(tf.string)})[IMAGE_KEY]
    return values.row_lengths() > 0, values.to_tensor(default_value=b"", shape=[None, 1])[:, 0]


def _images(path: str) -> Iterator[tuple[int, bytes | None]]:
    """(record index, its first `image/encoded` value, None when it has none) of a TFRecord file."""
    dataset = tf.data.TFRecordDataset(path, compression_type=compression_for(path)).batch(_BATCH).map(_firsts)
    index = 0
    for present, firsts in dataset.as_numpy_iterator():
        for has_image, value in zip(present, firsts, strict=True):
            yield index, bytes(value) if has_image else None
            index += 1


def _decoded(path: str, skip: Sequence[int]) -> set[int]:
    """The indices of the records of `path` whose image the model's decoder decodes (`skip`ped ones left out)."""
    skipped = tf.constant([*skip, -1], tf.int64)

    def image(index: tf.Tensor, record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return index, tf.io.parse_single_example(record, _FEATURES)[IMAGE_KEY].values

    def wanted(index: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
        return tf.logical_not(tf.reduce_any(tf.equal(index, skipped))) & (tf.size(values) > 0)

    dataset = tf.data.TFRecordDataset(path, compression_type=compression_for(path)).enumerate().map(image)
    # The shape is returned, not dropped: a decode whose result nothing uses is pruned from the graph.
    dataset = dataset.filter(wanted).map(
        lambda index, values: (index, tf.shape(decode_pixels(values[0], _DECODE_SPEC))),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return {int(index) for index, _ in dataset.ignore_errors().as_numpy_iterator()}


def _decode_error(value: bytes) -> str:
    try:
        decode_pixels(tf.constant(value), _DECODE_SPEC)
    except tf.errors.OpError as error:
        first = tf_error_text(error)  # without "{{function_node ...}}", "[Op:...]"
        return f"the image does not decode (truncated or corrupt: {first})"
    return "the image does not decode (truncated or corrupt)"


def file_problems(path: str, max_pixels: int) -> tuple[int, dict[int, str]]:
    """(records, record index → why the Trainer would stop on it) for one TFRecord file, read twice (thrice when
    images fail to decode, for their errors) rather than held in memory."""
    refused: dict[int, str] = {}
    accepted: list[int] = []
    records = 0
    for index, value in _images(path):
        records = index + 1
        if value is None:
            continue  # a record without an image is the schema's concern
        reason = refusal(value, max_pixels)
        if reason is None:
            accepted.append(index)
        else:
            refused[index] = reason
    failed = sorted(set(accepted) - _decoded(path, sorted(refused))) if accepted else []
    reasons = dict.fromkeys(failed, "the image does not decode (truncated or corrupt)")
    named = set(failed[:MAX_REPORTED])
    for index, value in _images(path) if named else ():
        if index in named and value is not None:
            reasons[index] = _decode_error(value)
    return records, dict(sorted({**refused, **reasons}.items()))


def _describe(where: str, path: str, records: int, problems: Mapping[int, str]) -> str:
    listed = "; ".join(f"record {index}: {reason}" for index, reason in list(problems.items())[:MAX_REPORTED])
    more = f"; {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
    return f"{where}file {path}: {len(problems)} of {records} images cannot be used ({listed}{more}); {IMAGES_HINT}"


def _files(check: ImageCheck, input_base: str, spans: Sequence[int]) -> Iterator[tuple[str, str]]:
    """(where, file): each file of each split, `where` naming its span (`span 2 (data/span-2), `) when spans."""
    patterns = check.split_patterns.values()
    if not spans:
        base = input_base or check.input_base
        for pattern in patterns:
            for path in sorted(tf.io.gfile.glob(posixpath.join(base, pattern))):
                if not tf.io.gfile.isdir(path):
                    yield "", path
        return
    folders = list_span_folders(input_base)
    for span in sorted(spans):
        if span not in folders:
            continue  # the ExampleGen, which read it, reports a span folder that is gone
        folder = posixpath.join(input_base, folders[span])
        for pattern in patterns:
            for path in sorted(tf.io.gfile.glob(posixpath.join(folder, inside_span(pattern)))):
                if not tf.io.gfile.isdir(path):
                    yield f"span {span} ({folder}), ", path


def check_span_images(check: ImageCheck, input_base: str, spans: Sequence[int]) -> list[str]:
    """One line per file holding images the Trainer would stop on, naming span, file, records and reasons.

    Args:
        check: The limits and the split patterns.
        input_base: Where the ExampleGen read its spans (its Examples artifact's `input_base`).
        spans: The spans it read; none = the files of `check.input_base` (`data.path`) without spans.
    """
    lines = []
    cache = posixpath.join(check.cache_dir, IMAGES_CACHE) if check.cache_dir else ""
    for where, path in _files(check, input_base, spans):
        passed = posixpath.join(cache, passed_key(path, check.max_pixels)) if cache else ""
        if passed and tf.io.gfile.exists(passed):
            continue
        records, problems = file_problems(path, check.max_pixels)
        if problems:
            lines.append(_describe(where, path, records, problems))
            if len(lines) >= MAX_REPORTED:
                break
        elif passed:
            tf.io.gfile.makedirs(cache)
            with tf.io.gfile.GFile(passed, "w") as marker:
                marker.write(f"{path}\n")
    return lines
