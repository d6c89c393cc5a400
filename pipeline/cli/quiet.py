"""A quiet terminal: what TensorFlow, absl, XLA, LiteRT, TFX and Beam print goes to a log file, not the terminal.

While a command runs (the root group enters `command_output` around it), file descriptors 1 and 2 point at a log
file, so C++ logs (TensorFlow's `I0000 … port.cc:153] oneDNN …`, XLA, LiteRT's XNNPACK line), Python warnings and
every logging handler that writes to `sys.stderr` land there, whenever they were set up. What the command says
stays on the terminal: `sys.stdout` (the console, Typer's output and Keras's per-epoch lines with the step time)
and the error console write to copies of the terminal's descriptors.

`tfxp -v` turns this off: everything shows, as it would without tfxp.

Each command logs to a temp file, `<tmp>/tfxp-logs/<command>-<time>-<pid>.log`, kept and named on the terminal
when the command fails and removed when it succeeds; `use_log_file` moves the rest of a command's output to a
log of its own (`tfxp run`: `OUT/<pipeline>/logs/run-<time>.log`), which is always kept.

Example:
    with command_output("edge"):
        import tensorflow  # its C++ start-up lines go to the log
        console.print("converted")  # on the terminal
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from typer import Exit

from pipeline.cli.console import error_console

LOG_DIR_NAME = "tfxp-logs"


@dataclass
class _Redirect:
    """The state of one redirected command.

    Attributes:
        log_path: Where fds 1 and 2 write now.
        keep: Keep the log after success (a log of the command's own, not a temp file).
        saved_fds: The terminal's fds 1 and 2, restored at the end.
        terminal_out: What `sys.stdout` was (or a copy of its fd when that was fd 1).
        terminal_err: The same for `sys.stderr`; the error console writes here.
        opened: The streams this module opened on copies of the terminal's fds (closed at the end).
    """

    log_path: Path
    keep: bool
    saved_fds: tuple[int, int]
    terminal_out: IO[str]
    terminal_err: IO[str]
    opened: list[IO[str]]


_verbose = False
_active: _Redirect | None = None


def set_verbose(verbose: bool) -> None:
    """`tfxp -v`: no redirection, everything on the terminal."""
    global _verbose
    _verbose = verbose


def is_verbose() -> bool:
    """Whether `tfxp -v` was given."""
    return _verbose


def temp_log_path(command: str) -> Path:
    """`<tmp>/tfxp-logs/<command>-<YYYYmmdd-HHMMSS>-<pid>.log` (the directory is created)."""
    directory = Path(tempfile.gettempdir()) / LOG_DIR_NAME
    directory.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in command) or "tfxp"
    return directory / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()


def _terminal_stream(stream: IO[str], fd: int, opened: list[IO[str]]) -> IO[str]:
    """Where our messages go while `fd` writes to the log: a copy of `fd` when `stream` writes to it, else `stream`
    itself (a test runner's capture, which does not write to a file descriptor)."""
    try:
        writes_to_fd = stream.fileno() == fd
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        writes_to_fd = False
    if not writes_to_fd:
        return stream
    copy = os.fdopen(
        os.dup(fd), "w", buffering=1, encoding=getattr(stream, "encoding", None) or "utf-8", errors="replace"
    )
    opened.append(copy)
    return copy


def _open_log(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def _failed(error: BaseException | None) -> bool:
    """Whether the command failed: an exception other than a zero exit."""
    if error is None:
        return False
    code = getattr(error, "exit_code", getattr(error, "code", 1))  # typer.Exit / SystemExit
    if isinstance(error, (Exit, SystemExit)):
        return code not in (0, None)
    return True


@contextlib.contextmanager
def command_output(command: str) -> Iterator[None]:
    """Runs a command with fds 1 and 2 on a log file and our messages on the terminal (see the module doc).

    Does nothing with `tfxp -v`, or when already inside (a nested call keeps the outer log).

    Args:
        command: Names the temp log, e.g. `edge`.
    """
    global _active
    if _verbose or _active is not None:
        yield
        return
    log_path = temp_log_path(command)
    log_fd = _open_log(log_path)
    _flush()
    opened: list[IO[str]] = []
    terminal_out = _terminal_stream(sys.stdout, 1, opened)
    terminal_err = _terminal_stream(sys.stderr, 2, opened)
    redirect = _Redirect(log_path, False, (os.dup(1), os.dup(2)), terminal_out, terminal_err, opened)
    previous_stdout = sys.stdout
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = terminal_out  # type: ignore[assignment]
    error_console.file = terminal_err
    _active = redirect
    error: BaseException | None = None
    try:
        yield
    except BaseException as raised:
        error = raised
        raise
    finally:
        _flush()
        _active = None
        os.dup2(redirect.saved_fds[0], 1)
        os.dup2(redirect.saved_fds[1], 2)
        for fd in redirect.saved_fds:
            os.close(fd)
        sys.stdout = previous_stdout
        error_console.file = None  # type: ignore[assignment]  # back to sys.stderr, whatever it is then
        for stream in opened:
            with contextlib.suppress(OSError):
                stream.close()
        _finish(redirect, _failed(error))


def _finish(redirect: _Redirect, failed: bool) -> None:
    path = redirect.log_path
    empty = not path.exists() or path.stat().st_size == 0
    if failed and not empty:
        error_console.print(f"full log: {path}", style="dim", highlight=False, markup=False, soft_wrap=True)
    elif not redirect.keep:
        with contextlib.suppress(OSError):
            path.unlink()


def use_log_file(path: Path) -> Path | None:
    """Sends the rest of the command's output to `path` (appended to, and kept), instead of the temp log.

    What the temp log holds so far is copied to `path` first. Does nothing outside `command_output` or with
    `tfxp -v`.

    Args:
        path: The command's own log, e.g. the run's `OUT/<pipeline>/logs/run-<time>.log`.

    Returns:
        `path` when output now goes there, else None.
    """
    if _active is None:
        return None
    _flush()
    log_fd = _open_log(path)
    previous = _active.log_path
    if previous != path and previous.exists():
        os.write(log_fd, previous.read_bytes())
        previous.unlink()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    _active.log_path = path
    _active.keep = True
    return path


def keep_log() -> Path | None:
    """Keeps the command's log after it ends, also on success (a long-running command that names it).

    Returns:
        The log file, or None outside `command_output` or with `tfxp -v`.
    """
    if _active is None:
        return None
    _active.keep = True
    return _active.log_path
