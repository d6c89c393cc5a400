"""One user-error base class, caught once at the CLI root; `warn` beside `fail`; the KFP options declared once
(issue 23, "Errors")."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest
from typer import _click as click  # Typer vendors Click; its commands and contexts are these classes
from typer.main import get_command
from typer.testing import CliRunner, Result

from foundation.errors import TfxpError
from pipeline.cli import app
from pipeline.cli.app import COMMANDS
from pipeline.cli.console import warn

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("foundation", "components", "edge", "pipeline", "serving")
# Exceptions that are not user errors: a request's status, sent to clients with its code (serving/errors.py);
# private control flow of `tfxp run-spec`.
NOT_USER_ERRORS = {
    # The TFJob client's control flow, caught inside it (a transient API answer, a 409 to adopt from); what reaches
    # a user is a TfJobError.
    "ApiUnreachableError",
    "JobExistsError",
    # A stop signal unwinding to its cleanup (foundation/stop_request.py), like KeyboardInterrupt; the process then
    # exits with 143 (SIGTERM) or as Ctrl-C does.
    "StopRequested",
    # JSON nested too deep (foundation.bounded.parse_json), a ValueError like json.JSONDecodeError: each caller
    # catches it with the other malformed JSON and says which file or answer, and how to fix it.
    "JsonTooDeepError",
    "ServingError",
    "InvalidArgumentError",
    "NotFoundError",
    "FailedPreconditionError",
    "UnavailableError",
    "DeadlineExceededError",
    "ResourceExhaustedError",
    "RequestTooLargeError",
    "RequestTimeoutError",
    "UnsupportedMediaTypeError",
    "UnimplementedError",
    "InternalError",
    "CancelledError",
    "_TaskFailedError",
}
BUILTIN_EXCEPTIONS = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
}


def _product_files() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py"))


def _base_names(node: ast.ClassDef) -> list[str]:
    return [
        base.id if isinstance(base, ast.Name) else base.attr
        for base in node.bases
        if isinstance(base, ast.Name | ast.Attribute)
    ]


def _exception_classes() -> dict[str, tuple[list[str], str]]:
    """Every class in product code whose bases reach a built-in exception: name → (base names, where)."""
    classes = {
        node.name: (_base_names(node), f"{path.relative_to(ROOT)}:{node.lineno}")
        for path in _product_files()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }

    def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in BUILTIN_EXCEPTIONS:
            return True
        return name in classes and name not in seen and any(is_exception(b, seen | {name}) for b in classes[name][0])

    return {name: entry for name, entry in classes.items() if is_exception(name)}


def _derives_from_tfxp_error(name: str, classes: dict[str, tuple[list[str], str]]) -> bool:
    return name == "TfxpError" or (
        name in classes and any(_derives_from_tfxp_error(b, classes) for b in classes[name][0])
    )


def test_every_exception_class_in_product_code_is_a_tfxp_error() -> None:
    classes = _exception_classes()
    assert len(classes) > 30  # the scan finds the classes (DataError, SubmitError, ...)
    strays = [
        f"{where} {name}"
        for name, (_, where) in classes.items()
        if name not in NOT_USER_ERRORS and not _derives_from_tfxp_error(name, classes)
    ]
    assert not strays, f"derive these from foundation.errors.TfxpError (or list them in NOT_USER_ERRORS): {strays}"


def test_the_converted_errors_keep_their_other_bases() -> None:
    from edge.errors import EdgeError
    from foundation.contract import LabelMapError
    from foundation.data.errors import DataError
    from pipeline.config import ConfigError
    from pipeline.kubeflow.client.cron import ScheduleInputError
    from pipeline.kubeflow.client.runs import RunFailedError, SubmitError
    from pipeline.kubeflow.compiler.params import ParamError
    from pipeline.report.gather import ReportError
    from serving.checkov_scan import CheckToolError
    from serving.config_error import ServingConfigError

    for error in (LabelMapError, DataError, EdgeError, ConfigError, ScheduleInputError, ParamError, ReportError):
        assert issubclass(error, TfxpError) and issubclass(error, ValueError), error
    assert issubclass(ServingConfigError, TfxpError) and issubclass(ServingConfigError, ValueError)
    for error in (SubmitError, RunFailedError, CheckToolError):
        assert issubclass(error, TfxpError) and issubclass(error, RuntimeError), error


def _raised_name(node: ast.Raise) -> str | None:
    target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def test_cli_commands_raise_only_user_errors_or_exits() -> None:
    """A command raises a TfxpError (the root prints it) or `fail(...)`/`typer.Exit` for another exit status;
    never `fail(str(error))` around an error that could be raised as it is."""
    classes = _exception_classes()
    allowed = {"fail", "Exit", "BadParameter"}
    problems = []
    for path in sorted((ROOT / "pipeline" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Raise) and node.exc is not None:
                name = _raised_name(node)
                if name not in allowed and not (name and _derives_from_tfxp_error(name, classes)):
                    problems.append(f"{where} raises {name}")
            if path.name == "app.py":  # the root: the one place that turns an error into `fail(str(error))`
                continue
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "fail" and node.args:
                message = node.args[0]
                if isinstance(message, ast.Call) and getattr(message.func, "id", None) == "str":
                    problems.append(f"{where} re-wraps an error with fail(str(...)): let it reach the root")
    assert not problems


def test_warn_prints_the_message_literally(capsys: pytest.CaptureFixture[str]) -> None:
    warn("[bold]x[/bold] /data/[/x] :-1:")
    assert capsys.readouterr().err == "warning: [bold]x[/bold] /data/[/x] :-1:\n"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def assert_one_error_line(result: Result, text: str) -> None:
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert len(errors) == 1 and text in errors[0], result.output
    assert "Traceback" not in result.output


# One user error per command family that had its own `@user_errors(...)` list; each answers before TensorFlow loads.
@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("data", "inspect", "{tmp}/empty"), "labels.txt does not exist"),
        (("edge", "verify", "{tmp}/m.tflite", "--examples", "{tmp}/empty", "--arch", "x86"), "unknown --arch x86"),
        (("schedule", "create", "--host", "http://127.0.0.1:1"), "give a compiled pipeline file"),
        (("submit", "{tmp}/p.yaml", "--host", "http://127.0.0.1:1", "--param", "nope"), "--param 'nope' is not"),
        (("runs", "get", "x", "--host", "http://127.0.0.1:1"), "cannot reach Kubeflow Pipelines at http://127.0.0.1:1"),
        (("predict", "{tmp}/m.tflite", "--examples", "{tmp}/empty"), "pass image files or --examples DIR"),
        (("report", "{tmp}/empty"), "has no run-summary.json"),
    ],
)
def test_a_user_error_is_one_error_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], text: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "m.tflite").write_bytes(b"")
    (tmp_path / "p.yaml").write_text("")
    result = invoke(*(arg.format(tmp=tmp_path) for arg in args))
    assert_one_error_line(result, text)


DEEP_JSON = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it
CANARY = ("--set", "serving.rollout=canary", "--set", "serving.version_policy=specific", "--serving-base")


# Issue 35, class 8: each ended in a RecursionError traceback with exit status 1.
@pytest.mark.parametrize(
    ("file", "args", "text"),
    [
        ("out/run-summary.json", ("report", "{tmp}/out"), "run summary {tmp}/out/run-summary.json is not JSON (JSON"),
        ("b/tfxp_rollout/state.json", ("rollout", "status", *CANARY, "{tmp}/b"), "the rollout state {tmp}/b/tfxp_"),
        (
            "b/tfxp_rollout/decisions/00000001.json",
            ("rollout", "status", *CANARY, "{tmp}/b"),
            "the rollout decision {tmp}/b/tfxp_rollout/decisions/00000001.json is not JSON (JSON nested too deep",
        ),
    ],
)
def test_json_nested_too_deep_is_one_error_line(tmp_path: Path, file: str, args: tuple[str, ...], text: str) -> None:
    (tmp_path / file).parent.mkdir(parents=True)
    (tmp_path / file).write_text(DEEP_JSON)
    result = invoke(*(arg.format(tmp=tmp_path) for arg in args))
    assert_one_error_line(result, text.format(tmp=tmp_path))


def _raise_a_user_error() -> None:
    raise TfxpError("data.path /x [bold]is[/bold] not a directory; pass --set data.path=DIR")


def _raise_an_os_error() -> None:
    raise PermissionError(13, "Permission denied", "/out/x")


def _raise_a_bug() -> None:
    raise KeyError("a bug")


@pytest.fixture
def fake_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("user-error", "os-error", "bug"):
        function = {"user-error": _raise_a_user_error, "os-error": _raise_an_os_error, "bug": _raise_a_bug}[name]
        monkeypatch.setitem(COMMANDS, name, f"{__name__}:{function.__name__}")


@pytest.mark.usefixtures("fake_commands")
def test_the_root_prints_any_tfxp_error_and_exits_2() -> None:
    assert_one_error_line(
        invoke("user-error"), "data.path /x [bold]is[/bold] not a directory; pass --set data.path=DIR"
    )
    assert_one_error_line(invoke("os-error"), "[Errno 13] Permission denied: '/out/x'")


@pytest.mark.usefixtures("fake_commands")
def test_an_unexpected_exception_keeps_its_traceback() -> None:
    result = invoke("bug")
    assert isinstance(result.exception, KeyError) and result.exit_code == 1
    assert "error:" not in result.output


KFP_COMMANDS = [
    ("submit",),
    ("pipeline", "upload"),
    ("pipeline", "list"),
    ("pipeline", "versions"),
    ("schedule", "create"),
    ("schedule", "list"),
    ("schedule", "pause"),
    ("schedule", "resume"),
    ("schedule", "delete"),
    ("runs", "list"),
    ("runs", "get"),
    ("runs", "terminate"),
    ("runs", "retry"),
]


CONFIG_COMMANDS = [("compile",), ("serve",), ("predict",), ("loadtest",), ("deploy-assets",), ("data", "inspect")]


def _click_command(path: tuple[str, ...]) -> click.Command:
    """The Click command at `path` below the root, e.g. ("runs", "list")."""
    root = get_command(app)
    context = click.Context(root)
    command: click.Command | None = root
    for name in path:
        assert command is not None and hasattr(command, "get_command"), path
        command = command.get_command(context, name)
    assert command is not None
    return command


def _option_names(command: click.Command) -> list[str]:
    return [option for param in command.params for option in getattr(param, "opts", [])]


@pytest.mark.parametrize("path", KFP_COMMANDS, ids=" ".join)
def test_every_kfp_command_takes_the_connection_options_once(path: tuple[str, ...]) -> None:
    command = _click_command(path)
    options = _option_names(command)
    for option in ("--host", "--namespace", "--request-timeout"):
        assert options.count(option) == 1, (path, options)
    host = next(param for param in command.params if "--host" in param.opts)
    assert host.required and host.envvar == "KF_PIPELINES_ENDPOINT"


@pytest.mark.parametrize("path", CONFIG_COMMANDS, ids=" ".join)
def test_every_config_command_takes_config_and_set_once_and_last(path: tuple[str, ...]) -> None:
    options = _option_names(_click_command(path))
    assert options[-4:] == ["--config", "-c", "--set", "-s"], (path, options)
    assert options.count("--config") == options.count("--set") == 1, (path, options)


def test_a_kfp_command_gets_the_client_its_options_describe(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.cli import kubeflow

    made = []

    class FakeClient:
        host = "http://kfp.example:8080"

        def terminate(self, run_id: str) -> object:
            return type("Summary", (), {"state": "RUNNING"})()

    def connect(host: str, namespace: str | None, request_timeout: float) -> FakeClient:
        made.append((host, namespace, request_timeout))
        return FakeClient()

    monkeypatch.setattr(kubeflow, "connect", connect)
    result = invoke("runs", "terminate", "run-1", "--host", "http://kfp.example:8080", "--namespace", "ml")
    assert result.exit_code == 0, result.output
    assert made == [("http://kfp.example:8080", "ml", 60.0)]
    assert "terminating run run-1 (was RUNNING)" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ("predict", "{image}", "--rest", "http://127.0.0.1:1", "--timeout", "1e308"),
        ("predict", "{image}", "--rest", "http://127.0.0.1:1", "--wait", "inf"),
        ("loadtest", "--image", "{image}", "--rest", "http://127.0.0.1:1", "--timeout", "inf"),
        ("runs", "list", "--host", "http://127.0.0.1:1", "--request-timeout", "1e308"),
        ("submit", "{image}", "--host", "http://127.0.0.1:1", "--wait", "--timeout", "inf"),
    ],
    ids=["predict-timeout", "predict-wait", "loadtest-timeout", "kfp-request-timeout", "submit-wait-timeout"],
)
def test_a_timeout_past_what_python_can_wait_is_a_usage_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    # found by the second adversarial pass over issue 35: these ended in "OverflowError: timestamp out of range for
    # platform time_t" (or "cannot convert float infinity to integer") with a traceback
    image = tmp_path / "a.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
    result = CliRunner().invoke(app, [arg.format(image=image) for arg in args], env={"COLUMNS": "250"})
    output = " ".join(result.output.split())
    assert result.exit_code == 2, (result.exit_code, output, result.exception)
    assert "Input should be less than or equal to" in output
