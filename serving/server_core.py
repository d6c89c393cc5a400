"""Every served model, their version labels, and request routing by (name, version | label): TF Serving's ServerCore.

Each model's versions are a `serving.manager.ModelManager`. Version labels (`stable`, `canary`) map to versions
and may only point at AVAILABLE ones, unless the server allows labels for unavailable models.

Example:
    core = ServerCore([ModelConfig("digits", Path("out/serving/digits"))], loader)
    core.poll()
    with core.acquire("digits", version=None, label=None) as servable:
        servable.run("serving_default", inputs)
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence

from serving.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from serving.manager import Loader, ModelManager
from serving.model_config import ModelConfig
from serving.servable import Servable

logger = logging.getLogger(__name__)


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
