"""`tfxp serve`, `tfxp deploy-assets`: running the local model server and writing TF Serving's deployment.

The work happens in `serving/`; these handlers map the config and options onto it and print results. The
client commands, `tfxp predict` and `tfxp loadtest`, are `pipeline.cli.predict`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.markup import escape

from foundation.stop_request import StopRequest
from pipeline.cli.console import UserError, console, fail, warn
from pipeline.cli.options import (
    CommandInputs,
    GrpcPortOption,
    ModelNameOption,
    RestPortOption,
    config_command,
    existing_file,
    output_dir,
    path_rule,
    writes,
)
from pipeline.cli.quiet import keep_log
from pipeline.config import TfxpConfig
from pipeline.layout import output_layout
from serving.k8s_check import KUBERNETES_VERSION, Finding, check_deploy_assets

if TYPE_CHECKING:
    from serving.k8s_rollout import RolloutVersions
    from serving.model_config import ModelConfig
    from serving.rollout.layout import Track
    from serving.server import ModelServer
    from serving.server_options import ServerOptions

ModelBaseOption = Annotated[
    Path | None,
    typer.Option(
        "--model-base",
        parser=path_rule(
            "existing_dir",
            hint="run `tfxp run` first (it pushes to OUT/serving/<model>/) or pass --model-base DIR "
            "(a directory of numeric version subdirectories)",
        ),
        metavar="DIR",
        help="Model base dir with numeric version subdirs (default: the pushed model).",
    ),
]
ModelConfigFileOption = Annotated[
    Path | None,
    typer.Option(
        "--model-config-file",
        parser=existing_file,
        metavar="FILE",
        help="A TF Serving models.config instead of one model.",
    ),
]
TrackOption = Annotated[
    Literal["stable", "canary"] | None,
    typer.Option(
        "--track",
        help="Serve one rollout track (serving.rollout: canary): its models.config, re-read as decisions move it.",
    ),
]
HostOption = Annotated[str, typer.Option("--host", help="Interface to bind; 0.0.0.0 accepts remote clients.")]
BatchingOption = Annotated[
    bool | None,
    typer.Option("--batching/--no-batching", help="Server-side batching (default serving.enable_batching)."),
]
OutOption = Annotated[
    Path, typer.Option("--out", parser=output_dir, metavar="DIR", help="Directory for the assets (created).")
]
CheckOption = Annotated[
    bool,
    typer.Option(
        "--check",
        help="Then validate the manifests: Kubernetes schemas (strict), name rules, the restricted Pod "
        "Security Standard and checkov; exit 1 when any check fails.",
    ),
]


def _model_configs(config: TfxpConfig, model_base: Path | None, model_name: str | None) -> list[ModelConfig]:
    from serving.model_config import model_config_for, version_holders_below

    base = model_base or Path(output_layout(config).serving_base)
    if not base.is_dir():
        raise UserError(
            f"model base path {base} does not exist; run `tfxp run` first (it pushes to OUT/serving/<model>/) "
            "or pass --model-base DIR (a directory of numeric version subdirectories)"
        )
    holders = version_holders_below(base)
    if holders:
        raise UserError(
            f"model base path {base} holds no versions, but {', '.join(holders)} below it does; "
            f"pass --model-base {base / holders[0]} (a model's base path holds numeric versions)"
        )
    return [model_config_for(config.serving, base, model_name)]


@config_command
def serve(
    config: TfxpConfig,
    model_base: ModelBaseOption = None,
    model_name: ModelNameOption = None,
    model_config_file: ModelConfigFileOption = None,
    track: TrackOption = None,
    host: HostOption = "127.0.0.1",
    grpc_port: GrpcPortOption = None,
    rest_port: RestPortOption = None,
    batching: BatchingOption = None,
) -> None:
    """Serve models over TF Serving's gRPC and REST APIs, until Ctrl-C.

    Production serves the pushed model with TensorFlow Serving (`tfxp deploy-assets` writes its docker and
    Kubernetes setup). This command is a TF Serving-compatible stand-in for development and CI, where no
    `tensorflow_model_server` binary exists: same API, status codes and errors, version policies, hot swap of
    new versions, version labels, server-side batching, warmup, and Prometheus metrics at
    /monitoring/prometheus/metrics.
    """
    from serving.model_config import read_model_config_file
    from serving.server import ModelServer
    from serving.server_options import server_options, set_tensorflow_threads

    serving = config.serving
    set_tensorflow_threads(serving.intra_op_threads, serving.inter_op_threads)
    # Labels in the served config turn on --allow_version_labels_for_unavailable_models, as the deploy assets do.
    labelled = model_config_file is not None and any(m.labels for m in read_model_config_file(model_config_file))
    options = server_options(serving, host, grpc_port, rest_port, batching, labelled_config=labelled)
    if track is not None:
        server = _track_server(config, track, model_base, options)
    elif model_config_file is not None:
        server = ModelServer(options=options, model_config_file=model_config_file)
    else:
        server = ModelServer(_model_configs(config, model_base, model_name), options)
    # SIGTERM (Kubernetes stopping the pod) and Ctrl-C are recorded, not raised (foundation/stop_request.py): the
    # loop below sees them and stops the server on its normal path.
    with StopRequest() as stop:
        _serve_until_stopped(server, options, stop)


def _track_server(config: TfxpConfig, track: Track, model_base: Path | None, options: ServerOptions) -> ModelServer:
    """A server of one rollout track: the track's models.config under the model base, served from that base."""
    from serving.rollout.layout import track_config_path
    from serving.server import ModelServer

    if config.serving.rollout != "canary":
        raise UserError("--track serves a rollout track; set serving.rollout: canary (and version_policy: specific)")
    base = Path(model_base or output_layout(config).serving_base)
    path = Path(track_config_path(str(base), track))
    if not path.is_file():
        raise UserError(
            f"{path} does not exist: nothing was pushed under serving.rollout: canary yet; run `tfxp run --set "
            "serving.rollout=canary --set serving.version_policy=specific` first (its Pusher writes the tracks)"
        )
    return ModelServer(options=options, model_config_file=path, served_from=base.resolve())


