"""`tfxp edge convert | eval | bench`: device models made outside the pipeline.

The work happens in `edge` (TFLite conversion, LiteRT evaluation and benchmark); these handlers parse
options and print summaries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from components.contract import LABELS_FILE, LabelMapError, read_label_map
from edge.errors import EdgeError
from pipeline.cli.console import console, user_errors

edge_app = typer.Typer(
    name="edge",
    help="TFLite models: convert a SavedModel (quantized), evaluate and benchmark with LiteRT.",
    no_args_is_help=True,
)

ExamplesOption = Annotated[
    Path | None,
    typer.Option("--examples", help="Data dir (DIR/train, DIR/eval as `tfxp data` writes) or a TFX Examples URI."),
]
ThreadsOption = Annotated[int, typer.Option("--threads", min=1, help="LiteRT interpreter threads (XNNPACK).")]
LabelOffsetOption = Annotated[
    int, typer.Option("--label-offset", min=0, help="Subtracted from image/class/label (1 for 1-based labels).")
]


@edge_app.command("convert")
@user_errors(EdgeError)
def convert_command(
    saved_model: Annotated[Path, typer.Argument(help="SavedModel dir with the `serving_preprocessed` signature.")],
    out: Annotated[Path, typer.Option("--out", help="The .tflite file to write.")],
    mode: Annotated[str, typer.Option("--mode", help="none, dynamic, float16 or int8 (full integer).")] = "int8",
    examples: ExamplesOption = None,
    samples: Annotated[int, typer.Option("--samples", min=1, help="Train examples to calibrate int8 with.")] = 200,
    io_dtype: Annotated[str, typer.Option("--io-dtype", help="int8 mode: int8, uint8 or float32 I/O.")] = "int8",
    supported_ops: Annotated[
        str, typer.Option("--supported-ops", help="builtins, or builtins+select_tf for TF ops (Flex delegate).")
    ] = "builtins",
    label_offset: LabelOffsetOption = 0,
    keep_tensor_names: Annotated[
        bool,
        typer.Option(
            "--keep-tensor-names",
            help="Keep the tensor debug names (for Netron); stripped by default, signatures stay.",
        ),
    ] = False,
) -> None:
    """Convert SAVED_MODEL to TFLite; int8 calibrates on --samples train images from --examples."""
    from edge.data import load_split
    from edge.export import read_preprocessing
    from edge.quantize import convert, get_mode

    calibration = None
    if get_mode(mode).needs_representative_data and examples is not None:
        spec = read_preprocessing(saved_model)
        calibration = load_split(examples, "train", spec, limit=samples, label_offset=label_offset, shuffle=True)
    tflite = convert(
        saved_model,
        mode,
        calibration.images if calibration is not None else None,
        supported_ops=supported_ops,
        io_dtype=io_dtype,
        keep_tensor_names=keep_tensor_names,
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(tflite)
    except OSError as error:
        raise EdgeError(f"cannot write {out}: {error.strerror}; pass a writable --out path") from None
    calibrated = f", calibrated on {len(calibration)} train images" if calibration is not None else ""
    console.print(f"{mode} TFLite model → {out} ({len(tflite) / 1024:.1f} KiB{calibrated})")


@edge_app.command("eval")
@user_errors(EdgeError, LabelMapError)
def eval_command(
    model: Annotated[Path, typer.Argument(help="A .tflite image classifier.")],
    examples: Annotated[Path, typer.Option("--examples", help="Data dir or TFX Examples URI with the split.")],
    split: Annotated[str, typer.Option("--split", help="Split to evaluate.")] = "eval",
    limit: Annotated[int, typer.Option("--limit", min=0, help="Evaluate at most this many examples; 0 = all.")] = 0,
    threads: ThreadsOption = 2,
    label_offset: LabelOffsetOption = 0,
) -> None:
    """Accuracy and per-class accuracy of MODEL on a split, with LiteRT."""
    from components.trainer.preprocessing import PreprocessingSpec
    from edge.data import load_split
    from edge.evaluate import evaluate
    from edge.runtime import TfliteModel

    labels = _labels_near(model, examples)  # first: a bad label map fails before the evaluation
    tflite = TfliteModel.load(model, threads=threads)
    height, width, channels = tflite.image_shape
    if height != width:
        raise EdgeError(f"{model} takes {height}×{width} images; tfxp preprocessing makes square images")
    data = load_split(examples, split, PreprocessingSpec(height, channels), limit=limit, label_offset=label_offset)
    result = evaluate(tflite, data)
    table = Table(title=f"{model} on {examples} ({split}, {result.count} examples)", title_justify="left")
    table.add_column("class", justify="right")
    table.add_column("name")
    table.add_column("accuracy", justify="right")
    for index, (name, value) in enumerate(result.per_class_by_name(labels).items()):
        table.add_row(str(index), name, "—" if value is None else f"{value:.4f}")
    table.add_section()
    table.add_row("", "all", f"{result.accuracy:.4f}", style="bold")
    console.print(table)


def _labels_near(model: Path, examples: Path) -> list[str]:
    # The EdgeModel keeps labels.txt beside model.tflite; a `tfxp data` dir keeps it at its top.
    for candidate in (model.parent / LABELS_FILE, examples / LABELS_FILE):
        if candidate.is_file():
            return read_label_map(candidate)
    return []


@edge_app.command("bench")
@user_errors(EdgeError)
def bench_command(
    model: Annotated[Path, typer.Argument(help="A .tflite model.")],
    threads: ThreadsOption = 2,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Timed invocations at batch 1.")] = 200,
    warmup: Annotated[int, typer.Option("--warmup", min=0, help="Untimed invocations first.")] = 20,
) -> None:
    """Latency p50/p99 at batch 1 and size of MODEL, with LiteRT (XNNPACK)."""
    from edge.benchmark import benchmark
    from edge.runtime import TfliteModel

    tflite = TfliteModel.load(model, threads=threads)
    result = benchmark(tflite, runs=runs, warmup=warmup)
    latency = result.latency
    console.print(
        f"{model}: {result.size_bytes / 1024:.1f} KiB, input {tflite.input.dtype} {list(tflite.input.shape)}; "
        f"batch 1, {threads} threads, {latency.runs} runs: p50 {latency.p50_ms:.3f} ms, "
        f"p99 {latency.p99_ms:.3f} ms, mean {latency.mean_ms:.3f} ms"
    )
