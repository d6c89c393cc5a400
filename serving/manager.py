"""The versions of one model: TF Serving's version watching, loading, unloading and request handles, in small.

A model's base path holds version subdirectories (`foundation.publish.version_number`: ASCII digits within
int64, as TF Serving parses them). Its version policy (`serving.model_config.VersionPolicy`) picks the aspired
versions; polling loads new ones (and replays their warmup records) before unloading those no longer aspired, as
TF Serving's availability-preserving policy does, so traffic never sees a gap. Requests hold a handle on the
version they resolved; unloading waits for those handles, so a hot swap fails no request in flight. Every model
together, with version labels and routing by name, is `serving.server_core.ServerCore`.

Example:
    manager = ModelManager(ModelConfig("digits", Path("out/serving/digits")), loader)
    manager.poll()
    with manager.acquire(version=None) as servable:
        servable.run("serving_default", inputs)
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from foundation.publish import looks_like_version, version_number
from serving.errors import NotFoundError
from serving.model_config import ModelConfig
from serving.servable import Servable

logger = logging.getLogger(__name__)

# TF Serving retries a failing load this many times (--max_num_load_retries) before giving the version up,
# waiting this long between attempts (--load_retry_interval_micros, 60 s by default).
MAX_LOAD_RETRIES = 5
LOAD_RETRY_INTERVAL_SECONDS = 60.0


class State(enum.Enum):
    """A version's state, as GetModelStatus reports it (`ModelVersionStatus.State`)."""

    START = 10
    LOADING = 20
    AVAILABLE = 30
    UNLOADING = 40
    END = 50


@dataclass
class VersionState:
    """The state of one version and the error that ended it, if any.

    Attributes:
        state: Where the version is in its life cycle.
        error: Why its last load failed ("" when it did not fail).
        attempts: Loads tried since its files last changed.
        retry_at: After a failed load, the monotonic time of the next attempt.
        files: After a failed load, what its directory held then (a changed directory is retried at once).
    """

    state: State
    error: str = ""
    attempts: int = 0
    retry_at: float = 0.0
    files: tuple[tuple[str, int, int], ...] = ()


class _Loaded:
    """A servable plus the count of requests holding it."""

    def __init__(self, servable: Servable) -> None:
        self.servable = servable
        self.in_flight = 0
        self.idle = threading.Condition()


Loader = Callable[[str, int, Path], Servable]


