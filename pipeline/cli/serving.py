"""`tfxp serve`, `tfxp predict`, `tfxp loadtest`, `tfxp deploy-assets`: serving the pushed model.

The work happens in `serving/`; these handlers map the config and options onto it and print results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from foundation.paths import is_remote
from foundation.stop_request import StopRequest
from pipeline.cli.console import UserError, console, fail, warn
from pipeline.cli.options import (
    ConfigOption,
    GrpcOption,
    GrpcPortOption,
    RestOption,
    RestPortOption,
    SetOption,
    check_output_file,
    existing_dir,
    existing_file,
    load_cli_config,
    output_dir,
    output_file,
    path_rule,
)
from pipeline.cli.quiet import keep_log
from pipeline.config import TfxpConfig
from pipeline.layout import output_layout
from serving.k8s_check import KUBERNETES_VERSION, Finding, check_deploy_assets

if TYPE_CHECKING:
    from serving.base_client import ServingClient
    from serving.model_config import ModelConfig
    from serving.options import ServingOptions
    from serving.server import ModelServer, ServerOptions

ModelNameOption = Annotated[str | None, typer.Option("--model-name", help="Model name (default serving.model_name).")]
TimeoutOption = Annotated[float, typer.Option("--timeout", min=0.001, help="Seconds each request may take.")]
WaitOption = Annotated[
    float, typer.Option("--wait", min=0, help="Keep retrying an unreachable server for this many seconds.")
]


def _model_configs(config: TfxpConfig, model_base: Path | None, model_name: str | None) -> list[ModelConfig]:
    from foundation.publish import is_version_name
    from serving.model_config import ModelConfig, VersionPolicy

    serving = config.serving
    base = model_base or Path(output_layout(config).serving_base)
    if not base.is_dir():
        raise UserError(
            f"model base path {base} does not exist; run `tfxp run` first (it pushes to OUT/serving/<model>/) "
            "or pass --model-base DIR (a directory of numeric version subdirectories)"
        )
    children = [child for child in base.iterdir() if child.is_dir()]
    if children and not any(is_version_name(child.name) for child in children):
        # An easy mistake: OUT/serving instead of OUT/serving/<model>; the server would poll it forever.
        holders = [
            child.name for child in children if any(is_version_name(g.name) for g in child.iterdir() if g.is_dir())
        ]
        if holders:
            raise UserError(
                f"model base path {base} holds no versions, but {', '.join(sorted(holders))} below it does; "
                f"pass --model-base {base / sorted(holders)[0]} (a model's base path holds numeric versions)"
            )
    versions = serving.versions or tuple(sorted(set(serving.labels.values())))
    try:
        policy = VersionPolicy(serving.version_policy, serving.num_versions, versions)
    except ValueError as error:
        raise UserError(f"serving.version_policy: {error}") from None
    return [ModelConfig(model_name or serving.model_name, base, policy, serving.labels)]


def serve(
    model_base: Annotated[
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
    ] = None,
    model_name: ModelNameOption = None,
    model_config_file: Annotated[
        Path | None,
        typer.Option(
            "--model-config-file",
            parser=existing_file,
            metavar="FILE",
            help="A TF Serving models.config instead of one model.",
        ),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Interface to bind; 0.0.0.0 accepts remote clients.")
    ] = "127.0.0.1",
    grpc_port: GrpcPortOption = None,
    rest_port: RestPortOption = None,
    batching: Annotated[
        bool | None,
        typer.Option("--batching/--no-batching", help="Server-side batching (default serving.enable_batching)."),
    ] = None,
    config_file: ConfigOption = None,
    overrides: SetOption = None,
) -> None:
    """Serve models over TF Serving's gRPC and REST APIs, until Ctrl-C.

    Production serves the pushed model with TensorFlow Serving (`tfxp deploy-assets` writes its docker and
    Kubernetes setup). This command is a TF Serving-compatible stand-in for development and CI, where no
    `tensorflow_model_server` binary exists: same API, status codes and errors, version policies, hot swap of
    new versions, version labels, server-side batching, warmup, and Prometheus metrics at
    /monitoring/prometheus/metrics.
    """
    config = load_cli_config(config_file, overrides)
    from serving.batching import BatchingOptions
    from serving.server import ModelServer, ServerOptions, set_tensorflow_threads

    serving = config.serving
    set_tensorflow_threads(serving.intra_op_threads, serving.inter_op_threads)
    use_batching = serving.enable_batching if batching is None else batching
    options = ServerOptions(
        host=host,
        grpc_port=serving.grpc_port if grpc_port is None else grpc_port,
        rest_port=serving.rest_port if rest_port is None else rest_port,
        max_request_bytes=serving.max_request_mb * 1024 * 1024,
        max_request_pixels=serving.max_request_pixels,
        max_connections=serving.max_connections,
        request_timeout_seconds=serving.request_timeout_seconds,
        idle_timeout_seconds=serving.idle_timeout_seconds,
        max_batch_size=serving.max_batch_size,  # per request, with --no-batching too
        poll_interval_seconds=serving.poll_interval_seconds,
        config_poll_interval_seconds=float(serving.config_poll_seconds),
        batching=BatchingOptions(
            max_batch_size=serving.max_batch_size,
            batch_timeout_micros=serving.batch_timeout_micros,
            num_batch_threads=serving.num_batch_threads,
            max_enqueued_batches=serving.max_enqueued_batches,
            allowed_batch_sizes=serving.allowed_batch_sizes,
        )
        if use_batching
        else None,
    )
    if model_config_file is not None:
        server = ModelServer(options=options, model_config_file=model_config_file)
    else:
        server = ModelServer(_model_configs(config, model_base, model_name), options)
    # SIGTERM (Kubernetes stopping the pod) and Ctrl-C are recorded, not raised (foundation/stop_request.py): the
    # loop below sees them and stops the server on its normal path.
    with StopRequest() as stop:
        _serve_until_stopped(server, options, stop)


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


def _client(
    config: TfxpConfig, grpc: str | None, rest: str | None, model_name: str | None, timeout: float, wait: float
) -> ServingClient:
    from serving.base_client import RetryPolicy
    from serving.client import connect

    if (grpc is None) == (rest is None):
        raise UserError("pass exactly one of --grpc HOST:PORT and --rest URL, e.g. `--grpc localhost:8500`")
    retry = RetryPolicy()
    if wait > 0:  # ~0.5 s between attempts, for `wait` seconds
        retry = RetryPolicy(max_attempts=max(2, int(wait / 0.5) + 1), initial_backoff_seconds=0.5, multiplier=1.0)
    return connect(
        model_name or config.serving.model_name, grpc_target=grpc, rest_url=rest, timeout=timeout, retry=retry
    )


def _labels_for(config: TfxpConfig, labels_file: Path | None) -> list[str] | None:
    from foundation.contract import LABELS_ASSET, read_label_map
    from foundation.publish import newest_version

    if labels_file is not None:
        return read_label_map(labels_file, missing_hint="pass an existing label map (one class name a line)")
    # The server's API does not expose the label map; the pushed model carries it in assets/labels.txt.
    newest = newest_version(output_layout(config).serving_base, required_file=LABELS_ASSET)
    return read_label_map(f"{newest}/{LABELS_ASSET}") if newest else None


def _read_images(paths: list[Path]) -> list[bytes]:
    # The model contract: clients send upright pixels (the model does not apply EXIF orientation).
    from components.data.images import upright_image_bytes

    images = []
    for path in paths:
        try:
            images.append(upright_image_bytes(path.read_bytes()))
        except OSError as error:
            raise UserError(f"cannot read image {path}: {error.strerror}") from None
    return images


def _read_examples(
    directory: Path, count: int, config: TfxpConfig, labels_file: Path | None
) -> tuple[list[str], list[bytes], list[int]]:
    from dataclasses import replace

    from foundation.contract import IMAGE_KEY, LABEL_KEY
    from foundation.data.layout import HASH_SPLIT, read_directory
    from foundation.data.probe import FileProbe
    from foundation.data.spans import LATEST
    from foundation.data.tfrecords import iter_examples as read_examples
    from pipeline.layout import data_spec

    # DIR read as `tfxp run` reads data.path (the config's data section), its newest span when it has spans.
    labels = str(labels_file) if labels_file is not None else config.data.labels
    data = read_directory(replace(data_spec(config.data), path=str(directory), labels=labels), FileProbe(), LATEST)
    split = "eval" if "eval" in data.files else HASH_SPLIT
    where = f"{directory} ({split}{', span ' + str(max(data.spans)) if data.spans else ''})"
    names, images, truths = [], [], []
    for index, example in enumerate(read_examples(data.files[split])):
        if index == count:
            break
        features = example.features.feature
        names.append(f"{where} #{index}")
        images.append(features[IMAGE_KEY].bytes_list.value[0])
        truths.append(int(features[LABEL_KEY].int64_list.value[0]) - data.spec.first_label)
    if not names:
        raise UserError(f"{where} has no records to classify; check the data with `tfxp data inspect`")
    return names, images, truths


def predict(
    images: Annotated[
        list[Path] | None,
        typer.Argument(parser=existing_file, help="JPEG/PNG files to classify."),
    ] = None,
    examples: Annotated[
        Path | None,
        typer.Option(
            "--examples",
            parser=existing_dir,
            help="Or classify images from a data directory's eval split (any layout `tfxp run` reads).",
        ),
    ] = None,
    count: Annotated[int, typer.Option("--count", min=1, help="Images taken from --examples.")] = 5,
    grpc: GrpcOption = None,
    rest: RestOption = None,
    model_name: ModelNameOption = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Classes shown per image.")] = 3,
    labels_file: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            parser=existing_file,
            metavar="FILE",
            help="labels.txt (default: the pushed model's assets/labels.txt).",
        ),
    ] = None,
    version: Annotated[int | None, typer.Option("--version", help="Ask this version (default: the newest).")] = None,
    label: Annotated[str | None, typer.Option("--label", help="Ask the version with this label, e.g. stable.")] = None,
    timeout: TimeoutOption = 10.0,
    wait: WaitOption = 0.0,
    config_file: ConfigOption = None,
    overrides: SetOption = None,
) -> None:
    """Classify images with a served model (TF Serving or `tfxp serve`) and print the top-k classes.

    Images come from files, or from a data set's eval split with --examples (then the true label is shown).
    """
    config = load_cli_config(config_file, overrides)
    from serving.errors import ServingError

    if bool(images) == (examples is not None):
        raise UserError("pass image files or --examples DIR (a data set written by `tfxp data`), not both or neither")
    names, payload, truths = (
        _read_examples(examples, count, config, labels_file)
        if examples is not None
        else ([str(p) for p in images or []], _read_images(images or []), [])
    )
    labels = _labels_for(config, labels_file)
    with _client(config, grpc, rest, model_name, timeout, wait) as client:
        try:
            prediction = client.predict_images(payload, version=version, label=label)
        except ServingError as error:
            raise UserError(
                f"predict on {grpc or rest} failed with {error.code.name}: {error.message}. "
                "Is the server running (`tfxp serve`) and the model name right (--model-name)?"
            ) from None
    answered = f" (version {prediction.model_version})" if prediction.model_version is not None else ""
    console.print(
        f"model {client.model_name}{answered} via {'gRPC' if grpc else 'REST'}", highlight=False, markup=False
    )

    def name_of(label_id: int) -> str:
        return labels[label_id] if labels and 0 <= label_id < len(labels) else str(label_id)

    for index, (name, ranked) in enumerate(zip(names, prediction.top_k(top_k), strict=True)):
        shown = ", ".join(f"{name_of(c)} ({p:.3f})" for c, p in ranked)
        truth = f" [true: {name_of(truths[index])}]" if truths else ""
        console.print(f"{name}: {shown}{truth}", highlight=False, soft_wrap=True, markup=False)


def loadtest(
    image: Annotated[
        list[Path], typer.Option("--image", parser=existing_file, metavar="FILE", help="Image(s) to send; repeatable.")
    ],
    grpc: GrpcOption = None,
    rest: RestOption = None,
    model_name: ModelNameOption = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Requests in flight.")] = 8,
    seconds: Annotated[float, typer.Option("--seconds", min=0.1, help="Measured duration.")] = 10.0,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Images per request.")] = 1,
    warmup: Annotated[float, typer.Option("--warmup", min=0, help="Unmeasured seconds first.")] = 1.0,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", parser=output_file, metavar="FILE", help="Write the result as JSON here."),
    ] = None,
    timeout: TimeoutOption = 10.0,
    config_file: ConfigOption = None,
    overrides: SetOption = None,
) -> None:
    """Closed-loop load test: QPS, p50/p95/p99 latency and errors at a fixed concurrency.

    All workers share one asyncio loop and each distinct request is built once, so the load generator takes
    little CPU from a server on the same machine.
    """
    config = load_cli_config(config_file, overrides)
    from serving.loadtest import run_async_load_test

    if json_out is not None:
        check_output_file(json_out, "--json")
    payload = _read_images(image)
    _client(config, grpc, rest, model_name, timeout, 0).close()  # validates the options before starting workers
    result = run_async_load_test(
        grpc or rest or "",
        model_name or config.serving.model_name,
        payload,
        transport="grpc" if grpc else "rest",
        concurrency=concurrency,
        seconds=seconds,
        images_per_request=batch,
        warmup_seconds=warmup,
        timeout=timeout,
    )
    console.print(result.summary(), highlight=False, soft_wrap=True, markup=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result.to_json(), indent=2) + "\n")
        console.print(f"wrote {json_out}", highlight=False, markup=False)
    if result.requests and result.errors == result.requests:
        raise fail(f"every request failed ({result.error_kinds}); is the server up at {grpc or rest}?", code=1)


def deployed_serving(config: TfxpConfig) -> ServingOptions:
    """The `serving` section the deploy assets render: as configured, but an empty `serving.base_path` becomes
    the push destination when that is a bucket (`pipeline.output` is one); TF Serving reads it directly, and a
    volume mounted instead would hold no pushed model."""
    pushes = output_layout(config).serving_base
    if config.serving.base_path or not is_remote(pushes):
        return config.serving
    return config.serving.model_copy(update={"base_path": pushes})


def local_model_dir(config: TfxpConfig) -> str:
    """The host directory the deploy assets' docker scripts mount: the local push directory, or "" when the
    models are in a bucket (TF Serving reads it directly)."""
    return "" if deployed_serving(config).remote_base else str(Path(output_layout(config).serving_base).resolve())


def _print_findings(findings: list[Finding]) -> None:
    style = {"ok": "[green]ok[/]  ", "warn": "[yellow]warn[/]", "fail": "[bold red]FAIL[/]"}
    for finding in findings:
        console.print(f"{style[finding.status]} {escape(finding.message)}", highlight=False, soft_wrap=True)


def deploy_assets(
    out: Annotated[
        Path, typer.Option("--out", parser=output_dir, metavar="DIR", help="Directory for the assets (created).")
    ],
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Then validate the manifests: Kubernetes schemas (strict), name rules, the restricted Pod "
            "Security Standard and checkov; exit 1 when any check fails.",
        ),
    ] = False,
    config_file: ConfigOption = None,
    overrides: SetOption = None,
) -> None:
    """Write TF Serving deployment assets from the config: models.config, batching and monitoring configs,
    docker run scripts (CPU/GPU), Kubernetes Namespace/ConfigMap/Deployment/Service/HPA/PodDisruptionBudget/
    NetworkPolicy and a KServe InferenceService."""
    config = load_cli_config(config_file, overrides)
    from serving.deploy import WARNINGS_FILE, deploy_warnings, write_deploy_assets

    serving = deployed_serving(config)
    for path in write_deploy_assets(serving, out, local_model_dir(config)):
        console.print(f"wrote {path}", highlight=False)
    if serving.base_path != config.serving.base_path:
        console.print(
            f"models served from {serving.base_path}, where pushes go (set serving.base_path to change)",
            highlight=False,
            soft_wrap=True,
        )
    warnings = deploy_warnings(serving)
    for warning in warnings:
        warn(warning)
    if warnings:
        console.print(f"(the warnings are also in {out / WARNINGS_FILE})", highlight=False)
    if check:
        console.print(f"checking {out} (Kubernetes {KUBERNETES_VERSION} schemas, strict):", highlight=False)
        report = check_deploy_assets(out)
        _print_findings(report.findings)
        if not report.ok:
            raise fail(f"the check of {out} failed: see the FAIL lines above", code=1)
        console.print("check passed", highlight=False)
