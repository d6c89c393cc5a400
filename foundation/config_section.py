"""The base of every config section, and how a section's validation errors read.

Each section is declared once, in the package that uses it (`components.trainer.options.TrainerOptions` is the
`trainer` section, `edge.options.EdgeOptions` the `edge` section, `serving.options.ServingOptions` the `serving`
section), and `pipeline/config.py` composes them. This module has no dependency beyond pydantic, so the
components, `edge` and `serving` can build on it without importing `pipeline`.

Example:
    class ExampleSection(ConfigSection):
        steps: int = Field(10, ge=1)

    ExampleSection(steps=0)  # ValidationError; describe_errors(error, ExampleSection) reads "`steps` = 0: ..."
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

# The longest Duration protobuf (and so KFP's retry backoff) holds: 10,000 years (duration.proto).
MAX_DURATION_SECONDS = 315_576_000_000


class ConfigSection(BaseModel):
    """A frozen config section: unknown keys are errors, defaults are validated too.

    `coerce_numbers_to_str`: `--set kubeflow.cpu_request=4` or `data.path=2024` are strings, not numbers.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, coerce_numbers_to_str=True, allow_inf_nan=False
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads `true` as 1 for an int field: `trainer.train_steps=true` would train one step.
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and field.annotation in (int, float):
            raise ValueError(f"expected a number, got the boolean {str(value).lower()}")
        return value


def registered(kind: str, names: Sequence[str]) -> AfterValidator:
    """A validator (for `Annotated[str, registered(...)]`) that accepts only the registry's `names`.

    Registries whose builders import TensorFlow declare their names apart from the builders, so a config
    names a model or mode that exists when it loads, not hours later in a pod.

    Example:
        ModelName = Annotated[str, registered("model", ("small_resnet", "resnet50"))]
        # 'resnet5' fails with "unknown model; registered: resnet50, small_resnet"
    """
    valid = sorted(names)

    def check(value: str) -> str:
        if value not in valid:
            raise ValueError(f"unknown {kind}; registered: {', '.join(valid)}")
        return value

    return AfterValidator(check)


def section_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every settable key of `model`, `key` or `section.key` (nested sections: `section.key.sub`)."""
    keys = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(section_keys(annotation, f"{prefix}{key}."))
        else:
            keys.append(f"{prefix}{key}")
    return keys


def describe_errors(error: ValidationError, model: type[BaseModel]) -> list[str]:
    """One line per problem of validating `model`, naming the key, the value and what is expected.

    Unknown keys list the valid keys beside them (the section's, or the top-level names for an unknown section).
    """
    lines = []
    keys = section_keys(model)
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        if not key or (item["type"] == "value_error" and isinstance(item.get("input"), dict)):
            lines.append(message)  # a cross-field check names its keys itself
        elif item["type"] == "extra_forbidden":
            section = key.rsplit(".", 1)[0] + "." if "." in key else ""
            options = [k for k in keys if k.startswith(section)] if section else sorted({k.split(".")[0] for k in keys})
            lines.append(f"unknown key `{key}`; valid keys here: {', '.join(options)}")
        elif item["type"] == "missing":
            lines.append(f"missing key `{key}`")
        else:
            received: Any = item.get("input")
            lines.append(f"`{key}` = {received!r}: {message}")
    return lines


def refuse_moved_keys(values: Any, section: str, moved: Mapping[str, str], guide: str) -> Any:
    """For a section's `mode="before"` validator: refuses keys that moved, in YAML and `--set` alike, naming
    where each went (`moved`: old key → new key, both relative to `section`) and where the change is documented.

    Raises:
        ValueError: a moved key is given.
    """
    if isinstance(values, Mapping):
        given = [key for key in moved if key in values]
        if given:
            raise ValueError(
                "; ".join(f"`{section}.{key}` moved to `{section}.{moved[key]}`" for key in given)
                + f": rename it in the config file or the --set ({guide})"
            )
    return values
