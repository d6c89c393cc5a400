"""Which model versions are loaded, and how requests find them: TF Serving's ServerCore, in small.

Each model has a base path whose version subdirectories (`foundation.publish.version_number`: ASCII digits within
int64, as TF Serving parses them) are versions. A version policy (latest N, specific,
all) picks the aspired versions; polling loads new ones (and replays their warmup records) before unloading
those no longer aspired, as TF Serving's availability-preserving policy does, so traffic never sees a gap.
Requests hold a handle on the version they resolved; unloading waits for those handles, so a hot swap fails no
request in flight. Version labels (`stable`, `canary`) map to versions and may only point at AVAILABLE ones.

Example:
    core = ServerCore([ModelConfig("digits", Path("out/serving/digits"))], loader)
    core.poll()
    with core.acquire("digits", version=None, label=None) as servable:
        servable.run("serving_default", inputs)
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import file_system_storage_path_source_pb2, model_server_config_pb2

from foundation.publish import looks_like_version, version_number
from serving.config_error import ServingConfigError
from serving.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from serving.servable import Servable

logger = logging.getLogger(__name__)

# TF Serving retries a failing load this many times (--max_num_load_retries) before giving the version up,
# waiting this long between attempts (--load_retry_interval_micros, 60 s by default).
MAX_LOAD_RETRIES = 5
LOAD_RETRY_INTERVAL_SECONDS = 60.0


@dataclass(frozen=True)
class VersionPolicy:
    """TF Serving's `ServableVersionPolicy`: which versions on disk to serve.

    Attributes:
        kind: `latest` (the `num_versions` highest), `all`, or `specific` (`versions`).
        num_versions: For `latest`.
        versions: For `specific`.
    """

    kind: str = "latest"
    num_versions: int = 1
    versions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("latest", "all", "specific"):
            raise ServingConfigError(f"version policy {self.kind!r} is unknown; use latest, all or specific")
        if self.kind == "latest" and self.num_versions < 1:
            raise ServingConfigError(f"version policy latest needs num_versions >= 1, got {self.num_versions}")
        if self.kind == "specific" and not self.versions:
            raise ServingConfigError("version policy specific needs at least one version")

    def aspired(self, on_disk: Sequence[int]) -> set[int]:
        """The versions to serve, given the versions present under the base path."""
        if self.kind == "all":
            return set(on_disk)
        if self.kind == "specific":
            return set(on_disk) & set(self.versions)
        return set(sorted(on_disk)[-self.num_versions :])

    @classmethod
    def from_proto(
        cls, proto: file_system_storage_path_source_pb2.FileSystemStoragePathSourceConfig.ServableVersionPolicy
    ) -> VersionPolicy:
        """Reads `model_version_policy` of a models.config entry (unset = latest 1, TF Serving's default)."""
        kind = proto.WhichOneof("policy_choice")
        if kind == "all":
            return cls("all")
        if kind == "specific":
            return cls("specific", versions=tuple(proto.specific.versions))
        num = proto.latest.num_versions if kind == "latest" else 1
        return cls("latest", num_versions=num or 1)

    def to_proto(self) -> file_system_storage_path_source_pb2.FileSystemStoragePathSourceConfig.ServableVersionPolicy:
        """The `model_version_policy` message for a models.config."""
        proto = file_system_storage_path_source_pb2.FileSystemStoragePathSourceConfig.ServableVersionPolicy()
        if self.kind == "all":
            proto.all.SetInParent()
        elif self.kind == "specific":
            proto.specific.versions.extend(self.versions)
        else:
            proto.latest.num_versions = self.num_versions
        return proto


@dataclass(frozen=True)
class ModelConfig:
    """One entry of TF Serving's `model_config_list`.

    Attributes:
        name: Model name clients use.
        base_path: Directory whose numeric subdirectories are versions.
        policy: Which versions to serve.
        labels: Version labels, e.g. {"stable": 1, "canary": 2}.
    """

    name: str
    base_path: Path
    policy: VersionPolicy = VersionPolicy()
    labels: dict[str, int] = field(default_factory=dict)


def read_model_config_file(path: Path) -> list[ModelConfig]:
    """Parses a models.config (`ModelServerConfig` text proto with a `model_config_list`).

    Relative base paths are taken relative to the config file's directory.

    Raises:
        ValueError: unreadable or invalid text proto, no models, duplicate names, or a platform other than
            tensorflow.
    """
    try:
        config = text_format.Parse(path.read_text(), model_server_config_pb2.ModelServerConfig())
    except OSError as error:
        raise ServingConfigError(f"cannot read model config file {path}: {error.strerror}") from None
    except text_format.ParseError as error:
        raise ServingConfigError(
            f"model config file {path} is not a valid ModelServerConfig text proto: {error}"
        ) from None
    if config.WhichOneof("config") != "model_config_list" or not config.model_config_list.config:
        raise ServingConfigError(
            f"model config file {path} has no model_config_list entries; add "
            "`model_config_list { config { name: ... base_path: ... } }`"
        )
    models, names = [], set()
    for entry in config.model_config_list.config:
        if not entry.name or not entry.base_path:
            raise ServingConfigError(
                f"model config file {path}: every config needs a name and a base_path, got {entry}"
            )
        if entry.name in names:
            raise ServingConfigError(f"model config file {path}: model {entry.name!r} is configured twice")
        if entry.model_platform not in ("", "tensorflow"):
            raise ServingConfigError(
                f"model config file {path}: model {entry.name!r} has model_platform {entry.model_platform!r}; "
                "this server loads only tensorflow SavedModels"
            )
        names.add(entry.name)
        base = Path(entry.base_path)
        models.append(
            ModelConfig(
                name=entry.name,
                base_path=base if base.is_absolute() else path.parent / base,
                policy=VersionPolicy.from_proto(entry.model_version_policy),
                labels=dict(entry.version_labels),
            )
        )
    return models


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


class ServerCore:
    """Every served model, their version labels, and request routing by (name, version | label).

    Args:
        models: The model configs.
        loader: Loads one version (see `ModelManager`).
        allow_labels_for_unavailable_models: Accept labels that point at versions not (yet) available, like
            TF Serving's --allow_version_labels_for_unavailable_models.
    """

    def __init__(
        self, models: Sequence[ModelConfig], loader: Loader, allow_labels_for_unavailable_models: bool = False
    ) -> None:
        self._loader = loader
        self._allow_unavailable_labels = allow_labels_for_unavailable_models
        self._managers: dict[str, ModelManager] = {}
        self._labels: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()
        self._pending_labels: dict[str, dict[str, int]] = {}
        self._removed: list[str] = []
        self.reload(models, apply_labels=False)

    def reload(self, models: Sequence[ModelConfig], apply_labels: bool = True) -> None:
        """Adopts a new model list: new models are added, removed ones unloaded at the next poll, labels updated.

        Raises:
            FailedPreconditionError: a label points at a version that is not available (the previous config
                stays in force, as in TF Serving).
        """
        names = [model.name for model in models]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"duplicate model names in config: {names}")
        if apply_labels:
            self._check_labels(models)
        with self._lock:
            for model in models:
                manager = self._managers.get(model.name)
                if manager is None:
                    self._managers[model.name] = ModelManager(model, self._loader)
                else:
                    manager.set_policy(model)
            self._removed = [name for name in self._managers if name not in names]
            self._pending_labels = {model.name: dict(model.labels) for model in models}
            if apply_labels:
                self._labels = self._pending_labels

    def _check_labels(self, models: Sequence[ModelConfig]) -> None:
        if self._allow_unavailable_labels:
            return
        for model in models:
            manager = self._managers.get(model.name)
            available = set(manager.available_versions()) if manager else set()
            for version in model.labels.values():
                if version not in available:
                    raise FailedPreconditionError(
                        f"Request to assign label to version {version} of model {model.name}, which is not "
                        "currently available for inference"
                    )

    def poll(self) -> None:
        """One polling round over every model; then labels from the first config take effect."""
        with self._lock:
            managers = list(self._managers.values())
            removed = [self._managers.pop(name) for name in self._removed]
            self._removed = []
        for manager in removed:
            manager.unload_all()
        for manager in managers:
            manager.poll()
        if not self._labels and any(self._pending_labels.values()):
            try:
                self._check_labels([manager.config for manager in managers])
            except FailedPreconditionError as error:
                logger.error("version labels not applied: %s", error.message)
                return
            with self._lock:
                self._labels = self._pending_labels

    def model(self, name: str) -> ModelManager | None:
        """The manager of model `name`, or None."""
        with self._lock:
            return self._managers.get(name)

    def models(self) -> list[ModelManager]:
        """Every model's manager."""
        with self._lock:
            return list(self._managers.values())

    def resolve_label(self, name: str, label: str) -> int:
        """The version `label` points at for model `name`.

        Raises:
            InvalidArgumentError: TF Serving's "Unrecognized servable version label: <label>".
        """
        with self._lock:
            version = self._labels.get(name, {}).get(label)
        if version is None:
            raise InvalidArgumentError(f"Unrecognized servable version label: {label}")
        return version

    @contextlib.contextmanager
    def acquire(self, name: str, version: int | None = None, label: str | None = None) -> Iterator[Servable]:
        """Holds the servable a request names for the request's duration.

        Raises:
            InvalidArgumentError: empty name, or unknown label.
            NotFoundError: unknown model or version (TF Serving's "Servable not found for request: ...").
        """
        if not name:
            raise InvalidArgumentError("ModelSpec has no name specified.")
        if label:
            version = self.resolve_label(name, label)
        manager = self.model(name)
        if manager is None:
            request = f"Specific({name}, {version})" if version is not None else f"Latest({name})"
            raise NotFoundError(f"Servable not found for request: {request}")
        with manager.acquire(version) as servable:
            yield servable

    def unload_all(self) -> None:
        """Unloads every version of every model."""
        for manager in self.models():
            manager.unload_all()


def _directory_files(path: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of each entry of a version directory, down to its subdirectories; () if unreadable."""
    try:
        entries = sorted(path.rglob("*"))
        return tuple(
            (str(entry.relative_to(path)), entry.stat().st_size, entry.stat().st_mtime_ns) for entry in entries
        )
    except OSError:
        return ()
