"""The one typed, validated, frozen configuration of a tfxp run.

Override chain (as in Model Garden): defaults in these classes → a YAML file →
`--set section.key=value` overrides → validation → a frozen `TfxpConfig`, written
as YAML beside the run's outputs. Unknown keys are errors that name the valid keys.

Each section is declared once, in the package that uses it, and composed here (as Model Garden's
`ExperimentConfig` composes task configs): `trainer` is `components.trainer.options.TrainerOptions`,
`edge` is `edge.options.EdgeOptions`, `serving` is `serving.options.ServingOptions`; the pipeline's own
sections (`pipeline`, `data`, `evaluator`, `kubeflow`, `beam`) are declared in `pipeline.config_sections`.
Loading a config imports no TensorFlow: registry names (`trainer.model`, `edge.mode`) are checked against their
light declarations.

Example:
    config = load_config(Path("configs/default.yaml"), ["trainer.train_steps=50"])
    config.trainer.train_steps  # 50
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
    model_validator,
)

from components.trainer.options import TrainerOptions
from components.trainer.recipe import global_batch, recipe_problems
from edge.options import EdgeOptions
from foundation.bounded import TooLargeError, read_document
from foundation.config_section import (
    ConfigSection,
    describe_errors,
    section_keys,
)
from foundation.errors import TfxpError
from foundation.yaml_files import Yaml12Loader, YamlRefusedError, load_yaml
from pipeline.config_sections import BeamSection, DataSection, EvaluatorSection, KubeflowSection, PipelineSection
from serving.options import ServingOptions


class ConfigError(TfxpError, ValueError):
    """A configuration problem: names the key, the value and what is expected."""


def _load_yaml(text: str, source: str) -> Any:
    # YAML 1.2 booleans only (`trainer.xla: on` stays the text "on"); aliases bounded (foundation.yaml_files).
    try:
        return load_yaml(text, source, Yaml12Loader)
    except ValueError as error:  # PyYAML's int() of a number with more than 4300 digits
        raise ConfigError(f"{source}: {error.args[0].split(';')[0]}; no setting takes a number that long") from None


class TfxpConfig(ConfigSection):
    """The whole configuration; see each section's attributes."""

    pipeline: PipelineSection = PipelineSection()
    data: DataSection = DataSection()
    trainer: TrainerOptions = TrainerOptions()
    evaluator: EvaluatorSection = EvaluatorSection()
    serving: ServingOptions = ServingOptions()
    edge: EdgeOptions = EdgeOptions()
    kubeflow: KubeflowSection = KubeflowSection()
    beam: BeamSection = BeamSection()

    @model_validator(mode="after")
    def _check_consistency(self) -> TfxpConfig:
        accelerator = self.kubeflow.trainer_accelerator
        if accelerator.count > 0 and not accelerator.type:
            raise ValueError(
                f"kubeflow.trainer_accelerator.count is {accelerator.count} but kubeflow.trainer_accelerator.type "
                "is empty; set it, e.g. `--set kubeflow.trainer_accelerator.type=nvidia.com/gpu`"
            )
        # The global batch the Trainer will have: kubeflow.trainer_accelerator.count GPUs on each worker
        # (one device when none is requested, as locally). The Trainer checks again with the devices it finds.
        problems = recipe_problems(self.trainer, global_batch(self.trainer, accelerator.count))
        if problems:
            raise ValueError("the training recipe would not train: " + "; ".join(problems))
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists, not tuples), as written to YAML and the run summary."""
        return _plain(self.model_dump(by_alias=True))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def valid_keys() -> list[str]:
    """Every settable key, `section.key` (nested: `section.key.sub`)."""
    return section_keys(TfxpConfig)


def parse_override(override: str) -> tuple[list[str], Any]:
    """Splits `section.key=value`; the value is read as YAML (a scalar, a list, a mapping), or as the text itself
    when it is not YAML.

    Raises:
        ConfigError: when the override has no `=` or an empty key, or its value is YAML tfxp refuses (a key
            written twice, an alias bomb: `foundation.yaml_files`).
    """
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {override!r}: expected `section.key=value`, e.g. `--set trainer.train_steps=100`")
    try:
        value = _load_yaml(raw, f"--set {override}") if raw.strip() else ""
    except YamlRefusedError as error:  # YAML, but not to be read as text either: `{a: 1, a: 2}` is no setting
        raise ConfigError(str(error)) from None
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def _apply(tree: dict[str, Any], path: list[str], value: Any, override: str) -> None:
    node = tree
    for depth, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {override}: `{'.'.join(path[: depth + 1])}` is not a section")
        node = child
    node[path[-1]] = value


def build_config(values: Mapping[str, Any], overrides: Sequence[str] = (), source: str = "defaults") -> TfxpConfig:
    """Validates `values` (nested dicts, as read from YAML) plus `--set` overrides.

    Raises:
        ConfigError: unknown keys (with the valid ones), wrong types, out-of-range values.
    """
    tree: dict[str, Any] = _deep_copy(values)
    for override in overrides:
        path, value = parse_override(override)
        _apply(tree, path, value, override)
    if overrides:
        source += " + --set " + " ".join(overrides)
    try:
        return TfxpConfig.model_validate(tree)
    except ValidationError as error:
        problems = describe_errors(error, TfxpConfig)
        raise ConfigError(f"invalid configuration ({source}):\n  " + "\n  ".join(problems)) from None


def _deep_copy(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _deep_copy(value) if isinstance(value, Mapping) else value for key, value in values.items()}


def load_config(path: Path | None = None, overrides: Sequence[str] = ()) -> TfxpConfig:
    """Defaults → YAML file → `--set` overrides → validated, frozen config.

    Args:
        path: A YAML file with any subset of the sections; None = defaults only.
        overrides: `section.key=value` strings, applied in order.

    Raises:
        ConfigError: unreadable file, non-mapping YAML, unknown keys, wrong types.
    """
    values: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        try:
            loaded = _load_yaml(read_document(path, f"config file {path}"), f"config file {path}")
        except OSError as error:
            raise ConfigError(f"cannot read config file {path}: {error.strerror}; pass an existing --config") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not UTF-8 text; --config takes a YAML file") from None
        except (YamlRefusedError, TooLargeError) as error:
            raise ConfigError(str(error)) from None
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {path} is not valid YAML: {error}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping of sections, got {type(loaded).__name__}")
        values = loaded
        source = str(path)
    return build_config(values, overrides, source)


def write_config(config: TfxpConfig, path: Path) -> None:
    """Writes the frozen config as YAML (the `params.yaml` beside a run's outputs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
