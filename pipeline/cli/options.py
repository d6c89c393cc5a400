"""Options shared by commands: config loading (`config_command` declares --config and --set once for `compile`,
`deploy-assets`, ...), the signature rewriting behind such shared options (`with_options`), and typed values that
are checked while the command line is parsed, before any work starts: ports, gRPC targets, REST URLs, paths.

A bad value exits 2 with Typer's one-paragraph "Invalid value for '--OPTION': ..." naming the option and the value.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from foundation.path_rules import check_not_input
from foundation.paths import is_remote
from pipeline.cli.console import UserError
from serving.address import check_port, parse_grpc_target, parse_rest_url

if TYPE_CHECKING:
    from pipeline.config import TfxpConfig


def load_cli_config(
    config_file: Path | None, overrides: list[str] | None, output: str | Path | None = None
) -> TfxpConfig:
    """The config from `--config`, `--set` and `--output`.

    Raises:
        pipeline.config.ConfigError: the file, a key or a value is wrong (the message says which).
    """
    from pipeline.config import load_config  # here, so `--help` does not import the config schema

    config = load_config(config_file, list(overrides or []))
    if output is not None:  # a path, not YAML: applied as is
        config = config.model_copy(update={"pipeline": config.pipeline.model_copy(update={"output": str(output)})})
    return config


# --- typed values ------------------------------------------------------------------------------------------------
# Typer parsers: text in, value out, `typer.BadParameter` (exit 2, naming the option) for a bad value.


def port_number(text: str) -> int:
    """A TCP port, 1-65535 (one rule for every port option)."""
    try:
        return check_port(int(text.strip()), what="")
    except ValueError as error:
        if not text.strip().lstrip("+-").isdigit():
            raise typer.BadParameter(f"{text!r} is not a port number: use 1-65535") from None
        raise typer.BadParameter(str(error)) from None


def grpc_target(text: str) -> str:
    """A gRPC target `HOST:PORT` (`[IPV6]:PORT`), port 1-65535."""
    try:
        parse_grpc_target(text, what="")
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return text


def rest_url(text: str) -> str:
    """A REST base URL `http(s)://HOST:PORT`, without a trailing slash."""
    try:
        return parse_rest_url(text, what="")
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def kfp_host(text: str) -> str:
    """A Kubeflow Pipelines address `http(s)://HOST[:PORT][/PATH]`, without a trailing slash."""
    from pipeline.kubeflow.client.auth import check_host
    from pipeline.kubeflow.client.runs import SubmitError

    try:
        return check_host(text, what="")
    except SubmitError as error:
        raise typer.BadParameter(str(error)) from None


# The longest a single request may be given (--timeout, --request-timeout) and the longest a command may wait
# (--wait, the run wait's --timeout, --poll): Python's socket and thread timeouts stop at about 292 years, and a
# larger value (`1e308`, `inf`) ended in "OverflowError: timestamp out of range" with a traceback.
MAX_REQUEST_SECONDS = 86_400.0
MAX_WAIT_SECONDS = 30 * 86_400.0


GrpcPortOption = Annotated[
    int | None,
    typer.Option(
        "--grpc-port", parser=port_number, metavar="PORT", help="gRPC port, 1-65535 (default serving.grpc_port)."
    ),
]
RestPortOption = Annotated[
    int | None,
    typer.Option(
        "--rest-port", parser=port_number, metavar="PORT", help="REST port, 1-65535 (default serving.rest_port)."
    ),
]
GrpcOption = Annotated[
    str | None,
    typer.Option("--grpc", parser=grpc_target, metavar="HOST:PORT", help="gRPC target HOST:PORT, e.g. localhost:8500."),
]
RestOption = Annotated[
    str | None,
    typer.Option(
        "--rest", parser=rest_url, metavar="URL", help="REST base URL http://HOST:PORT, e.g. http://localhost:8501."
    ),
]
ModelNameOption = Annotated[str | None, typer.Option("--model-name", help="Model name (default serving.model_name).")]


# --- paths -------------------------------------------------------------------------------------------------------
# One rule for every path a command takes, checked while the command line is parsed (before any work starts):
#   existing_file / existing_dir  the path exists, is a file / a directory, and can be read;
#   output_file                   not a directory, and the nearest existing ancestor is a writable directory;
#   output_dir                    not an existing file, and the nearest existing ancestor is a writable directory.
# Missing parents of an output are created by the command, so only the nearest existing one is checked.

PathKind = Literal["existing_file", "existing_dir", "output_file", "output_dir"]


def path_problem(path: Path, kind: PathKind, hint: str = "") -> str | None:
    """What is wrong with `path` for a command that uses it as `kind`; None when nothing is.

    Args:
        path: The path as the user gave it.
        kind: How the command uses it (see the rules above).
        hint: For a missing `existing_*` path: how to make one, e.g. "run `tfxp run` first"; '' = none.

    Returns:
        One sentence naming the path, e.g. `/tmp/x is a file, not a directory`, or None.

    Example:
        path_problem(Path("out.json"), "output_file")  # None where the working dir is writable
    """
    if kind in ("existing_file", "existing_dir"):
        if not path.exists():
            return f"{path} does not exist" + (f"; {hint}" if hint else "")
        if kind == "existing_file" and path.is_dir():
            return f"{path} is a directory, not a file"
        if kind == "existing_dir" and not path.is_dir():
            return f"{path} is a file, not a directory"
        if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
            return f"{path} is not readable"
        return None
    if kind == "output_file" and path.is_dir():
        return f"{path} is a directory; give a file path, e.g. {path / 'result.json'}"
    if kind == "output_dir" and path.exists() and not path.is_dir():
        return f"{path} is a file; give a directory (created if missing)"
    parent = path if kind == "output_dir" and path.is_dir() else path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{path}: {parent} is a file, not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{path}: directory {parent} is not writable"
    return None


def path_rule(kind: PathKind, hint: str = "") -> Callable[[str], Path]:
    """A Typer parser that checks a path by the `kind` rule of `path_problem` (exit 2 naming the option).

    Args:
        kind: How the command uses the path.
        hint: How to make a missing path (see `path_problem`).

    Returns:
        The parser, for `typer.Option(..., parser=path_rule("existing_dir", hint="..."), metavar="DIR")`.
    """

    def parse(text: str) -> Path:
        if is_remote(text):  # Path() would turn gs://b/x into the local folder gs:/b/x
            raise typer.BadParameter(f"{text} is a bucket URL; this option takes a local path")
        path = Path(text)
        problem = path_problem(path, kind, hint)
        if problem is not None:
            raise typer.BadParameter(problem)
        return path

    parse.__name__ = kind
    return parse


# The rules without a hint, for `parser=`: `typer.Option("--out", parser=output_file, metavar="FILE")`.
existing_file = path_rule("existing_file")
existing_dir = path_rule("existing_dir")
output_file = path_rule("output_file")
output_dir = path_rule("output_dir")


def run_output(text: str) -> str:
    """`tfxp run --output`: a local directory by the `output_dir` rule, or a bucket URL kept as typed (the local
    runner then refuses it with its reason: ML Metadata's SQLite store needs a local output)."""
    return text if is_remote(text) else str(output_dir(text))


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        parser=existing_file,
        metavar="FILE",
        help="YAML config (defaults: the built-in digits config).",
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override one key, `section.key=value`; repeatable."),
]


