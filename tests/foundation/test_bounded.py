"""Reads from outside with a size cap (`foundation.bounded`, issue 35 class 3), and text from outside shown with its
control characters escaped (`foundation.shown_text`, class 8)."""

from __future__ import annotations

import io
import os
import tracemalloc
from pathlib import Path

import pytest
import urllib3
from http_double import streaming

from foundation.bounded import TooLargeError, cap_pool, read_capped, read_file, size_text, tail_lines
from foundation.redirects import guard_pool
from foundation.shown_text import escape_controls


def test_read_capped_reads_one_byte_past_the_cap_and_no_further() -> None:
    stream = io.BytesIO(b"x" * 10_000)
    with pytest.raises(TooLargeError, match="answer of x is larger than 100 bytes, the most tfxp reads of it"):
        read_capped(stream.read, 100, lambda: TooLargeError("answer of x", 100, "ask less"))
    assert stream.tell() == 101
    assert read_capped(io.BytesIO(b"y" * 100).read, 100, lambda: AssertionError()) == b"y" * 100


def test_a_file_past_its_cap_is_refused_by_size_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "release.json"
    with big.open("wb") as handle:
        handle.truncate(256 * 1024 * 1024)  # sparse: no disk, but 256 MiB to whoever reads it whole
    tracemalloc.start()
    try:
        with pytest.raises(TooLargeError, match=r"release record .* is larger than 1 MiB.*; restore it"):
            read_file(big, 1 << 20, f"release record {big}", "restore it")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_head_check_refuses_a_file_of_another_format_after_its_first_bytes(tmp_path: Path) -> None:
    path = tmp_path / "model.tflite"
    path.write_bytes(b"PK\x03\x04" + b"z" * 100_000)
    seen: list[bytes] = []

    def check(first: bytes) -> None:
        seen.append(first)
        raise ValueError("not a model")

    with pytest.raises(ValueError, match="not a model"):
        read_file(path, 1 << 30, "model", "fix", head=(8, check))
    assert seen == [b"PK\x03\x04zzzz"]


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "labels.txt"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        read_file(fifo, 100, "label map", "fix")


def test_tail_lines_reads_the_end_of_a_log_only(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    with log.open("wb") as handle:
        handle.truncate(512 * 1024 * 1024)
        handle.seek(0, os.SEEK_END)
        handle.write(b"\nfirst\nsecond\nlast line\n")
    tracemalloc.start()
    try:
        assert tail_lines(log, 2) == ["second", "last line"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_cap_pool_stops_reading_a_huge_answer_at_the_cap() -> None:
    offered = 256 * 1024 * 1024
    with streaming(offered) as (url, streamed):
        pool = cap_pool(guard_pool(urllib3.PoolManager()), 1 << 20, lambda method, url: TooLargeError(url, 1, "x"))
        with pytest.raises(TooLargeError):
            pool.request("GET", f"{url}/apis/v2beta1/runs")
    assert streamed.sent < 32 * 1024 * 1024  # the cap plus what the sockets held, not the 256 MiB offered
    with streaming(1000) as (url, _):
        answer = pool.request("GET", url)
    assert answer.status == 200 and answer.data == b"{" + b" " * 999


def test_size_text_names_caps_as_people_read_them() -> None:
    assert [size_text(n) for n in (64 << 20, 64 << 10, 2**31 - 1, 100)] == ["64 MiB", "64 KiB", "2 GiB", "100 bytes"]


def test_control_characters_are_escaped_and_other_unicode_kept() -> None:
    assert escape_controls("a\x1b[2Jb\rc\x07d\x9be\u202ef") == "a\\x1b[2Jb\\rc\\x07d\\x9be\\u202ef"
    assert escape_controls("Zürich 東京 🙂\n\ttab") == "Zürich 東京 🙂\n\ttab"


def test_cap_pool_caps_an_error_answer_to_a_streamed_request_and_leaves_a_2xx_to_the_caller() -> None:
    """The kubernetes and KFP clients read an error answer whole into their exception, streamed request or not."""
    pool = cap_pool(urllib3.PoolManager(), 1 << 20, lambda method, url: TooLargeError(url, 1, "x"))
    with streaming(256 * 1024 * 1024, status=500) as (url, streamed), pytest.raises(TooLargeError):
        pool.request("DELETE", url, preload_content=False)
    assert streamed.sent < 32 * 1024 * 1024
    with streaming(3 << 20) as (url, _):
        answer = pool.request("GET", url, preload_content=False)
        assert len(answer.read(2 << 20)) == 2 << 20  # not read here: the caller reads it with its own cap
        answer.release_conn()