class ModelManager:
    """The versions of one model: discovery, loading, unloading and request routing.

    Args:
        config: The model's name, base path and version policy.
        loader: Loads, warms up and starts one version; raises to fail the load.
    """

    def __init__(self, config: ModelConfig, loader: Loader) -> None:
        self.config = config
        self._loader = loader
        self._lock = threading.Lock()
        self._serving: dict[int, _Loaded] = {}
        self._states: dict[int, VersionState] = {}
        # Version → its folder's name (`007` is version 7); names already warned about as no version.
        self._folders: dict[int, str] = {}
        self._warned: set[str] = set()

    def versions_on_disk(self) -> list[int] | None:
        """The version subdirectories of the base path (TF Serving ignores other names); None if unreadable.

        A name a digit test would take but that is no version (`²`, beyond int64) is skipped with one warning.
        """
        try:
            entries = [entry for entry in self.config.base_path.iterdir() if entry.is_dir()]
        except OSError as error:
            logger.warning("model %s: cannot list base path %s (%s)", self.config.name, self.config.base_path, error)
            return None
        folders: dict[int, str] = {}
        for entry in sorted(entries, key=lambda entry: entry.name):  # of `007` and `7`, `7` wins, as in TF Serving
            number = version_number(entry.name)
            if number is not None:
                folders[number] = entry.name
            elif looks_like_version(entry.name) and entry.name not in self._warned:
                self._warned.add(entry.name)
                logger.warning(
                    "model %s: ignoring folder %s: not a version (a version is ASCII digits, at most 2**63-1, "
                    "as TF Serving reads it); rename or remove it",
                    self.config.name,
                    entry,
                )
        self._folders = folders
        return sorted(folders)

    def poll(self) -> None:
        """Loads newly aspired versions (highest first), then unloads the ones no longer aspired."""
        on_disk = self.versions_on_disk()
        if on_disk is None:
            return
        aspired = self.config.policy.aspired(on_disk)
        for version in sorted(aspired - set(self._serving), reverse=True):
            self._load(version)
        self._unload_unaspired(aspired)

    def set_policy(self, config: ModelConfig) -> None:
        """Replaces the model's config (after a models.config reload); the next poll applies it."""
        self.config = config

    def _load(self, version: int) -> None:
        path = self.config.base_path / self._folders.get(version, str(version))
        state = self._states.get(version)
        attempts = state.attempts if state else 0
        if state is not None and state.error:
            files = _directory_files(path)
            if files != state.files:
                attempts = 0  # its files changed (a push completed): try again now, with a fresh count
            elif attempts > MAX_LOAD_RETRIES or time.monotonic() < state.retry_at:
                return  # given up like TF Serving after --max_num_load_retries, or not yet time to retry
        attempts += 1
        with self._lock:
            self._states[version] = VersionState(State.LOADING, attempts=attempts)
        started = time.monotonic()
        try:
            servable = self._loader(self.config.name, version, path)
        except Exception as error:
            logger.error(
                "model %s version %d failed to load (attempt %d): %s", self.config.name, version, attempts, error
            )
            failed = VersionState(
                State.END,
                error=str(error),
                attempts=attempts,
                retry_at=time.monotonic() + LOAD_RETRY_INTERVAL_SECONDS,
                files=_directory_files(path),
            )
            with self._lock:
                self._states[version] = failed
            return
        with self._lock:
            self._serving[version] = _Loaded(servable)
            self._states[version] = VersionState(State.AVAILABLE, attempts=attempts)
        logger.info("model %s version %d is available (%.2fs)", self.config.name, version, time.monotonic() - started)

    def _unload_unaspired(self, aspired: set[int]) -> None:
        # TF Serving's AvailabilityPreservingPolicy: unload a non-aspired version only if no version is aspired,
        # an aspired one is serving, or another non-aspired one is still serving.
        while True:
            serving = set(self._serving)
            unaspired = sorted(serving - aspired)
            if not unaspired:
                return
            if aspired and not (serving & aspired) and len(unaspired) <= 1:
                return
            self._unload(unaspired[0])

    def _unload(self, version: int) -> None:
        with self._lock:
            loaded = self._serving.pop(version)
            self._states[version] = VersionState(State.UNLOADING)
        with loaded.idle:
            loaded.idle.wait_for(lambda: loaded.in_flight == 0)
        loaded.servable.close()
        with self._lock:
            self._states[version] = VersionState(State.END)
        logger.info("model %s version %d unloaded", self.config.name, version)

    def unload_all(self) -> None:
        """Unloads every version (server shutdown)."""
        for version in sorted(self._serving):
            self._unload(version)

    @contextlib.contextmanager
    def acquire(self, version: int | None) -> Iterator[Servable]:
        """Holds `version` (None = the highest available) for the duration of a request.

        Raises:
            NotFoundError: TF Serving's "Servable not found for request: Latest(name)/Specific(name, v)".
        """
        with self._lock:
            if version is None:
                chosen = max(self._serving, default=None)
                if chosen is None:
                    raise NotFoundError(f"Servable not found for request: Latest({self.config.name})")
            elif version in self._serving:
                chosen = version
            else:
                raise NotFoundError(f"Servable not found for request: Specific({self.config.name}, {version})")
            loaded = self._serving[chosen]
            with loaded.idle:
                loaded.in_flight += 1
        try:
            yield loaded.servable
        finally:
            with loaded.idle:
                loaded.in_flight -= 1
                if loaded.in_flight == 0:
                    loaded.idle.notify_all()

    def available_versions(self) -> list[int]:
        """Versions currently serving, ascending."""
        with self._lock:
            return sorted(self._serving)

    def states(self) -> dict[int, VersionState]:
        """Every version this server has seen, with its state (END for unloaded or failed ones)."""
        with self._lock:
            return {version: dataclasses.replace(s) for version, s in self._states.items()}


def _directory_files(path: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of each entry of a version directory, down to its subdirectories; () if unreadable."""
    try:
        entries = sorted(path.rglob("*"))
        return tuple(
            (str(entry.relative_to(path)), entry.stat().st_size, entry.stat().st_mtime_ns) for entry in entries
        )
    except OSError:
        return ()