def _serve_until_stopped(server: ModelServer, options: ServerOptions, stop: StopRequest) -> None:
    server.start()
    for manager in server.core.models():
        versions = manager.available_versions()
        console.print(
            f"model [bold]{escape(manager.config.name)}[/] from {escape(str(manager.config.base_path))}: "
            f"versions {versions or 'none yet (polling)'}",
            highlight=False,
        )
    rest = server.rest_url if server.rest_port else "off"
    log = keep_log()
    console.print(
        f"serving gRPC on {server.grpc_target}, REST on {rest} "
        f"(batching {'on' if options.batching else 'off'}); Ctrl-C stops" + (f"; log: {log}" if log else ""),
        highlight=False,
        markup=False,
    )
    try:
        while not stop.wait(0.5):
            pass
    finally:
        console.print("stopping: finishing in-flight requests, unloading models", highlight=False)
        server.stop()


def _rollout_versions(config: TfxpConfig) -> RolloutVersions | None:
    """Under `serving.rollout: canary`, the rollout state's stable and canary (None before the first push)."""
    if config.serving.rollout != "canary":
        return None
    from serving.k8s_rollout import RolloutVersions
    from serving.rollout.state import read_rollout

    state = read_rollout(output_layout(config).serving_base)
    return RolloutVersions(state.stable, state.canary or 0) if state.stable is not None else None


def _print_findings(findings: list[Finding]) -> None:
    style = {"ok": "[green]ok[/]  ", "warn": "[yellow]warn[/]", "fail": "[bold red]FAIL[/]"}
    for finding in findings:
        console.print(f"{style[finding.status]} {escape(finding.message)}", highlight=False, soft_wrap=True)


@writes(reads="inputs")
def deploy_assets(config: TfxpConfig, out: OutOption, inputs: CommandInputs, check: CheckOption = False) -> None:
    """Write TF Serving deployment assets from the config: models.config, batching and monitoring configs,
    docker run scripts (CPU/GPU), Kubernetes Namespace/ConfigMap/Deployment/Service/HPA/PodDisruptionBudget/
    NetworkPolicy and a KServe InferenceService."""
    from serving.deploy import WARNINGS_FILE, deploy_warnings, write_deploy_assets
    from serving.options import deployed_serving, local_model_dir

    pushes = output_layout(config).serving_base
    serving = deployed_serving(config.serving, pushes)
    # No asset over the --config file: `--out D --config D/kubernetes/service.yaml` is refused before any write.
    written = write_deploy_assets(
        serving, out, local_model_dir(config.serving, pushes), _rollout_versions(config), inputs=inputs
    )
    for path in written:
        console.print(f"wrote {escape(str(path))}", highlight=False)
    if serving.base_path != config.serving.base_path:
        console.print(
            f"models served from {escape(serving.base_path)}, where pushes go (set serving.base_path to change)",
            highlight=False,
            soft_wrap=True,
        )
    warnings = deploy_warnings(serving)
    for warning in warnings:
        warn(warning)
    if warnings:
        console.print(f"(the warnings are also in {escape(str(out / WARNINGS_FILE))})", highlight=False)
    if check:
        _check_assets(out)


def _check_assets(out: Path) -> None:
    console.print(f"checking {escape(str(out))} (Kubernetes {KUBERNETES_VERSION} schemas, strict):", highlight=False)
    report = check_deploy_assets(out)
    _print_findings(report.findings)
    if not report.ok:
        raise fail(f"the check of {out} failed: see the FAIL lines above", code=1)
    console.print("check passed", highlight=False)
