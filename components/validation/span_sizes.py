"""How many examples each span a run reads holds, and the rule that each of its splits holds `data.min_span_examples`.

ImportExampleGen merges the spans a run reads into one Examples artifact, so StatisticsGen's counts are per split over
every span: a span that arrived empty (a writer that failed half-way, a filter that kept nothing) or with a handful of
records vanishes among the others. With `data.spans: all` the run would train as if it had not arrived; with
`latest`, the message would name a split, not the span. So the ExampleValidator counts the records of each split of
each span in the span folders the ExampleGen read (its Examples artifact's `input_base` and `spans`), reading the
record framing only, and stops the run before the Trainer when a split holds fewer than `data.min_span_examples`
(1 by default: no empty span; 0 turns the check off), naming the span, its counts and the key.

Example:
    counts = count_span_examples("data/stream", [1, 2], {"train": "span-*/train/*", "eval": "span-*/eval/*"})
    problems = span_size_problems(counts, 1)  # ["span 2 (data/stream/span-2) holds train 0, eval 40 examples: ..."]
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import tensorflow as tf

from components.data.fingerprint import list_span_folders
from components.validation.span_statistics import span_split_files
from foundation.bounded import parse_json
from foundation.data.spans import inside_span
from foundation.data.tfrecords import compression_for

MIN_SPAN_EXAMPLES_KEY = "data.min_span_examples"
SMALL_SPAN_HINT = (
    "write the span again or remove its folder (`tfxp data inspect DIR` counts the examples of each span), or, if "
    f"spans this small are meant, lower {MIN_SPAN_EXAMPLES_KEY} (0 = no check)"
)


@dataclass(frozen=True)
class SpanSizeCheck:
    """What the ExampleValidator's span-size check needs, from the config (one JSON execution property).

    Attributes:
        min_examples: `data.min_span_examples`: the fewest records each split of each span must hold.
        split_patterns: ImportExampleGen's split patterns (`span-*/train/*`); the part after `span-*/` is counted
            inside each span folder.
    """

    min_examples: int
    split_patterns: dict[str, str]

    def to_json(self) -> str:
        # The splits in the run's order (train first): messages list them so.
        return json.dumps({"min_examples": self.min_examples, "split_patterns": self.split_patterns})

    @classmethod
    def from_json(cls, text: str) -> SpanSizeCheck:
        values = parse_json(text)
        return cls(int(values["min_examples"]), dict(values["split_patterns"]))


@dataclass(frozen=True)
class SpanCount:
    """The records of one span, per split.

    Attributes:
        span: The span number.
        folder: The span folder (under `data.path`).
        splits: Split name → records in the span's files of that split.
    """

    span: int
    folder: str
    splits: Mapping[str, int]


def count_records(paths: Sequence[str]) -> int:
    """Records in TFRecord files (compression from each file name), without parsing them."""
    total = 0
    for path in paths:
        dataset = tf.data.TFRecordDataset(path, compression_type=compression_for(path))
        total += int(dataset.reduce(tf.constant(0, tf.int64), lambda count, _record: count + 1))
    return total


def count_span_examples(input_base: str, spans: Sequence[int], split_patterns: Mapping[str, str]) -> list[SpanCount]:
    """The records of each split of each of `spans` under `input_base`, by the split patterns of the run.

    Spans whose folder is gone are left out (the ExampleGen, which read them, reports that).
    """
    folders = list_span_folders(input_base)
    patterns = {split: inside_span(pattern) for split, pattern in split_patterns.items()}
    counts = []
    for span in sorted(spans):
        if span not in folders:
            continue
        files = span_split_files(input_base, folders[span], span, patterns)
        counts.append(
            SpanCount(
                span,
                posixpath.join(input_base, folders[span]),
                {split: count_records(paths) for split, paths in files.splits.items()},
            )
        )
    return counts


def span_size_problems(counts: Sequence[SpanCount], minimum: int) -> list[str]:
    """One line for each span with a split of fewer than `minimum` records, naming the span, its counts and the key.

    Example:
        span_size_problems([SpanCount(2, "data/span-2", {"train": 0, "eval": 4})], 1)
        # ["span 2 (data/span-2) holds train 0, eval 4 examples: split 'train' below data.min_span_examples = 1; ..."]
    """
    problems = []
    for count in counts:
        short = [split for split, records in count.splits.items() if records < minimum]
        if not short:
            continue
        held = ", ".join(f"{split} {records}" for split, records in count.splits.items())
        splits = ", ".join(f"'{split}'" for split in short)
        problems.append(
            f"span {count.span} ({count.folder}) holds {held} examples: split{'s' if len(short) > 1 else ''} "
            f"{splits} below {MIN_SPAN_EXAMPLES_KEY} = {minimum}; {SMALL_SPAN_HINT}"
        )
    return problems


def check_span_sizes(check: SpanSizeCheck, input_base: str, spans: Sequence[int]) -> list[str]:
    """`span_size_problems` of the spans a run read; [] when the check is off or the run read no spans."""
    if check.min_examples <= 0 or not spans or not input_base:
        return []
    return span_size_problems(count_span_examples(input_base, spans, check.split_patterns), check.min_examples)
