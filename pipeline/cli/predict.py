"""`tfxp predict`, `tfxp loadtest`: calling a served model (TF Serving or `tfxp serve`) over gRPC or REST.

The client is `serving.client`, the load generator `serving.loadtest`; these handlers read the images, map the
options onto them and print results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from foundation.path_rules import check_not_input
from pipeline.cli.console import UserError, console, fail
from pipeline.cli.options import (
    MAX_REQUEST_SECONDS,
    MAX_WAIT_SECONDS,
    GrpcOption,
    ModelNameOption,
    RestOption,
    check_output_file,
    config_command,
    existing_dir,
    existing_file,
    output_file,
    writes,
)
from pipeline.config import TfxpConfig
from pipeline.layout import output_layout

if TYPE_CHECKING:
    from serving.base_client import Prediction, ServingClient

TimeoutOption = Annotated[
    float, typer.Option("--timeout", min=0.001, max=MAX_REQUEST_SECONDS, help="Seconds each request may take.")
]
WaitOption = Annotated[
    float,
    typer.Option(
        "--wait", min=0, max=MAX_WAIT_SECONDS, help="Keep retrying an unreachable server for this many seconds."
    ),
]
ImagesArgument = Annotated[
    list[Path] | None,
    typer.Argument(parser=existing_file, help="JPEG/PNG files to classify."),
]
ExamplesOption = Annotated[
    Path | None,
    typer.Option(
        "--examples",
        parser=existing_dir,
        help="Or classify images from a data directory's eval split (any layout `tfxp run` reads).",
    ),
]
CountOption = Annotated[int, typer.Option("--count", min=1, help="Images taken from --examples.")]
TopKOption = Annotated[int, typer.Option("--top-k", min=1, help="Classes shown per image.")]
LabelsOption = Annotated[
    Path | None,
    typer.Option(
        "--labels",
        parser=existing_file,
        metavar="FILE",
        help="labels.txt (default: the pushed model's assets/labels.txt).",
    ),
]
VersionOption = Annotated[int | None, typer.Option("--version", help="Ask this version (default: the newest).")]
LabelOption = Annotated[str | None, typer.Option("--label", help="Ask the version with this label, e.g. stable.")]
ImageOption = Annotated[
    list[Path], typer.Option("--image", parser=existing_file, metavar="FILE", help="Image(s) to send; repeatable.")
]
ConcurrencyOption = Annotated[int, typer.Option("--concurrency", min=1, help="Requests in flight.")]
SecondsOption = Annotated[float, typer.Option("--seconds", min=0.1, help="Measured duration.")]
BatchOption = Annotated[int, typer.Option("--batch", min=1, help="Images per request.")]
WarmupOption = Annotated[float, typer.Option("--warmup", min=0, help="Unmeasured seconds first.")]
JsonOutOption = Annotated[
    Path | None,
    typer.Option("--json", parser=output_file, metavar="FILE", help="Write the result as JSON here."),
]


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
    from foundation.bounded import read_file, size_text
    from serving.base_client import MAX_MESSAGE_BYTES

    fix = f"a request carries at most {size_text(MAX_MESSAGE_BYTES)}: pass a smaller image"
    images = []
    for path in paths:
        try:
            images.append(upright_image_bytes(read_file(path, MAX_MESSAGE_BYTES, f"image {path}", fix)))
        except OSError as error:
            raise UserError(f"cannot read image {path}: {error.strerror}") from None
    return images


def read_examples(
    directory: Path, count: int, config: TfxpConfig, labels_file: Path | None
) -> tuple[list[str], list[bytes], list[int]]:
    from dataclasses import replace

    from foundation.contract import IMAGE_KEY, LABEL_KEY
    from foundation.data.layout import HASH_SPLIT, read_directory
    from foundation.data.probe import FileProbe
    from foundation.data.spans import LATEST
    from foundation.data.tfrecords import iter_examples as read_examples

    # DIR read as `tfxp run` reads data.path (the config's data section), its newest span when it has spans.
    labels = str(labels_file) if labels_file is not None else config.data.labels
    data = read_directory(replace(config.data.spec(), path=str(directory), labels=labels), FileProbe(), LATEST)
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


def _predict_images(
    client: ServingClient, images: list[bytes], version: int | None, label: str | None, target: str | None
) -> Prediction:
    from serving.errors import ServingError

    try:
        return client.predict_images(images, version=version, label=label)
    except ServingError as error:
        raise UserError(
            f"predict on {target} failed with {error.code.name}: {error.message}. "
            "Is the server running (`tfxp serve`) and the model name right (--model-name)?"
        ) from None


def _print_prediction(
    names: list[str], prediction: Prediction, top_k: int, truths: list[int], labels: list[str] | None
) -> None:
    def name_of(label_id: int) -> str:
        return labels[label_id] if labels and 0 <= label_id < len(labels) else str(label_id)

    for index, (name, ranked) in enumerate(zip(names, prediction.top_k(top_k), strict=True)):
        shown = ", ".join(f"{name_of(c)} ({p:.3f})" for c, p in ranked)
        truth = f" [true: {name_of(truths[index])}]" if truths else ""
        console.print(f"{name}: {shown}{truth}", highlight=False, soft_wrap=True, markup=False)


@config_command
def predict(
    config: TfxpConfig,
    images: ImagesArgument = None,
    examples: ExamplesOption = None,
    count: CountOption = 5,
    grpc: GrpcOption = None,
    rest: RestOption = None,
    model_name: ModelNameOption = None,
    top_k: TopKOption = 3,
    labels_file: LabelsOption = None,
    version: VersionOption = None,
    label: LabelOption = None,
    timeout: TimeoutOption = 10.0,
    wait: WaitOption = 0.0,
) -> None:
    """Classify images with a served model (TF Serving or `tfxp serve`) and print the top-k classes.

    Images come from files, or from a data set's eval split with --examples (then the true label is shown).
    """
    if bool(images) == (examples is not None):
        raise UserError("pass image files or --examples DIR (a data set written by `tfxp data`), not both or neither")
    names, payload, truths = (
        read_examples(examples, count, config, labels_file)
        if examples is not None
        else ([str(p) for p in images or []], _read_images(images or []), [])
    )
    labels = _labels_for(config, labels_file)
    with _client(config, grpc, rest, model_name, timeout, wait) as client:
        prediction = _predict_images(client, payload, version, label, grpc or rest)
    answered = f" (version {prediction.model_version})" if prediction.model_version is not None else ""
    console.print(
        f"model {client.model_name}{answered} via {'gRPC' if grpc else 'REST'}", highlight=False, markup=False
    )
    _print_prediction(names, prediction, top_k, truths, labels)


@writes(json_out="--json")
def loadtest(
    config: TfxpConfig,
    image: ImageOption,
    grpc: GrpcOption = None,
    rest: RestOption = None,
    model_name: ModelNameOption = None,
    concurrency: ConcurrencyOption = 8,
    seconds: SecondsOption = 10.0,
    batch: BatchOption = 1,
    warmup: WarmupOption = 1.0,
    json_out: JsonOutOption = None,
    timeout: TimeoutOption = 10.0,
) -> None:
    """Closed-loop load test: QPS, p50/p95/p99 latency and errors at a fixed concurrency.

    All workers share one asyncio loop and each distinct request is built once, so the load generator takes
    little CPU from a server on the same machine.
    """
    from serving.load_limits import check_load

    check_load(concurrency, seconds, batch)  # before TensorFlow starts: a refusal takes no 20 s
    from serving.loadtest import run_async_load_test

    if json_out is not None:
        check_output_file(json_out, "--json")
        for path in image:
            check_not_input(json_out, {"--image": path}, "--json")
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
