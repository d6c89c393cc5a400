"""Run parameters: what a compiled pipeline declares, and `--param k=v` checked against it before sending.

A compiled KFP pipeline declares its run parameters in `root.inputDefinitions.parameters` of the PipelineSpec:
a name, a `parameterType` (`NUMBER_INTEGER`, `NUMBER_DOUBLE`, `STRING`, `BOOLEAN`, `LIST`, `STRUCT`; older
compilers write `type`: `INT`, `DOUBLE`, `STRING`), an optional `defaultValue` and `isOptional`. These functions
read that from the spec as YAML/JSON (a file's first document, or the `pipeline_spec` the KFP API returns for a
pipeline version) and turn `k=v` strings into the typed values the API's `runtime_config.parameters` takes.

Example:
    parameters = pipeline_parameters(read_yaml_all(Path("pipeline.yaml"))[0])  # foundation.yaml_files
    arguments = typed_arguments(parse_param_entries(["train_steps=500"]), parameters)   # {"train_steps": 500}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foundation.bounded import parse_json
from foundation.errors import TfxpError
from foundation.paths import is_remote

# The old PrimitiveType names → ParameterType names.
_LEGACY_TYPES = {"INT": "NUMBER_INTEGER", "DOUBLE": "NUMBER_DOUBLE", "STRING": "STRING"}
# ASCII digits only (Go's strconv and JSON take no `٣`), within the int64 KFP's integer parameters are.
_INTEGER = re.compile(r"[+-]?[0-9]{1,19}", re.ASCII)
_INT64 = 2**63
# A JSON number (what KFP's Go backend parses): no `_`, `inf`, `nan` or non-ASCII digits, which float() takes.
_DOUBLE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", re.ASCII)
_HOW = {
    "NUMBER_INTEGER": "a whole number, e.g. 300",
    "NUMBER_DOUBLE": "a number, e.g. 0.75",
    "STRING": "text",
    "BOOLEAN": "true or false",
    "LIST": 'a JSON list, e.g. ["a", "b"]',
    "STRUCT": 'a JSON object, e.g. {"key": 1}',
}


class ParamError(TfxpError, ValueError):
    """A `--param` that the pipeline does not declare or whose value does not fit its type."""


@dataclass(frozen=True)
class PipelineParameter:
    """One run parameter of a compiled pipeline.

    Attributes:
        name: The parameter's name.
        type: The KFP `ParameterType` name, e.g. `NUMBER_INTEGER`.
        default: The compiled default; meaningful only when `has_default`.
        has_default: Whether the spec gives a default.
        optional: Whether a run may leave it unset.
    """

    name: str
    type: str
    default: Any = None
    has_default: bool = False
    optional: bool = False

    @property
    def required(self) -> bool:
        """Whether every run must give a value."""
        return not (self.has_default or self.optional)

    def describe(self) -> str:
        """`train_steps (NUMBER_INTEGER, default 300)`."""
        extra = f", default {json.dumps(self.default)}" if self.has_default else ("" if self.optional else ", required")
        return f"{self.name} ({self.type}{extra})"

    def convert(self, text: str) -> Any:
        """The typed value of `text` for this parameter.

        Raises:
            ParamError: `text` does not fit the type; the message names the expected type.
        """
        value: Any
        try:
            if self.type == "NUMBER_INTEGER":
                if not _INTEGER.fullmatch(text.strip()):
                    raise ValueError
                value = int(text)
                if not -_INT64 <= value < _INT64:
                    raise ValueError
            elif self.type == "NUMBER_DOUBLE":
                if not _DOUBLE.fullmatch(text.strip()):
                    raise ValueError
                value = float(text)
                if not math.isfinite(value):
                    raise ValueError
            elif self.type == "BOOLEAN":
                if text.strip().lower() not in ("true", "false"):
                    raise ValueError
                value = text.strip().lower() == "true"
            elif self.type in ("LIST", "STRUCT"):
                value = parse_json(text)
                if not isinstance(value, list if self.type == "LIST" else dict):
                    raise ValueError
            else:
                value = text
        except ValueError:
            raise ParamError(
                f"--param {self.name}={text}: {self.name} is {self.type}, so the value must be {_HOW[self.type]}"
            ) from None
        return value


def _pipeline_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    # The API returns {"pipeline_spec": ..., "platform_spec": ...} for a pipeline with a platform document.
    inner = spec.get("pipeline_spec")
    return inner if isinstance(inner, Mapping) and "root" in inner else spec


def pipeline_parameters(spec: Mapping[str, Any]) -> dict[str, PipelineParameter]:
    """The run parameters a compiled pipeline declares, by name.

    Args:
        spec: The PipelineSpec as a dict (camelCase keys, as kfp writes it), or the API's
            `{"pipeline_spec": ..., "platform_spec": ...}` form.

    Returns:
        Name → parameter, sorted by name; empty when the pipeline declares none.
    """
    root = _pipeline_spec(spec).get("root") or {}
    declared = (root.get("inputDefinitions") or {}).get("parameters") or {}
    parameters = {}
    for name, definition in sorted(declared.items()):
        kind = definition.get("parameterType") or _LEGACY_TYPES.get(definition.get("type", ""), "STRING")
        if kind not in _HOW:  # e.g. TASK_FINAL_STATUS: set by KFP, never by a run
            continue
        default = definition.get("defaultValue")
        if kind == "NUMBER_INTEGER" and isinstance(default, float) and default.is_integer():
            default = int(default)  # a protobuf Value holds numbers as doubles
        parameters[name] = PipelineParameter(
            name=name,
            type=kind,
            default=default,
            has_default="defaultValue" in definition,
            optional=bool(definition.get("isOptional")),
        )
    return parameters


def parse_param_entries(entries: Sequence[str]) -> dict[str, str]:
    """`["k=v", ...]` → `{"k": "v"}`; the value may hold `=`.

    Raises:
        ParamError: an entry without `=` or a name, or a name given twice.
    """
    raw: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ParamError(f"--param {entry!r} is not NAME=VALUE, e.g. --param train_steps=500")
        if name in raw:
            raise ParamError(f"--param {name} is given twice ({raw[name]!r} and {value!r}); give it once")
        raw[name] = value
    return raw


def typed_arguments(
    raw: Mapping[str, str], parameters: Mapping[str, PipelineParameter], pipeline: str = "the pipeline"
) -> dict[str, Any]:
    """Checks `--param` values against the declared parameters and types them.

    Args:
        raw: Name → text, from `parse_param_entries`.
        parameters: From `pipeline_parameters`.
        pipeline: The pipeline's name, for messages.

    Returns:
        Name → typed value, for `runtime_config.parameters`.

    Raises:
        ParamError: an unknown name (listing the declared ones), a value that does not fit its type (naming the
            type), or a required parameter without a value.
    """
    unknown = sorted(set(raw) - set(parameters))
    if unknown:
        if parameters:
            listed = "; ".join(parameter.describe() for parameter in parameters.values())
            hint = f"its parameters: {listed}"
        else:
            hint = "it declares no run parameters (recompile with `tfxp compile` to get them)"
        raise ParamError(f"--param {', '.join(unknown)}: {pipeline} has no such parameter; {hint}")
    missing = [parameter for parameter in parameters.values() if parameter.required and parameter.name not in raw]
    if missing:
        raise ParamError(
            f"{pipeline} needs a value for {', '.join(p.describe() for p in missing)}; "
            f"pass --param {missing[0].name}=VALUE"
        )
    typed = {name: parameters[name].convert(text) for name, text in raw.items()}
    for name, value in typed.items():
        check = VALUE_CHECKS.get(name)
        problem = check(str(value)) if check else None
        if problem:
            shown = value if str(value).isprintable() else repr(value)
            raise ParamError(f"--param {name}={shown}: {problem}")
    return typed


def _train_args_problem(text: str) -> str | None:
    from google.protobuf import json_format
    from tfx.proto import trainer_pb2

    try:
        train_args = json_format.Parse(text, trainer_pb2.TrainArgs())  # unknown fields (`num_step`) are errors
    except json_format.ParseError as error:
        return f'expected TFX TrainArgs as JSON, e.g. {{"num_steps": 500}} ({error})'
    if train_args.num_steps < 1:
        return "num_steps must be at least 1"
    return None


def _spans_problem(text: str) -> str | None:
    from foundation.data.spans import NO_SPANS, SpanError, parse_policy

    try:
        policy = parse_policy(text)
    except SpanError as error:
        return str(error)
    if policy == NO_SPANS:
        return "the pipeline was compiled for span folders: use latest, all or a number of newest spans"
    return None


def _data_path_problem(text: str) -> str | None:
    """`tfxp compile`'s rule for `data.path` (`storage.opened_path_problem`), and what a run's pods cannot resolve:
    a relative path (against the image's working directory, not the user's) or a control character."""
    from pipeline.kubeflow.compiler.storage import opened_path_problem

    if not text.strip():
        return "is empty; give the directory of the TFRecords"
    if not text.isprintable():
        return "holds a control character; give the directory of the TFRecords, e.g. gs://bucket/data"
    if (problem := opened_path_problem(text)) is not None:
        return problem
    if not is_remote(text) and not text.startswith("/"):
        return (
            "is a relative path, which the run's pods resolve against their image's working directory, not "
            "yours; give a gs:// path or an absolute path on a PVC the pods mount (kubeflow.volumes)"
        )
    return None


# What tfxp's own run parameters (`pipeline.kubeflow.compiler.component_setup.RUN_PARAMETERS`) accept, beyond their
# KFP type.
VALUE_CHECKS: dict[str, Callable[[str], str | None]] = {
    "train_args": _train_args_problem,
    "spans": _spans_problem,
    "data_path": _data_path_problem,
}
