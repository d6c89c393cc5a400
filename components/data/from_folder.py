"""Converting a class-per-subfolder image tree into the tfxp TFRecord format.

    SRC/cat/001.jpg  SRC/cat/002.PNG  SRC/dog/...   →   OUT/train, OUT/eval, OUT/labels.txt

Class names are the subfolder names, sorted; label i is the i-th name. Every visible file at any
depth inside a class folder is considered, by its content (not its name): images in a format the
model accepts (JPEG, PNG, GIF, BMP, WebP; any size and mode) are fully decoded in parallel to catch
truncated files and stored with their original bytes, or re-encoded where `images.check_image` says
so (CMYK, GIF, BMP, WebP, EXIF-rotated); every other file is skipped and listed with its reason, or,
with `strict`, fails the conversion.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import NamedTuple

from components.data.dataset import DatasetSummary, Record, check_eval_fraction, check_output, write_dataset
from components.data.images import IMAGE_SUFFIXES, ImageCheck, check_image
from components.data.span_writer import check_span_labels, check_span_root, prepare_span
from foundation.contract import class_name_problem
from foundation.data.errors import DataError
from foundation.data.spans import span_dir_name
from foundation.shown_text import escape_controls

MAX_LISTED = 10


def _thread_pool(workers: int) -> Executor:
    return ThreadPoolExecutor(max_workers=workers)


def _process_pool(workers: int) -> Executor:
    # spawn, not fork: the parent may already run TensorFlow threads, which fork does not copy safely.
    return ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))


# Pillow decodes with the GIL released, so threads parallelise the checks without the start-up and
# pickling costs of processes. Measured on the 2-core dev host (busy, load ~5), 1,200 JPEGs of 400x300
# (58 MiB), median of 5 interleaved runs: checks serial 2.9 s, 2 threads 2.6 s, 2 spawned processes
# 4.8 s; whole conversion with 2 workers: threads 7.7 s, processes 11.0 s (1 worker: 9.2 s).
EXECUTORS: dict[str, Callable[[int], Executor]] = {"thread": _thread_pool, "process": _process_pool}


def _visible(path: Path) -> bool:
    return not path.name.startswith(".")


def scan_folder(src: Path) -> tuple[list[str], list[tuple[Path, int]]]:
    """Finds the classes and every visible file in them (what is an image is decided by `check_images`).

    Returns:
        (class names sorted, [(file path, label)] sorted by path within each class).

    Raises:
        DataError: `src` is missing or empty, has fewer than two class folders, a class folder's name holds a
            control character, or a class folder holds no file at all.
    """
    if not src.is_dir():
        raise DataError(f"source folder {src} does not exist or is not a directory; pass SRC/<class>/<images>")
    class_dirs = sorted(path for path in src.iterdir() if path.is_dir() and _visible(path))
    if not class_dirs:
        loose = [path.name for path in src.iterdir() if path.suffix.lower() in IMAGE_SUFFIXES]
        where = f"it has {len(loose)} images but no class subfolders" if loose else "it is empty"
        raise DataError(
            f"source folder {src} has no class folders ({where}); expected one subfolder per class with images "
            f"(JPEG, PNG, GIF, BMP or WebP) in it, e.g. {src}/cat/001.jpg and {src}/dog/001.jpg"
        )
    if len(class_dirs) == 1:
        raise DataError(
            f"source folder {src} has one class folder ({class_dirs[0].name}); a classifier needs at least two "
            "classes: add one subfolder per class"
        )
    for class_dir in class_dirs:  # before any image is read: the folder's name becomes the class name
        problem = class_name_problem(class_dir.name)
        if problem:
            raise DataError(
                f"class folder {escape_controls(str(class_dir))} cannot name a class: its name {problem}; rename "
                "the folder (its name goes into labels.txt, the model and every answer that names the class)"
            )
    files: list[tuple[Path, int]] = []
    empty = []
    for label, class_dir in enumerate(class_dirs):
        found = sorted(
            path
            for path in class_dir.rglob("*")
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(class_dir).parts)
        )
        if not found:
            empty.append(class_dir.name)
        files.extend((path, label) for path in found)
    if empty:
        raise DataError(
            f"class folders without any files in {src}: {', '.join(empty)}; add images or remove these folders"
        )
    return [path.name for path in class_dirs], files


def check_images(paths: list[Path], workers: int, executor: str = "thread") -> list[ImageCheck]:
    """Checks every image in parallel (see `images.check_image`), in input order."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r} is not one of: {', '.join(EXECUTORS)}")
    names = [str(path) for path in paths]
    if workers <= 1 or len(names) < 2:
        return [check_image(name) for name in names]
    with EXECUTORS[executor](workers) as pool:
        return list(pool.map(check_image, names, chunksize=max(1, min(256, len(names) // (workers * 8)))))


def convert_folder(
    src: Path,
    out: Path,
    *,
    eval_fraction: float = 0.2,
    shards: int | None = None,
    overwrite: bool = False,
    skip_bad: bool = False,
    strict: bool = False,
    workers: int | None = None,
    seed: int = 0,
    executor: str = "thread",
    span: int | None = None,
) -> DatasetSummary:
    """Converts SRC/<class>/<image> into DIR/train, DIR/eval (GZIP TFRecords) and DIR/labels.txt.

    Args:
        src: The image tree; subfolder names are the class names.
        out: Output directory; new or empty unless `overwrite` (which replaces only a data set `tfxp data` wrote
            there earlier). Must not lie inside `src`.
        eval_fraction: Share of each class that goes to eval (deterministic per class).
        shards: TFRecord files per split; None = about 128 MiB each.
        overwrite: Replace an earlier `tfxp data` output in `out`.
        skip_bad: Leave unreadable or truncated images out (listed in the summary) instead of failing.
        strict: Fail on any file that is not an image the model accepts, instead of skipping (and listing) it.
        workers: Parallel image checks and shard writers; None = one per CPU.
        seed: Split and order seed.
        executor: `thread` or `process` pool for the image checks.
        span: Write `out/span-N` (train/, eval/) beside `out/labels.txt` instead of a data set without spans;
            the classes must match that label map when it exists (`components.data.span_writer`).

    Returns:
        Counts per split and class, shard counts, skipped and re-encoded files.

    Raises:
        DataError: empty source, one class, a class without images, unreadable images (unless `skip_bad`), files
            that are not accepted images (with `strict`), a bad `out`, or a bad `eval_fraction`.

    Example:
        convert_folder(Path("flowers"), Path("data/flowers"), eval_fraction=0.1)
    """
    _check_arguments(src, out, eval_fraction, overwrite, span)  # fail before the expensive part
    workers = workers or os.cpu_count() or 1
    source = _read_source(src, out, span, workers, executor, skip_bad=skip_bad, strict=strict)
    return write_dataset(
        out if span is None else prepare_span(out, span, source.label_names, overwrite),
        source.records,
        source.label_names,
        eval_fraction=eval_fraction,
        shards=shards,
        overwrite=overwrite,
        seed=seed,
        workers=workers,
        provenance={"source": str(src.resolve()), **({"span": span} if span is not None else {})},
        skipped=source.skipped,
        reencoded=source.reencoded,
        write_labels=span is None,
    )


def _check_arguments(src: Path, out: Path, eval_fraction: float, overwrite: bool, span: int | None) -> None:
    """Raises DataError for a bad `eval_fraction`, an `out` inside `src`, or an `out` (or span folder) that
    `write_dataset` would refuse: checked before the images are."""
    check_eval_fraction(eval_fraction)
    src_resolved, out_resolved = src.resolve(), out.resolve()
    if out_resolved == src_resolved or src_resolved in out_resolved.parents:
        raise DataError(
            f"--out {out} lies inside the source folder {src}; its train/ and eval/ would be read as classes "
            "next time: choose an output directory outside SRC"
        )
    if span is None:
        check_output(out, overwrite)
    else:
        check_span_root(out)
        check_output(out / span_dir_name(span), overwrite)


class _Source(NamedTuple):
    """The examples read from a source folder (`_read_source`)."""

    label_names: list[str]
    records: list[Record]
    skipped: list[tuple[str, str]]
    reencoded: list[str]


def _read_source(
    src: Path, out: Path, span: int | None, workers: int, executor: str, *, skip_bad: bool, strict: bool
) -> _Source:
    """The classes of `src` and the records of its images, checked (`check_images`, `sort_checks`).

    Raises:
        DataError: see `scan_folder` and `sort_checks`; classes that do not match the span's label map, or a
            class left without images once the bad files are skipped.
    """
    label_names, files = scan_folder(src)
    if span is not None:
        check_span_labels(out, label_names)
    checks = check_images([path for path, _ in files], workers, executor)
    records, skipped, reencoded = sort_checks(src, files, checks, skip_bad=skip_bad, strict=strict)
    left = {record.label for record in records}
    emptied = [name for label, name in enumerate(label_names) if label not in left]
    if emptied:
        raise DataError(
            f"after skipping files, these classes in {src} have no images left: {', '.join(emptied)}; skipped: "
            f"{_listing([(path, reason) for path, reason in skipped if path.split('/')[0] in emptied])}"
        )
    return _Source(label_names, records, skipped, reencoded)


def _listing(items: list[tuple[str, str]]) -> str:
    listing = "; ".join(f"{path} ({reason})" for path, reason in items[:MAX_LISTED])
    return listing + (f"; and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def sort_checks(
    src: Path, files: list[tuple[Path, int]], checks: list[ImageCheck], *, skip_bad: bool, strict: bool
) -> tuple[list[Record], list[tuple[str, str]], list[str]]:
    """Turns the checks of `files` into the records to write, the skipped files and the re-encoded ones.

    Returns:
        (records in file order, [(file relative to `src`, why it is skipped)], ["file (what it was)"]).

    Raises:
        DataError: unreadable images without `skip_bad`; with `strict`, files that are not accepted images
            (or `skip_bad` at the same time).
    """
    if strict and skip_bad:
        raise DataError("--strict fails on any file it would skip, --skip-bad skips unreadable ones: pass one of them")

    def relative(check: ImageCheck) -> str:
        return Path(check.path).relative_to(src).as_posix()

    unsupported = [(relative(check), check.unsupported) for check in checks if check.unsupported is not None]
    if unsupported and strict:
        raise DataError(
            f"--strict: {len(unsupported)} of {len(files)} files in {src} are not images the model accepts: "
            f"{_listing(unsupported)}. Remove or convert them, or drop --strict to skip and list them"
        )
    bad = [(relative(check), check.error) for check in checks if check.error is not None]
    if bad and not skip_bad:
        raise DataError(
            f"{len(bad)} of {len(files) - len(unsupported)} images in {src} cannot be decoded: {_listing(bad)}. "
            "Fix or remove them, or pass --skip-bad to leave them out"
        )
    records = [
        Record(label, encoded=check.reencoded) if check.reencoded is not None else Record(label, path=path)
        for (path, label), check in zip(files, checks, strict=True)
        if check.error is None and check.unsupported is None
    ]
    skipped = [(relative(check), reason) for check in checks if (reason := check.unsupported or check.error)]
    reencoded = [f"{relative(check)} ({check.original})" for check in checks if check.reencoded is not None]
    return records, skipped, reencoded
