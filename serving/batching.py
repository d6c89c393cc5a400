"""Server-side batching with TF Serving's knobs and semantics.

Concurrent requests for the same signature are merged into one call of the model: the open batch closes when
it is full (`max_batch_size` rows) or `batch_timeout_micros` after its first request arrived, and one of
`num_batch_threads` threads runs it. When `max_enqueued_batches` batches are waiting, new requests are refused
with UNAVAILABLE, and a request larger than `max_batch_size` is refused with INVALID_ARGUMENT (TF Serving's
texts). `allowed_batch_sizes` pads a batch up to the next allowed size, as TF Serving does.

Requests from an asyncio loop (`submit_async`, what the server's front ends use) get their results handed over
once per batch: one `call_soon_threadsafe` settles every request of the batch on that loop, instead of one
loop wake-up per request.

One difference from TF Serving, on purpose: when a merged batch fails with INVALID_ARGUMENT (one undecodable
image fails the whole op), its requests are re-run one by one, so only the bad request fails; TF Serving fails
every request in that batch.

Example:
    scheduler = BatchScheduler(run_model, BatchingOptions(max_batch_size=32, batch_timeout_micros=2000))
    outputs = scheduler.submit({"image_bytes": images}, rows=len(images)).result()
    outputs = await scheduler.submit_async({"image_bytes": images}, rows=len(images))  # on an asyncio loop
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass

import numpy as np

from serving.errors import InternalError, InvalidArgumentError, ServingError, UnavailableError

Arrays = dict[str, np.ndarray]
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchingOptions:
    """TF Serving's `BatchingParameters` (batching_parameters.txt).

    Attributes:
        max_batch_size: Largest batch, in rows; larger requests are refused.
        batch_timeout_micros: Longest wait, after a batch's first request, for more requests.
        num_batch_threads: Batches processed in parallel.
        max_enqueued_batches: Batches that may wait (including the open one) before requests are refused.
        allowed_batch_sizes: If set, batches are padded up to the next of these sizes (the last must equal
            `max_batch_size`); fixed sizes avoid retracing/recompiling for every batch size.
    """

    max_batch_size: int = 32
    batch_timeout_micros: int = 2000
    num_batch_threads: int = 2
    max_enqueued_batches: int = 100
    allowed_batch_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for field in ("max_batch_size", "num_batch_threads", "max_enqueued_batches"):
            if getattr(self, field) < 1:
                raise ValueError(f"batching {field} must be >= 1, got {getattr(self, field)}")
        if self.batch_timeout_micros < 0:
            raise ValueError(f"batching batch_timeout_micros must be >= 0, got {self.batch_timeout_micros}")
        sizes = self.allowed_batch_sizes
        if sizes and (list(sizes) != sorted(set(sizes)) or sizes[-1] != self.max_batch_size or sizes[0] < 1):
            raise ValueError(
                f"allowed_batch_sizes {list(sizes)} must be increasing, positive and end with max_batch_size "
                f"({self.max_batch_size}), as TF Serving requires"
            )


@dataclass
class _Task:
    inputs: Arrays
    rows: int
    future: Future[Arrays] | asyncio.Future[Arrays]
    loop: asyncio.AbstractEventLoop | None = None  # the loop `future` belongs to (submit_async)


Outcome = tuple[_Task, Arrays | ServingError]  # a task and its output slice, or its error


@dataclass
class _Batch:
    tasks: list[_Task]
    rows: int = 0
    opened: float = 0.0


class BatchScheduler:
    """Merges submitted tasks into batches and runs them on `num_batch_threads` threads.

    Args:
        process: Runs one merged batch (arrays concatenated along dim 0) and returns outputs with the
            same number of rows; raises `ServingError` on failure.
        options: The batching knobs.
        name: Names the threads (for debugging).
        on_batch: Called with each processed batch's row count (metrics).
    """

    def __init__(
        self,
        process: Callable[[Arrays], Arrays],
        options: BatchingOptions,
        name: str = "batch",
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self._process = process
        self._options = options
        self._on_batch = on_batch
        self._batches: collections.deque[_Batch] = collections.deque()
        self._condition = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{index}", daemon=True)
            for index in range(options.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, inputs: Mapping[str, np.ndarray], rows: int) -> Future[Arrays]:
        """Queues one request of `rows` rows; the Future resolves to its slice of the batch outputs.

        Raises:
            InvalidArgumentError: `rows` is larger than `max_batch_size`.
            UnavailableError: the queue is full, or the scheduler is closed (the version is unloading).
        """
        future: Future[Arrays] = Future()
        self._enqueue(_Task(dict(inputs), rows, future))
        return future

    def submit_async(self, inputs: Mapping[str, np.ndarray], rows: int) -> asyncio.Future[Arrays]:
        """As `submit`, from a coroutine: the future belongs to the running loop, and is settled together with
        the batch's other requests from that loop, in one loop callback.

        Raises:
            InvalidArgumentError, UnavailableError: as `submit`.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Arrays] = loop.create_future()
        self._enqueue(_Task(dict(inputs), rows, future, loop))
        return future

    def _enqueue(self, task: _Task) -> None:
        options = self._options
        if task.rows > options.max_batch_size:
            raise InvalidArgumentError(
                f"Task size {task.rows} is larger than maximum input batch size {options.max_batch_size}"
            )
        with self._condition:
            if self._closed:
                raise UnavailableError("The batch scheduler is closed: the model version is being unloaded")
            if not self._batches or self._batches[-1].rows + task.rows > options.max_batch_size:
                if len(self._batches) >= options.max_enqueued_batches:
                    raise UnavailableError("The batch scheduling queue to which this task was submitted is full")
                self._batches.append(_Batch([]))
            batch = self._batches[-1]
            opened = not batch.tasks
            if opened:
                batch.opened = time.monotonic()
            batch.tasks.append(task)
            batch.rows += task.rows
            # Wake a batch thread only when this task changes what it waits for: a batch to wait on (it may be
            # idle), or a batch that is now ready (full, or another batch queued behind it). Otherwise it
            # sleeps to the open batch's deadline; waking it per request would cost a thread switch each.
            if opened or batch.rows >= options.max_batch_size or len(self._batches) > 1:
                self._condition.notify()

    def close(self) -> None:
        """Runs every queued batch, then stops the threads; later submits raise UnavailableError."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()
        for thread in self._threads:
            thread.join()

    def _next_batch(self) -> _Batch | None:
        timeout = self._options.batch_timeout_micros / 1e6
        with self._condition:
            while True:
                if self._batches:
                    head = self._batches[0]
                    waited = time.monotonic() - head.opened
                    ready = (
                        len(self._batches) > 1
                        or head.rows >= self._options.max_batch_size
                        or waited >= timeout
                        or self._closed
                    )
                    if ready and head.tasks:
                        return self._batches.popleft()
                    if not head.tasks:
                        self._batches.popleft()
                        continue
                    self._condition.wait(timeout - waited)
                elif self._closed:
                    return None
                else:
                    self._condition.wait()

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            try:
                self._run(batch)
            except Exception:  # a bug outside the model (metrics, delivery) must not end the thread
                logger.exception("batch of %d requests failed outside the model", len(batch.tasks))
                _deliver([(task, InternalError("batch processing failed")) for task in batch.tasks])

    def _run(self, batch: _Batch) -> None:
        if self._on_batch is not None:
            self._on_batch(batch.rows)
        outcomes = self._attempt(batch.tasks, batch.rows)
        if isinstance(outcomes, InvalidArgumentError) and len(batch.tasks) > 1:
            isolated: list[Outcome] = []  # isolate the bad request(s): see the module docstring
            for task in batch.tasks:
                alone = self._attempt([task], task.rows)
                isolated.extend(alone if isinstance(alone, list) else [(task, alone)])
            outcomes = isolated
        elif isinstance(outcomes, ServingError):
            outcomes = [(task, outcomes) for task in batch.tasks]
        _deliver(outcomes)

    def _attempt(self, tasks: list[_Task], rows: int) -> list[Outcome] | ServingError:
        try:
            return self._split(tasks, self._process(self._merge(tasks)), rows)
        except ServingError as error:
            return error
        except Exception as error:  # a bug or an unexpected TF failure must not kill the batch thread
            return InternalError(f"batch processing failed: {error!r}")

    def _merge(self, tasks: list[_Task]) -> Arrays:
        rows = sum(task.rows for task in tasks)
        padded = next((size for size in self._options.allowed_batch_sizes if size >= rows), rows)
        merged = {}
        for alias in tasks[0].inputs:
            parts = [task.inputs[alias] for task in tasks]
            if padded > rows:  # pad with copies of the first row, like TF Serving's batching session
                first = parts[0][:1]
                parts.append(np.repeat(first, padded - rows, axis=0))
            merged[alias] = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        return merged

    @staticmethod
    def _split(tasks: list[_Task], outputs: Arrays, rows: int) -> list[Outcome]:
        for alias, array in outputs.items():
            if array.ndim == 0 or array.shape[0] < rows:
                raise InternalError(
                    f"Batched output tensor {alias} has 0th dimension {array.shape[:1]} but the batch has {rows} rows"
                )
        outcomes: list[Outcome] = []
        offset = 0
        for task in tasks:
            outcomes.append((task, {alias: array[offset : offset + task.rows] for alias, array in outputs.items()}))
            offset += task.rows
        return outcomes


def _deliver(outcomes: list[Outcome]) -> None:
    """Settles thread futures now, and each loop's futures in one callback on that loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
    for task, outcome in outcomes:
        if task.loop is None:
            _settle(task, outcome)
        else:
            by_loop.setdefault(task.loop, []).append((task, outcome))
    for loop, settled_together in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting for these any more
            loop.call_soon_threadsafe(_settle_all, settled_together)


def _settle_all(outcomes: list[Outcome]) -> None:
    for task, outcome in outcomes:
        _settle(task, outcome)


def _settle(task: _Task, outcome: Arrays | ServingError) -> None:
    if task.future.done():  # cancelled: the caller went away (e.g. a client deadline)
        return
    try:
        if isinstance(outcome, ServingError):
            task.future.set_exception(outcome)
        else:
            task.future.set_result(outcome)
    except InvalidStateError:  # a thread's Future, cancelled from its thread since done() was checked
        pass
