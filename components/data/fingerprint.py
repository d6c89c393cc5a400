"""The fingerprint of the data a run reads: the files the selected spans hold (names, sizes, modification times).

One rule for "has the data changed?", local or on a bucket (through `tf.io.gfile`, whose `mtime_nsec` is the
object's update time on `gs://`): a new span, a file added, rewritten or removed changes it; a rerun over the
same files does not. On Kubeflow it keys KFP's cache for ImportExampleGen (`components.kfp.fingerprint_task`);
KFP's own cache key sees only `data.path`, never the files under it (kubeflow/pipelines
`backend/src/v2/cacheutils/cache.go:173-229`).

Example:
    data_fingerprint("gs://bucket/digits", ["span-*/train/*", "span-*/eval/*"], "all")
    # 'spans 1,2,3: 6 files, 301234 bytes, sha256 5f0c1d2e9a8b7c6d'
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from foundation.data.spans import (
    NO_SPANS,
    SpanError,
    find_spans,
    format_spans,
    inside_span,
    parse_policy,
    parse_spans,
    select_spans,
)

SPANS_PREFIX = "spans "


def fingerprinted_spans(fingerprint: str) -> str:
    """The spans a fingerprint was taken of (`3,4` of `spans 3,4: 4 files, ...`); "" for data without spans.

    ImportExampleGen on Kubeflow reads these (`components.kfp.entrypoint`), so it reads what the InputFingerprint
    task fingerprinted even when a span arrives between the two tasks.
    """
    if not fingerprint.startswith(SPANS_PREFIX):
        return ""
    return format_spans(parse_spans(fingerprint[len(SPANS_PREFIX) :].partition(":")[0]))


@dataclass(frozen=True)
class DataFiles:
    """The files a run reads.

    Attributes:
        spans: The selected spans; empty for data without span folders.
        files: (path, size in bytes, modification time in ns) of every file, sorted by path.
    """

    spans: tuple[int, ...]
    files: tuple[tuple[str, int, int], ...]

    def fingerprint(self) -> str:
        """`spans 3,4: 4 files, 1234 bytes, sha256 <16 hex>` (no `spans` part without span folders)."""
        digest = hashlib.sha256()
        for path, size, mtime in self.files:
            digest.update(f"{path}\0{size}\0{mtime}\n".encode())
        spans = f"{SPANS_PREFIX}{format_spans(self.spans)}: " if self.spans else ""
        total = sum(size for _, size, _ in self.files)
        return f"{spans}{len(self.files)} files, {total} bytes, sha256 {digest.hexdigest()[:16]}"


def _gfile():  # type: ignore[no-untyped-def]
    import tensorflow as tf

    return tf.io.gfile


def list_span_folders(input_base: str) -> dict[int, str]:
    """Span number → folder name of the span folders directly under `input_base` (none when it is no folder)."""
    gfile = _gfile()
    names = [name.rstrip("/") for name in gfile.listdir(input_base)] if gfile.isdir(input_base) else []
    return find_spans(name for name in names if gfile.isdir(posixpath.join(input_base, name)))


def incomplete_span_error(span_folder: str, pattern: str) -> SpanError:
    """The error for a selected span folder with no files matching `pattern` (a split pattern inside the span)."""
    return SpanError(
        f"span folder {span_folder} has no files matching {pattern}; every span the run reads must hold the same "
        "layout (or remove the incomplete span folder)"
    )


def selected_patterns(
    input_base: str, split_patterns: Sequence[str], spans_policy: str | int
) -> tuple[list[int], list[str]]:
    """The spans `spans_policy` selects under `input_base` and the file globs a run reads there.

    Args:
        input_base: `data.path`.
        split_patterns: ImportExampleGen's split patterns, relative to `input_base` (`span-*/train/*` with spans).
        spans_policy: `data.spans` (`none`, `latest`, `all` or N).

    Raises:
        foundation.data.spans.SpanError: the policy selects no span, or is malformed.
    """
    policy = parse_policy(spans_policy)
    if policy == NO_SPANS:
        return [], [posixpath.join(input_base, pattern) for pattern in split_patterns]
    folders = list_span_folders(input_base)
    spans = select_spans(folders, policy)
    patterns: list[str] = []
    for pattern in split_patterns:
        patterns.extend(posixpath.join(input_base, folders[span], inside_span(pattern)) for span in spans)
    return spans, patterns


def data_files(input_base: str, split_patterns: Sequence[str], spans_policy: str | int) -> DataFiles:
    """The files the run reads (see `selected_patterns`), with their sizes and modification times.

    Raises:
        FileNotFoundError: `input_base` is not a folder.
        foundation.data.spans.SpanError: see `selected_patterns`.
    """
    gfile = _gfile()
    if not gfile.isdir(input_base):
        raise FileNotFoundError(f"{input_base} is not a folder (data.path)")
    spans, patterns = selected_patterns(input_base, split_patterns, spans_policy)
    found = {}
    for pattern in patterns:
        matched = gfile.glob(pattern)
        if spans and not matched:
            # What ImportExampleGen would find only after the cluster started its pods (components.example_gen).
            raise incomplete_span_error(posixpath.dirname(pattern), posixpath.basename(pattern))
        for path in matched:
            if not gfile.isdir(path):
                stat = gfile.stat(path)
                found[path] = (path, int(stat.length), int(stat.mtime_nsec))
    return DataFiles(spans=tuple(spans), files=tuple(found[path] for path in sorted(found)))


def data_fingerprint(input_base: str, split_patterns: Sequence[str], spans_policy: str | int) -> str:
    """`DataFiles.fingerprint` of what a run reads under `input_base`."""
    return data_files(input_base, split_patterns, spans_policy).fingerprint()
