"""SIGTERM and SIGINT recorded, not raised: the one way tfxp turns a stop signal into cleanup.

Kubernetes (through Argo, for a Kubeflow task) stops a process with SIGTERM and SIGKILLs it after the pod's grace
period (30 s by default); a user stops one with Ctrl-C. A handler that raises (`SystemExit`, Python's default
`KeyboardInterrupt`) unwinds the main thread at whatever bytecode it was running — inside the `kubernetes`
client's urllib3 pool, a lock, a `with` block — and the cleanup's own calls can then block on what was left half
done (CPython's `signal` docs warn about this: handlers run between bytecodes of the main thread, and an
exception raised there can leave "resources in an inconsistent state"). Even `threading.Event.set` in a handler can
deadlock: the handler may run while the main thread holds that event's own lock, inside `Event.wait`.

So the handler here only stores the signal number and writes one byte to a pipe (`os.write` on a non-blocking
descriptor: nothing to hold, nothing to raise). The code that owns the cleanup looks at `requested` between its
steps, or waits with `wait(seconds)`, which `select` wakes as soon as the byte arrives, and stops on its normal path
(`raise_if_requested` raises `StopRequested` there, from ordinary code). Used by the TFJob client, the local worker
launcher, `tfxp serve` and `tfxp run-spec`.

Example:
    with StopRequest() as stop:
        while not done():
            if stop.wait(5.0):
                break          # clean up, then exit with stop.exit_status
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequested(BaseException):
    """Raised by `StopRequest.raise_if_requested`, from ordinary code, to unwind to the cleanup.

    A BaseException, as KeyboardInterrupt is, so that no `except Exception` on the way swallows it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """What a process killed by this signal reports (143 for SIGTERM, 130 for SIGINT)."""
        return 128 + self.signum


class StopRequest:
    """While inside the `with`: SIGTERM/SIGINT (or `signals`) are recorded, and the previous handlers come back on exit.

    Python delivers signals to the main thread only, so elsewhere nothing is installed (`installed` is False) and
    `requested` stays None; `wait` then simply sleeps.
    """

    def __init__(self, signals: Sequence[int] = STOP_SIGNALS) -> None:
        self._signals = tuple(signals)
        self._previous: dict[int, Any] = {}
        self._read_fd = self._write_fd = -1
        self.requested: int | None = None
        self.installed = False

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        for signum in self._signals:
            self._previous[signum] = signal.signal(signum, self._record)
        self.installed = True
        return self

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is None:
            self.requested = signum
        try:  # noqa: SIM105  (nothing but a system call in a signal handler)
            os.write(self._write_fd, b"\0")
        except OSError:  # the pipe is full (a burst of signals) or already closed: the number is recorded
            pass

    def wait(self, seconds: float) -> bool:
        """Sleeps up to `seconds`, waking at once when a stop signal arrives; whether one has arrived."""
        if self.requested is not None:
            return True
        if not self.installed:
            time.sleep(max(seconds, 0.0))
            return False
        select.select([self._read_fd], [], [], max(seconds, 0.0))
        return self.requested is not None

    def raise_if_requested(self) -> None:
        """Raises StopRequested when a stop signal arrived (call it between steps, never from a handler)."""
        if self.requested is not None:
            raise StopRequested(self.requested)

    @property
    def exit_status(self) -> int:
        """128 + the signal received (the status a process killed by it reports); 0 when none was."""
        return 0 if self.requested is None else 128 + self.requested

    def __exit__(self, *exc_info: object) -> None:
        if not self.installed:
            return
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self.installed = False
        for fd in (self._read_fd, self._write_fd):
            os.close(fd)
