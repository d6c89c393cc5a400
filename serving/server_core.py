"""Every served model, their version labels, and request routing by (name, version | label): TF Serving's ServerCore.

Each model's versions are a `serving.manager.ModelManager`. A config (the first one at start-up, then each
reload) is taken as TF Serving's `ServerCore::ReloadConfig` takes it (model_servers/server_core.cc:476-547): the
version labels are checked first (`UpdateModelVersionLabelMap`, :514, :549-612), against the versions available
*before* the config's models are added or updated (:524); a failing label fails the whole config, so its new
models, version policies and labels all stay out and the previous ones stay in force. A label may point at a
version that is not AVAILABLE only under --allow_version_labels_for_unavailable_models, and then only if the label
is not already in use with another version (:563-571), or under
--force_allow_any_version_labels_for_unavailable_models (:561-562). So a promotion takes two configs: first the
new version (the label stays), then, once it is AVAILABLE, the label moves.

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
        models: The first config, checked like any reload: without a flag below a label fails it, since no
            version is available before the first load (TF Serving's `Create` → `ReloadConfig`,
            server_core.cc:287, labels at :514 before the models at :524).
        loader: Loads one version (see `ModelManager`).
        allow_labels_for_unavailable_models: TF Serving's --allow_version_labels_for_unavailable_models: a label
            not yet in use may point at a version that is not (yet) available (server_core.cc:563-571).
        force_allow_any_labels_for_unavailable_models: TF Serving's
            --force_allow_any_version_labels_for_unavailable_models: any label may (server_core.cc:561-562).

    Raises:
        FailedPreconditionError: a label of the first config points at a version that is not available and no
            flag allows it (TF Serving then fails to start).
    """

    def __init__(
        self,
        models: Sequence[ModelConfig],
        loader: Loader,
        allow_labels_for_unavailable_models: bool = False,
        force_allow_any_labels_for_unavailable_models: bool = False,
    ) -> None:
        self._loader = loader
        self._allow_unavailable_labels = allow_labels_for_unavailable_models
        self._force_unavailable_labels = force_allow_any_labels_for_unavailable_models
        self._managers: dict[str, ModelManager] = {}
        self._labels: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()
        self._config_lock = threading.Lock()  # one reload at a time (server_core.cc:477, config_mu_)
        self._removed: list[str] = []
        self.reload(models)

    def reload(self, models: Sequence[ModelConfig]) -> None:
        """Adopts a new model list: labels are checked, then new models added, removed ones unloaded at the next
        poll, policies updated (TF Serving's `ReloadConfig`, server_core.cc:476-547).

        Raises:
            InvalidArgumentError: duplicate model names.
            FailedPreconditionError: TF Serving's "Request to assign label to version <v> of model <m>, which is
                not currently available for inference" (server_core.cc:580-583); nothing of the new config is
                applied, the previous config stays in force.
        """
        names = [model.name for model in models]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"duplicate model names in config: {names}")
        with self._config_lock:
            labels = self._checked_labels(models)
            with self._lock:
                # The new label map is swapped in before the models are added (server_core.cc:610-611, then
                # :524): a label allowed on a version still loading answers NOT_FOUND until it is AVAILABLE.
                self._labels = labels
                for model in models:
                    manager = self._managers.get(model.name)
                    if manager is None:
                        self._managers[model.name] = ModelManager(model, self._loader)
                    else:
                        manager.set_policy(model)
                self._removed = [name for name in self._managers if name not in names]

    def _checked_labels(self, models: Sequence[ModelConfig]) -> dict[str, dict[str, int]]:
        """The label map of `models`, each label checked as `UpdateModelVersionLabelMap` checks it."""
        label_map: dict[str, dict[str, int]] = {}
        for model in models:
            manager = self.model(model.name)
            available = set(manager.available_versions()) if manager else set()
            with self._lock:
                in_use = dict(self._labels.get(model.name, {}))
            for label, version in model.labels.items():
                if version not in available and not self._may_point_at_unavailable(in_use.get(label), version):
                    raise FailedPreconditionError(
                        f"Request to assign label to version {version} of model {model.name}, which is not "
                        "currently available for inference"
                    )
                label_map.setdefault(model.name, {})[label] = version
        return label_map

    def _may_point_at_unavailable(self, in_use: int | None, version: int) -> bool:
        if self._force_unavailable_labels:  # server_core.cc:561-562
            return True
        # server_core.cc:563-571: allowed unless the label already points at another version.
        return self._allow_unavailable_labels and (in_use is None or in_use == version)

    def poll(self) -> None:
        """One polling round over every model: removed models unload, the others load and unload versions."""
        with self._lock:
            managers = list(self._managers.values())
            removed = [self._managers.pop(name) for name in self._removed]
            self._removed = []
        for manager in removed:
            manager.unload_all()
        for manager in managers:
            manager.poll()

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