# --- options shared by several commands ---------------------------------------------------------------------------


def with_options(
    command: Callable[..., None],
    name: str,
    build: Callable[..., Any],
    *,
    in_place: Sequence[inspect.Parameter] = (),
    last: Sequence[inspect.Parameter] = (),
) -> Callable[..., None]:
    """`command` with its parameter `name` replaced by options: `in_place` where it stood, `last` after the others.
    The command is called with `name=build(**those options)`.

    Typer reads the options from the returned function's signature, so `--help` lists them as if the command
    declared them.

    Args:
        command: A command function with a parameter `name`; where `in_place` is given, `name` stands before the
            parameters that have defaults.
        name: The parameter the options stand for, e.g. `client`.
        build: Makes its value from the options, called with them as keywords.
        in_place: Options put where `name` was.
        last: Options put after every other parameter.

    Returns:
        The command, for `@app.command(...)` or a `COMMANDS` entry.

    Example:
        with_options(serve, "config", load_cli_config, last=(config_file, overrides))  # two inspect.Parameters
    """
    signature = inspect.signature(command)
    # Typer takes a signature as given, so the command's own annotations (strings, under `from __future__ import
    # annotations`) are evaluated here, as `inspect.signature(eval_str=True)` would; `name` is left out.
    own = [
        parameter.replace(annotation=eval(parameter.annotation, command.__globals__))
        if isinstance(parameter.annotation, str)
        else parameter
        for key, parameter in signature.parameters.items()
        if key != name
    ]
    at = list(signature.parameters).index(name)
    parameters = [*own[:at], *in_place, *own[at:], *last]
    added = [parameter.name for parameter in (*in_place, *last)]

    @functools.wraps(command)
    def with_value(**options: Any) -> None:
        given = {key: options.pop(key) for key in added}
        command(**{name: build(**given)}, **options)

    with_value.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    with_value.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return with_value


