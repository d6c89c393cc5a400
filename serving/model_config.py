"""What to serve: TF Serving's version policies, model configs, and the models.config file that lists them.

A model config comes from a models.config (`read_model_config_file`) or from the `serving` section
(`model_config_for`).

Example:
    models = read_model_config_file(Path("models.config"))
    models[0].policy.aspired([1, 2, 3])  # {3}: latest 1, TF Serving's default
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import file_system_storage_path_source_pb2, model_server_config_pb2

from foundation.bounded import TooLargeError, read_document
from foundation.publish import is_version_name
from serving.config_error import ServingConfigError
from serving.options import ServingOptions


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
        text = read_document(path, f"model config file {path}")
    except OSError as error:
        raise ServingConfigError(f"cannot read model config file {path}: {error.strerror}") from None
    except (TooLargeError, UnicodeDecodeError) as error:
        raise ServingConfigError(f"cannot read model config file {path}: {error}") from None
    return parse_model_config(text, path)


def parse_model_config(text: str, path: Path) -> list[ModelConfig]:
    """Parses the text of the models.config at `path` (named in messages; relative base paths are taken relative
    to its directory), as `read_model_config_file` does.

    Raises:
        ServingConfigError: as `read_model_config_file`.
    """
    try:
        config = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
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


def model_config_file_text(model: ModelConfig, base_path: str | None = None) -> str:
    """TF Serving's `--model_config_file` (a ModelServerConfig text proto) holding `model`, its labels in their
    order; `base_path` overrides `model.base_path` as written (a bucket path is no local `Path`)."""
    config = model_server_config_pb2.ModelServerConfig()
    entry = config.model_config_list.config.add(
        name=model.name, base_path=base_path or str(model.base_path), model_platform="tensorflow"
    )
    entry.model_version_policy.CopyFrom(model.policy.to_proto())
    for label, version in model.labels.items():
        entry.version_labels[label] = version
    return text_format.MessageToString(config)


def model_config_for(options: ServingOptions, base_path: Path, model_name: str | None = None) -> ModelConfig:
    """The model the `serving` section describes, served from `base_path`.

    Args:
        options: The `serving` section: model name, version policy, versions and labels.
        base_path: The model's base path (numeric version subdirectories).
        model_name: Overrides `options.model_name` unless None.

    Returns:
        The model's config; the `specific` policy serves the labelled versions when `options.versions` is empty.

    Raises:
        ServingConfigError: the version policy is invalid (`serving.version_policy: ...`).
    """
    versions = options.versions or tuple(sorted(set(options.labels.values())))
    try:
        policy = VersionPolicy(options.version_policy, options.num_versions, versions)
    except ValueError as error:
        raise ServingConfigError(f"serving.version_policy: {error}") from None
    return ModelConfig(model_name or options.model_name, base_path, policy, options.labels)


def version_holders_below(base_path: Path) -> list[str]:
    """The subdirectories of `base_path` that hold versions when `base_path` itself holds none, sorted.

    An easy mistake: `OUT/serving` passed instead of `OUT/serving/<model>`; a server would poll it forever.
    An empty directory holds no versions yet and is no mistake ([]).
    """
    children = [child for child in base_path.iterdir() if child.is_dir()]
    if not children or any(is_version_name(child.name) for child in children):
        return []
    return sorted(
        child.name for child in children if any(is_version_name(g.name) for g in child.iterdir() if g.is_dir())
    )
