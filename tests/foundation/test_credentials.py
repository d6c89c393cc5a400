"""Credentials as tfxp reads them (`foundation.credentials`): checked before use and never shown; token files read
without blocking, with a size bound and a deadline."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from foundation.credentials import (
    BEARER_TOKEN,
    MAX_SECRET_FILE_BYTES,
    CredentialError,
    CredentialFileMissingError,
    check_header_value,
    read_secret_file,
)

SECRET = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0"


def _read(path: Path, **options: float) -> str:
    return read_secret_file(path, f"TOKEN_PATH={path}", "point it at the token", **options)


def test_a_fifo_is_refused_at_once_even_when_a_writer_never_comes(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(CredentialError, match=r"TOKEN_PATH=.*fifo is not a regular file; point it at the token"):
        _read(fifo)
    assert time.monotonic() - started < 1


def test_the_file_opened_is_checked_not_the_path_looked_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A path looked at with stat() and then opened may have become a FIFO in between: the opened file is checked.
    regular = tmp_path / "regular"
    regular.write_text(SECRET)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    looks_regular = os.stat(regular)
    monkeypatch.setattr(os, "stat", lambda *args, **kwargs: looks_regular)
    monkeypatch.setattr(Path, "stat", lambda *args, **kwargs: looks_regular)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            _read(fifo)
        except BaseException as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(2)
    blocked = reader.is_alive()
    if blocked:  # opening the FIFO waits for a writer: be one, so the test ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert not blocked, "the read blocked on the FIFO"
    assert len(outcome) == 1 and isinstance(outcome[0], CredentialError)
    assert "is not a regular file" in str(outcome[0])


def test_a_device_and_a_directory_are_refused(tmp_path: Path) -> None:
    for path in (Path("/dev/zero"), tmp_path):
        with pytest.raises(CredentialError, match="is not a regular file"):
            _read(path)


def test_a_file_larger_than_a_token_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"a" * (MAX_SECRET_FILE_BYTES + 1))
    with pytest.raises(CredentialError, match=r"TOKEN_PATH=.*big is larger than a token \(64 KiB at most\); point it"):
        _read(big)


def test_a_slow_file_fails_within_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text(SECRET)
    stalled = threading.Event()
    real_fstat = os.fstat

    def fstat(fd: int) -> os.stat_result:
        stalled.wait(5)  # a file system that does not answer
        return real_fstat(fd)

    monkeypatch.setattr(os, "fstat", fstat)
    started = time.monotonic()
    with pytest.raises(CredentialError, match=r"could not be read within 0.3 s"):
        _read(token, deadline=0.3)
    assert time.monotonic() - started < 2
    stalled.set()


def test_a_missing_file_and_text_that_is_not_ascii(tmp_path: Path) -> None:
    with pytest.raises(CredentialFileMissingError, match="is not a readable file"):
        _read(tmp_path / "missing")
    odd = tmp_path / "odd"
    odd.write_bytes(b"\xff\xfe token")
    with pytest.raises(CredentialError, match="is not ASCII text, so not a token") as raised:
        _read(odd)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_a_token_file_is_read_stripped(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(f"  {SECRET}\n")
    assert _read(token) == SECRET


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (SECRET + "\nX-Injected: 1", "a line break at position 30 of 43"),
        (SECRET + "\r", "a line break at position 30 of 30"),
        (SECRET[:10] + " " + SECRET[10:], "a space at position 11"),
        (SECRET + "\x00", "character U+0000"),
        (SECRET + "\u00e9", "character U+00E9"),
        ("", "is empty"),
    ],
)
def test_a_value_a_header_cannot_carry_is_refused_without_showing_it(value: str, said: str) -> None:
    with pytest.raises(CredentialError, match=re.escape(said)) as raised:
        check_header_value(value, "TFXP_KFP_TOKEN", BEARER_TOKEN)
    text = str(raised.value)
    assert text.startswith("TFXP_KFP_TOKEN ")
    assert SECRET not in text and SECRET[10:] not in text and SECRET[:10] not in text
    assert raised.value.__cause__ is None
