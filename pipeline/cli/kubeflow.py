"""`tfxp compile`, `tfxp submit`, `tfxp run-spec` (a compiled spec run here), and the options every KFP command
shares (`kfp_command` declares --host, --namespace and --request-timeout once).

The work happens in the `pipeline.kubeflow` package (compile + patch, submit, auth, runs);
these handlers parse options and print. kfp and TFX are imported inside the commands
(`pipeline.kubeflow.client.runs` and `.params`, imported here for their error types, import neither).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from foundation.bounded import tail_lines
from pipeline.cli.console import console, error_console, fail, say, warn
from pipeline.cli.options import (
    MAX_REQUEST_SECONDS,
    MAX_WAIT_SECONDS,
    CommandInputs,
    kfp_host,
    output_dir,
    output_file,
    path_rule,
    with_options,
    writes,
)

if TYPE_CHECKING:
    from pipeline.config import TfxpConfig
    from pipeline.kubeflow.client.runs import RunStatus, SubmittedRun
    from pipeline.kubeflow.client.submit import KfpRunClient
    from pipeline.kubeflow.compiler.compile import CompileResult
    from pipeline.kubeflow.emulator.spec_run import SpecRun, TaskRun

# Exit codes of `tfxp submit --wait` beyond the shared 2 (bad input, unreachable host).
EXIT_RUN_FAILED = 1
EXIT_WAIT_TIMEOUT = 3


def _print_compiled(result: CompileResult) -> None:
    from pipeline.kubeflow.compiler.spec import container_tasks, load_pipeline_doc, pipeline_tasks

    spec = load_pipeline_doc(result.path).pipeline_spec
    containers = dict(container_tasks(spec))
    tasks = pipeline_tasks(spec)
    table = Table(
        title=Text(f"{result.path} ({spec.pipeline_info.display_name or spec.pipeline_info.name})"), show_edge=False
    )
    for column in ("task", "cpu", "memory", "accelerator", "retries", "cache"):
        table.add_column(column)
    for task in result.tasks:
        body = tasks[task]
        resources = containers[task].resources if task in containers else None
        accelerator = resources.accelerator if resources is not None else None
        table.add_row(
            task,
            resources.resource_cpu_limit if resources is not None else "",
            resources.resource_memory_limit if resources is not None else "",
            f"{accelerator.resource_type} × {accelerator.resource_count}"
            if accelerator and accelerator.resource_count
            else "",
            str(body.retry_policy.max_retry_count),
            "on" if body.caching_options.enable_cache else "off",
        )
    console.print(table)
    unset = "none compiled (a run takes --pipeline-root, else the kfp-launcher ConfigMap's, else KFP's MinIO)"
    say(f"pipeline root: {spec.default_pipeline_root or unset}")
    for name, default in result.parameters.items():
        say(f"run parameter {name} (default {' '.join(default.split())})")


@writes(out="--out", reads="inputs")
def compile_command(
    config: TfxpConfig,
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", parser=output_file, metavar="FILE", help="Pipeline YAML to write (what `tfxp submit` sends)."
        ),
    ],
    inputs: CommandInputs,
) -> None:
    """Compile the pipeline for Kubeflow Pipelines (KFP v2 IR YAML) with resources, retries and caching set.

    Compiling stages nothing: the Trainer's code is referenced by dotted path and ships in `kubeflow.image`.
    """
    from pipeline.kubeflow.compiler.compile import compile_pipeline

    result = compile_pipeline(config, out, inputs)  # nor a file beside the spec over --config
    _print_compiled(result)
    for path in result.beside:
        say(f"beside it: {path}")
    if result.beside:
        say(
            f"the pipeline's service account needs that RBAC: kubectl apply -n {config.kubeflow.namespace} "
            f"-f {result.beside[-1]}"
        )
    for warning in result.warnings:
        warn(warning)
    say(f"submit with: tfxp submit {result.path} --host URL --wait")


HostOption = Annotated[
    str,
    typer.Option(
        "--host",
        envvar="KF_PIPELINES_ENDPOINT",
        parser=kfp_host,
        metavar="URL",
        help="KFP API/UI address with scheme, e.g. http://localhost:8080.",
    ),
]
PackageArgument = Annotated[
    Path,
    typer.Argument(
        parser=path_rule("existing_file", hint="compile it with `tfxp compile --out FILE`"),
        help="Pipeline YAML from `tfxp compile`.",
    ),
]
NamespaceOption = Annotated[str | None, typer.Option("--namespace", help="Namespace (multi-user KFP).")]
RequestTimeoutOption = Annotated[
    float,
    typer.Option("--request-timeout", min=0.1, max=MAX_REQUEST_SECONDS, help="Seconds each API call may take."),
]
PipelineRootOption = Annotated[
    str | None,
    typer.Option(
        "--pipeline-root",
        metavar="URI",
        help="Bucket URL for the run's artifacts (sent as its runtime_config.pipeline_root); "
        "default the spec's defaultPipelineRoot.",
    ),
]
ExperimentOption = Annotated[
    str | None, typer.Option("--experiment", help="Experiment of the run(s); default the pipeline's name.")
]
ParamOption = Annotated[
    list[str] | None,
    typer.Option(
        "--param", "-p", help="Run parameter NAME=VALUE, checked against the pipeline's parameters; repeatable."
    ),
]


def connect(host: str, namespace: str | None, request_timeout: float) -> KfpRunClient:
    """The KFP client for `--host`, with credentials from the environment (no request is made yet).

    Raises:
        SubmitError: a host without a scheme, or unusable credentials.
    """
    from pipeline.kubeflow.client.auth import KfpAuth
    from pipeline.kubeflow.client.submit import KfpRunClient

    return KfpRunClient(host, namespace=namespace, auth=KfpAuth.from_env(), request_timeout=request_timeout)


_HOST = (inspect.Parameter("host", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=HostOption),)
_CONNECTION = (
    inspect.Parameter("namespace", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=NamespaceOption, default=None),
    inspect.Parameter(
        "request_timeout", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=RequestTimeoutOption, default=60.0
    ),
)


def kfp_command(command: Callable[..., None]) -> Callable[..., None]:
    """A command that talks to the KFP API: its `client` parameter becomes --host (in its place) plus --namespace
    and --request-timeout (last), and it is called with the client they describe (`connect`).

    Typer reads the options from the returned function's signature (`with_options`), so `--help` lists them as if
    each command declared them.

    Args:
        command: A command function with a parameter `client` (a `KfpRunClient`) where --host belongs: before
            the parameters that have defaults.

    Returns:
        The command for `@app.command(...)`.

    Example:
        @runs_app.command("terminate")
        @kfp_command
        def runs_terminate(run_id: RunId, client: KfpRunClient) -> None: ...
    """
    # `connect` is looked up when the command runs, so a test can replace it.
    return with_options(command, "client", lambda **options: connect(**options), in_place=_HOST, last=_CONNECTION)


RunNameOption = Annotated[str | None, typer.Option("--run-name", help="Run name; default <pipeline>-<UTC time>.")]
SubmitNoCacheOption = Annotated[
    bool, typer.Option("--no-cache", help="Run every task afresh: KFP caching off for this run only.")
]
WaitOption = Annotated[
    bool, typer.Option("--wait", help="Poll until the run finishes; non-zero exit unless it succeeded.")
]
WaitTimeoutOption = Annotated[
    float, typer.Option("--timeout", min=1, max=MAX_WAIT_SECONDS, help="Seconds to wait for the run (--wait).")
]
PollOption = Annotated[
    float, typer.Option("--poll", min=0.05, max=MAX_WAIT_SECONDS, help="Seconds between polls (--wait).")
]


@kfp_command
def submit_command(
    package: PackageArgument,
    client: KfpRunClient,
    experiment: ExperimentOption = None,
    run_name: RunNameOption = None,
    params: ParamOption = None,
    no_cache: SubmitNoCacheOption = False,
    wait: WaitOption = False,
    timeout: WaitTimeoutOption = 24 * 3600,
    poll: PollOption = 15.0,
    pipeline_root: PipelineRootOption = None,
) -> None:
    """Submit a compiled pipeline to Kubeflow Pipelines; print the run id and URL.

    Credentials come only from the environment: TFXP_KFP_TOKEN, KF_PIPELINES_SA_TOKEN_PATH or TFXP_KFP_COOKIE.

    Exit codes: 0 ok (with --wait: succeeded), 1 the run failed, 2 bad input or API error, 3 --wait timed out.

    Each API call gives up after --request-timeout seconds; --timeout bounds the whole wait.

    The run's pipeline root is --pipeline-root, else the spec's defaultPipelineRoot (KFP reads only the run's);
    a local path is refused, since pods cannot reach it.
    """
    from pipeline.kubeflow.compiler.params import parse_param_entries

    raw = parse_param_entries(params or [])
    run = client.submit(
        package,
        experiment=experiment,
        run_name=run_name,
        params=raw,
        enable_caching=False if no_cache else None,
        pipeline_root=pipeline_root,
    )
    for warning in run.warnings:
        warn(warning)
    say(f"run id: {run.run_id}")
    say(f"run:    {run.url}")
    say(f"experiment: {run.experiment}")
    say(f"pipeline root: {run.pipeline_root or '(none sent: the KFP server default)'}")
    if wait:
        _wait_for(client, run, timeout, poll)


def _wait_for(client: KfpRunClient, run: SubmittedRun, timeout: float, poll: float) -> None:
    """`--wait`: the run's progress as it changes, then its end (a failure or a timeout exits non-zero)."""
    from pipeline.kubeflow.client.runs import RunFailedError, RunTimeoutError, progress_line

    shown = [""]

    def report(status: RunStatus, elapsed: float) -> None:
        line = progress_line(status, elapsed, run.tasks)
        # Print changes only; the elapsed prefix alone is not news.
        if line.split("] ", 1)[1] != shown[0]:
            shown[0] = line.split("] ", 1)[1]
            say(line)

    try:
        final = client.wait(run.run_id, timeout=timeout, poll_seconds=poll, on_status=report)
    except RunFailedError as error:
        raise fail(f"{error}; logs: {run.url}", code=EXIT_RUN_FAILED) from None
    except RunTimeoutError as error:
        check = f"check it with `tfxp runs get {run.run_id} --host {client.host}`"
        raise fail(f"{error}; {check} or at {run.url}", code=EXIT_WAIT_TIMEOUT) from None
    console.print(f"[green]✓[/] run {run.run_id} {final.state}", highlight=False)


BackendOption = Annotated[
    str,
    typer.Option(
        "--backend",
        help="kfp: open-source KFP's driver, launcher and cache; vertex: Vertex AI's executor input (no cache).",
    ),
]
SpecRootOption = Annotated[
    str | None,
    typer.Option(
        "--pipeline-root",
        metavar="URI",
        help="The run's pipeline root: kfp minio://bucket/path or s3://… (default minio://mlpipeline/v2/artifacts, "
        "kept under --state); vertex a local folder standing for gs:// (default <state>/vertex-root).",
    ),
]
StateOption = Annotated[
    Path | None,
    typer.Option(
        "--state",
        parser=output_dir,
        metavar="DIR",
        help="The emulated backend: object store, pods, MLMD and cache, logs, run records; default <spec>-runs/. "
        "A later run with the same --state sees this one's cache.",
    ),
]
PublishLogsOption = Annotated[
    bool, typer.Option("--publish-logs/--no-publish-logs", help="KFP's executor-logs output (default on).")
]
SpecNoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Run every task (as `tfxp submit --no-cache`).")]
SpecParamOption = Annotated[
    list[str] | None, typer.Option("--param", "-p", help="A pipeline parameter, `name=value`; repeatable.")
]


def run_spec_command(
    package: PackageArgument,
    backend: BackendOption = "kfp",
    pipeline_root: SpecRootOption = None,
    state: StateOption = None,
    publish_logs: PublishLogsOption = True,
    no_cache: SpecNoCacheOption = False,
    params: SpecParamOption = None,
) -> None:
    """Run a compiled pipeline spec on this machine, task by task, as a KFP backend runs it.

    Each task's container command runs exactly as compiled, with this environment's Python, around what the
    backend does (derived from its source): the executor input the driver builds, the launcher's download and
    upload through an emulated object store, a fresh pod folder per task, KFP's cache (a second run shows which
    tasks KFP would serve from it) and the exit handler's final status. Not emulated: images, resources,
    retries, parallelism, the KFP API and UI.

    Exit codes: 0 the run succeeded, 1 a task failed, 2 bad input.
    """
    from pipeline.kubeflow.compiler.params import parse_param_entries
    from pipeline.kubeflow.emulator.local_run import run_spec

    raw = parse_param_entries(params or [])
    run = run_spec(
        package,
        raw,
        on_task=_print_task,
        backend=backend,
        pipeline_root=pipeline_root,
        state_dir=state,
        publish_logs=publish_logs,
        cache=not no_cache,
    )
    _print_spec_run(run)


def _print_task(task: TaskRun) -> None:
    """One line per task of `tfxp run-spec` as it finishes: its mark, state, time and why it failed or was cached."""
    mark = {"SUCCEEDED": "[green]✓[/]", "CACHED": "[cyan]≡[/]", "FAILED": "[red]✗[/]"}.get(task.state, "[yellow]-[/]")
    if task.state == "CACHED":
        detail = f" (KFP's cache: the execution of run {task.cached_from})"
    else:
        detail = f" {task.error}" if task.state != "SUCCEEDED" else ""
    said = f"{task.name} {task.state.lower()} {task.seconds:.1f}s{detail}"
    console.print(f"{mark} {escape(said)}", highlight=False)


def _print_spec_run(run: SpecRun) -> None:
    """The end of `tfxp run-spec`: where the run is, the versions it pushed, and a failed task's log tail (exit 1)."""
    say(
        f"run {run.run_id} ({run.backend}): {run.state.lower()}; artifacts: {run.run_dir}; "
        f"object store, logs and cache: {run.state_dir}"
    )
    pushed = [task.outputs[key]["metadata"] for task in run.tasks if task.state == "SUCCEEDED" for key in task.outputs]
    for metadata in pushed:
        if metadata.get("pushed_version"):
            say(f"pushed version {metadata['pushed_version']}: {metadata.get('pushed_destination', '')}")
    if run.state != "SUCCEEDED":
        failed = next(task for task in run.tasks if task.state == "FAILED")
        if failed.log and Path(failed.log).is_file():
            tail = tail_lines(failed.log, 15)
            error_console.print("\n".join(tail), highlight=False, markup=False, soft_wrap=True)
        raise fail(failed.error, code=EXIT_RUN_FAILED)
