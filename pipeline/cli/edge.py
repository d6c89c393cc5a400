"""`tfxp edge convert | eval | inspect | versions | bench | verify`: device models made outside the pipeline,
and the versions the pipeline published.

The work happens in `edge` (TFLite conversion, LiteRT evaluation and benchmark); these handlers parse
options and print summaries.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from edge.errors import EdgeError
from foundation.path_rules import check_not_input
from pipeline.cli.console import console
from pipeline.cli.options import command_group, existing_dir, existing_file, output_file

if TYPE_CHECKING:
    import numpy as np

    from edge.data import LabeledImages
    from edge.verify import ArchRun

edge_app = command_group(
    "edge", "TFLite models: convert a SavedModel (quantized), evaluate and benchmark with LiteRT, verify on ARM64."
)

ExamplesOption = Annotated[
    Path | None,
    typer.Option(
        "--examples",
        parser=existing_dir,
        metavar="DIR",
        help="Data dir (DIR/train, DIR/eval as `tfxp data` writes) or a TFX Examples URI.",
    ),
]
ThreadsOption = Annotated[int, typer.Option("--threads", min=1, help="LiteRT interpreter threads (XNNPACK).")]
LabelOffsetOption = Annotated[
    int, typer.Option("--label-offset", min=0, help="Subtracted from image/class/label (1 for 1-based labels).")
]


SavedModelArgument = Annotated[
    Path, typer.Argument(parser=existing_dir, help="SavedModel dir with the `serving_preprocessed` signature.")
]
TfliteOutOption = Annotated[
    Path, typer.Option("--out", parser=output_file, metavar="FILE", help="The .tflite file to write.")
]
ModeOption = Annotated[str, typer.Option("--mode", help="none, dynamic, float16 or int8 (full integer).")]
CalibrationSamplesOption = Annotated[
    int, typer.Option("--samples", min=1, help="Train examples to calibrate int8 with.")
]
IoDtypeOption = Annotated[
    str, typer.Option("--io-dtype", help="Frame type: uint8, float32 (pixels 0..255) or, int8 mode only, int8.")
]
SupportedOpsOption = Annotated[
    str, typer.Option("--supported-ops", help="builtins, or builtins+select_tf for TF ops (Flex delegate).")
]
KeepTensorNamesOption = Annotated[
    bool,
    typer.Option(
        "--keep-tensor-names", help="Keep the tensor debug names (for Netron); stripped by default, signatures stay."
    ),
]
MetadataOption = Annotated[
    bool,
    typer.Option(
        "--metadata/--no-metadata",
        help="Write TFLite Model Metadata (labels, normalization, color space) with the .venv-mediapipe writer.",
    ),
]


@edge_app.command("convert")
def convert_command(
    saved_model: SavedModelArgument,
    out: TfliteOutOption,
    mode: ModeOption = "int8",
    examples: ExamplesOption = None,
    samples: CalibrationSamplesOption = 200,
    io_dtype: IoDtypeOption = "uint8",
    supported_ops: SupportedOpsOption = "builtins",
    label_offset: LabelOffsetOption = 0,
    keep_tensor_names: KeepTensorNamesOption = False,
    metadata: MetadataOption = True,
) -> None:
    """Convert SAVED_MODEL to TFLite; int8 calibrates on --samples train images from --examples."""
    check_not_input(out, {"SAVED_MODEL": saved_model, "--examples": examples}, "--out")
    from edge.data import load_split
    from edge.inputs import read_preprocessing
    from edge.quantize import convert, get_mode

    calibration = None
    if get_mode(mode).needs_representative_data and examples is not None:
        preprocessing = read_preprocessing(saved_model)
        calibration = load_split(
            examples, "train", preprocessing, limit=samples, label_offset=label_offset, shuffle=True
        )
    tflite = convert(
        saved_model,
        mode,
        calibration.frames if calibration is not None else None,
        supported_ops=supported_ops,
        io_dtype=io_dtype,
        keep_tensor_names=keep_tensor_names,
    )
    if metadata:
        tflite = _with_metadata(tflite, saved_model, mode)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(tflite)
    except OSError as error:
        raise EdgeError(f"cannot write {out}: {error.strerror}; pass a writable --out path") from None
    calibrated = f", calibrated on {len(calibration)} train images" if calibration is not None else ""
    console.print(f"{mode} TFLite model → {escape(str(out))} ({len(tflite) / 1024:.1f} KiB{calibrated})")


def _with_metadata(tflite: bytes, saved_model: Path, mode: str) -> bytes:
    """`tflite` with TFLite Model Metadata (labels, normalisation, colour space) for a converted, unevaluated model."""
    from edge.app_client import MetadataSpec, with_model_metadata
    from edge.inputs import read_labels, read_preprocessing
    from edge.runtime import TfliteModel

    size = read_preprocessing(saved_model)
    frame = TfliteModel(tflite, where=str(saved_model)).input
    spec = MetadataSpec(
        name=saved_model.name,
        version=f"tfxp edge convert, mode {mode}, SavedModel {saved_model}",
        description=f"Image classifier ({mode}), converted by `tfxp edge convert`; not evaluated.",
        input_description=f"RGB frame [1, {size.image_size}, {size.image_size}, 3], {frame.dtype}, pixels "
        "0..255 as the camera gives them; scaling and normalisation are inside the model.",
    )
    return with_model_metadata(tflite, read_labels(saved_model), spec)


@edge_app.command("eval")
def eval_command(
    model: Annotated[Path, typer.Argument(parser=existing_file, help="A .tflite image classifier.")],
    examples: Annotated[
        Path,
        typer.Option("--examples", parser=existing_dir, help="Data dir or TFX Examples URI with the split."),
    ],
    split: Annotated[str, typer.Option("--split", help="Split to evaluate.")] = "eval",
    limit: Annotated[int, typer.Option("--limit", min=0, help="Evaluate at most this many examples; 0 = all.")] = 0,
    threads: ThreadsOption = 2,
    label_offset: LabelOffsetOption = 0,
    client: Annotated[
        str,
        typer.Option(
            "--client",
            help="Also run this app-side client on the same frames and compare its top-1 with LiteRT's: mediapipe "
            "(ImageClassifier, from .venv-mediapipe), or none.",
        ),
    ] = "none",
    min_agreement: Annotated[
        float, typer.Option("--min-agreement", min=0, max=1, help="With --client: exit 1 below this agreement.")
    ] = 0.99,
) -> None:
    """Accuracy and per-class accuracy of MODEL on a split, with LiteRT (and MediaPipe with --client)."""
    from edge.data import frame_spec_near, labels_near, load_split
    from edge.evaluate import accuracy_of
    from edge.runtime import TfliteModel, read_tflite

    labels = labels_near(model, examples)  # first: a bad label map fails before the evaluation
    tflite_bytes = read_tflite(model)
    tflite = TfliteModel(tflite_bytes, threads=threads, where=str(model))
    spec = frame_spec_near(tflite.image_shape, model)
    data = load_split(examples, split, spec, limit=limit, label_offset=label_offset)
    if client not in ("none", "mediapipe"):
        raise EdgeError(f"unknown --client {client}; pass mediapipe or none")
    predictions = tflite.predict(data.frames)
    result = accuracy_of(predictions, data.labels)
    table = Table(title=f"{model} on {examples} ({split}, {result.count} examples)", title_justify="left")
    table.add_column("class", justify="right")
    table.add_column("name")
    table.add_column("accuracy", justify="right")
    for index, (name, value) in enumerate(result.per_class_by_name(labels).items()):
        table.add_row(str(index), name, "—" if value is None else f"{value:.4f}")
    table.add_section()
    table.add_row("", "all", f"{result.accuracy:.4f}", style="bold")
    console.print(table)
    if client == "mediapipe":
        _compare_with_mediapipe(tflite_bytes, data, predictions, min_agreement)


def _compare_with_mediapipe(tflite: bytes, data: LabeledImages, predictions: np.ndarray, min_agreement: float) -> None:
    """Runs MediaPipe's ImageClassifier on the same frames and prints its top-1 agreement with LiteRT's `predictions`.

    Raises:
        typer.Exit: 1 below `min_agreement`.
    """
    import numpy as np

    from edge.app_client import agreement, classify

    answer = classify(tflite, data.frames)
    agreed = agreement(np.argmax(predictions, axis=-1), answer.indices)
    accuracy = float(np.mean(answer.indices == data.labels))
    count = len(data.labels)
    line = (
        f"MediaPipe {answer.version} ImageClassifier: top-1 agrees with LiteRT on "
        f"{round(agreed * count)}/{count} frames ({agreed:.4f}), accuracy {accuracy:.4f}; "
        f"labels from the model's metadata: {', '.join(sorted(set(answer.labels)))}"
    )
    if agreed < min_agreement:
        console.print(f"[bold red]FAILED[/]: {line}, below --min-agreement {min_agreement}", highlight=False)
        raise typer.Exit(1)
    console.print(line, highlight=False)


@edge_app.command("inspect")
def inspect_command(
    model: Annotated[Path, typer.Argument(parser=existing_file, help="A .tflite model.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print the metadata as JSON.")] = False,
) -> None:
    """The TFLite Model Metadata inside MODEL: name, version, description, input, labels (tflite-support's reader)."""
    import json

    from edge.app_client import describe_metadata, read_metadata
    from edge.runtime import read_tflite

    found = read_metadata(read_tflite(model))
    if json_output:
        console.print_json(json.dumps(found))
        return
    for line in describe_metadata(found, str(model)):
        console.print(line, highlight=False, markup=False)


@edge_app.command("versions")
def versions_command(
    out: Annotated[Path, typer.Argument(parser=existing_dir, help="The pipeline's output dir OUT (or OUT/edge).")],
) -> None:
    """The published device model versions under OUT/edge, with their release records (release.json)."""
    from edge.release import list_releases

    base = out / "edge" if (out / "edge").is_dir() else out
    releases = list_releases(str(base))
    if not releases:
        raise EdgeError(f"no published device models under {base}; run the pipeline with edge.enabled=true first")
    table = Table(title=f"device models under {base}", title_justify="left")
    for column in ("model", "version", "mode", "input", "KiB", "sha256", "LiteRT acc", "MediaPipe agr", "min LiteRT"):
        table.add_column(column, justify="right" if column in ("KiB", "LiteRT acc", "MediaPipe agr") else "left")
    for release in releases:
        record = release.record
        if record is None:
            table.add_row(release.model, release.version, "—", "no release.json", "", "", "", "", "")
            continue
        agreement = record.accuracy.mediapipe_agreement
        table.add_row(
            release.model,
            release.version,
            record.mode,
            f"{record.input.dtype} {'×'.join(str(dim) for dim in record.input.shape)}",
            f"{record.size_bytes / 1024:.1f}",
            record.sha256[:12],
            f"{record.accuracy.host_litert:.4f}",
            "—" if agreement is None else f"{agreement:.4f}",
            record.min_litert_version or "—",
        )
    console.print(table)


@edge_app.command("bench")
def bench_command(
    model: Annotated[Path, typer.Argument(parser=existing_file, help="A .tflite model.")],
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


ArchOption = Annotated[str, typer.Option("--arch", help="Target architecture (emulated): aarch64.")]
CpuOption = Annotated[
    str, typer.Option("--cpu", help="Emulated core: cortex-a76, cortex-a72, cortex-a53 or neoverse-n1.")
]
KernelsOption = Annotated[
    str, typer.Option("--kernels", help="Kernels on both sides: xnnpack (LiteRT's default), builtin, reference.")
]
VerifySamplesOption = Annotated[int, typer.Option("--samples", min=0, help="Eval examples (a seeded sample); 0 = all.")]
MinAgreementOption = Annotated[
    float, typer.Option("--min-agreement", min=0, max=1, help="Exit 1 below this top-1 agreement.")
]
VerifyThreadsOption = Annotated[int, typer.Option("--threads", min=1, help="Interpreter threads on both sides.")]


@edge_app.command("verify")
def verify_command(
    model: Annotated[Path, typer.Argument(parser=existing_file, help="A .tflite image classifier.")],
    examples: Annotated[
        Path,
        typer.Option(
            "--examples", parser=existing_dir, metavar="DIR", help="Data dir or TFX Examples URI with an eval split."
        ),
    ],
    arch: ArchOption = "aarch64",
    cpu: CpuOption = "cortex-a76",
    kernels: KernelsOption = "xnnpack",
    samples: VerifySamplesOption = 200,
    min_agreement: MinAgreementOption = 0.995,
    threads: VerifyThreadsOption = 1,
    label_offset: LabelOffsetOption = 0,
) -> None:
    """Run MODEL on an emulated ARM64 core and on this host, same inputs and kernels, and compare the outputs.

    The emulated runtime (Debian arm64 Python, LiteRT's aarch64 wheels, run by qemu-user) is prepared once in
    the user cache dir; it needs `sudo apt-get install -y qemu-user-static mmdebstrap`.
    """
    from edge.cores import ARCHES, check_cpu, check_kernels
    from edge.verify import judge, verify_on_arch

    # First: refused before TensorFlow loads or anything is prepared (`max` too).
    if arch not in ARCHES:
        raise EdgeError(f"unknown --arch {arch}; supported: {', '.join(ARCHES)}")
    check_kernels(kernels)
    core = check_cpu(cpu)

    from edge.data import frame_spec_near, load_split
    from edge.runtime import TfliteModel, read_tflite

    content = read_tflite(model)
    data = load_split(
        examples,
        "eval",
        frame_spec_near(TfliteModel(content, where=str(model)).image_shape, model),
        limit=samples,
        label_offset=label_offset,
        shuffle=True,
    )
    run = verify_on_arch(
        content,
        data.frames,
        data.labels,
        core.name,
        kernels=kernels,
        threads=threads,
        report=lambda line: console.print(line, highlight=False),
    )
    _print_verdict(
        *judge(run.comparison, min_agreement, target=f"{arch} {core.name}"), _comparison_table(model, arch, run)
    )


def _print_verdict(passed: bool, figures: str, table: Table) -> None:
    """The comparison, what the emulated check leaves out, and the verdict.

    Raises:
        typer.Exit: 1 when the check failed.
    """
    from edge.verify import APP_CLIENT_ON_HOST

    console.print(table)
    console.print(
        "Timings under emulation say nothing about device latency and are not reported; "
        "run `tfxp edge bench` on the device.",
        highlight=False,
    )
    console.print(APP_CLIENT_ON_HOST, highlight=False)
    if not passed:
        console.print(f"[bold red]FAILED[/]: {figures}", highlight=False)
        raise typer.Exit(1)
    console.print(f"passed: {figures}", highlight=False)


def _comparison_table(model: Path, arch: str, run: ArchRun) -> Table:
    comparison = run.comparison
    table = Table(
        title=f"{model} on {arch} ({run.core.name}, emulated) vs the host; {run.kernels} kernels, "
        f"{comparison.count} eval examples",
        title_justify="left",
    )
    table.add_column("")
    table.add_column(f"host ({run.host['machine']})", justify="right")
    table.add_column(f"{arch} {run.core.name}", justify="right")
    table.add_row("accuracy", f"{comparison.host_accuracy:.4f}", f"{comparison.target_accuracy:.4f}")
    agreed = round(comparison.agreement * comparison.count)
    table.add_row("top-1 agreement", "", f"{agreed}/{comparison.count} ({comparison.agreement:.4f})")
    steps = "— (float output)" if comparison.max_steps is None else f"{comparison.max_steps}"
    table.add_row("max difference, quantization steps", "", steps)
    table.add_row("max difference, real values", "", f"{comparison.max_abs_diff:.3g}")
    return table