def command_group(name: str, help: str) -> typer.Typer:
    """A command group (`tfxp data`, `tfxp edge`, `tfxp runs`, ...): called without a command, it shows its help.

    Args:
        name: The group's name on the command line.
        help: One line saying what its commands work on.

    Returns:
        The Typer app its commands register on, named in `COMMANDS` (`pipeline.cli.app`).
    """
    return typer.Typer(name=name, help=help, no_args_is_help=True)


_CONFIG_OPTIONS = (
    inspect.Parameter("config_file", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ConfigOption, default=None),
    inspect.Parameter("overrides", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=SetOption, default=None),
)


CommandInputs = Mapping[str, Path | None]
"""What a command reads, by the option that names it (`{"--config": path}`; None: not given), for
`foundation.path_rules.check_not_input`."""


def config_command(
    command: Callable[..., None], outputs: Mapping[str, str] | None = None, reads: str | None = None
) -> Callable[..., None]:
    """A command that reads the config: its `config` parameter becomes --config and --set (last), and it is called
    with the config they describe (`load_cli_config`), loaded before the command's own work starts.

    Args:
        command: A command function with a parameter `config` (a `TfxpConfig`), placed before the parameters that
            have defaults.
        outputs: The command's parameters that name files it writes, with their options (`{"out": "--out"}`): each
            is refused when it resolves to the --config file (`foundation.path_rules.check_not_input`), before the
            config is read.
        reads: A parameter of `command` (a `CommandInputs`, before the parameters that have defaults) that is
            given what the command reads instead of being an option: for the files it writes that are known only
            once the config is read (the assets under a folder, the manifests beside a spec), which it checks with
            `check_not_input` before it writes any.

    Returns:
        The command, for `@app.command(...)` or a `COMMANDS` entry.

    Example:
        @config_command
        def deploy_assets(config: TfxpConfig, out: OutOption, check: CheckOption = False) -> None: ...

        compile_command = config_command(compile_pipeline_file, outputs={"out": "--out"})
    """
    loaded = with_options(command, "config", load_cli_config, last=_CONFIG_OPTIONS)
    if not outputs and reads is None:
        return loaded

    @functools.wraps(loaded)
    def checked(**options: Any) -> None:
        read: CommandInputs = {"--config": options["config_file"]}
        for name, option in (outputs or {}).items():
            if options.get(name) is not None:
                check_not_input(options[name], read, option)
        if reads is not None:
            options[reads] = read
        loaded(**options)

    if reads is not None:  # given above, so not an option: out of the signature Typer reads
        signature = inspect.signature(loaded)
        kept = [parameter for parameter in signature.parameters.values() if parameter.name != reads]
        checked.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
    return checked


def writes(reads: str | None = None, **outputs: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`config_command` for a command that writes the files its parameters name: parameter=option, and `reads`
    (see there).

    Example:
        @writes(out="--out", reads="inputs")
        def compile_command(config: TfxpConfig, out: OutOption, inputs: CommandInputs) -> None: ...
    """
    return functools.partial(config_command, outputs=outputs, reads=reads)


def check_output_file(path: Path, option: str) -> Path:
    """`path` if a file can be written there: not a directory, and its parent a writable directory (or creatable).

    For paths that do not come from an option typed with `output_file` (which checks while parsing).

    Args:
        path: Where the command will write.
        option: The option's name for the message, e.g. `--json`.

    Returns:
        `path`, unchanged.

    Raises:
        UserError: naming the option, the path and what is wrong with it.
    """
    problem = path_problem(path, "output_file")
    if problem is not None:
        raise UserError(f"{option} {problem}")
    return path
