"""`tfxp data ...`: write the digits data set, convert an image folder, inspect TFRecords; each as one data set
(`DIR/train`, `DIR/eval`, `DIR/labels.txt`) or as spans that arrive over time (`DIR/span-N/`, `DIR/labels.txt`).

The work happens in `components.data`; these handlers parse options and print summaries.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from pipeline.cli.console import console
from pipeline.cli.options import command_group, config_command, existing_dir, output_dir, path_rule

if TYPE_CHECKING:
    from components.data.dataset import DatasetSummary
    from pipeline.config import TfxpConfig

data_app = command_group(
    "data", "Image data sets as sharded TFRecords (DIR/train, DIR/eval, DIR/labels.txt; or spans DIR/span-N/)."
)

OutOption = Annotated[
    Path,
    typer.Option(
        "--out", parser=output_dir, metavar="DIR", help="Output directory (DIR/train, DIR/eval, DIR/labels.txt)."
    ),
]
EvalFractionOption = Annotated[float, typer.Option("--eval-fraction", help="Share of each class that goes to eval.")]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace a data set tfxp wrote in --out (other files stay).")
]
SpanOption = Annotated[
    int | None,
    typer.Option("--span", min=0, help="Write DIR/span-N (train/, eval/) beside DIR/labels.txt: data that arrives."),
]


def print_summary(summary: DatasetSummary, title: str) -> None:
    """Prints per-label counts with one column per split, then totals and shard counts."""
    splits = list(summary.counts)
    table = Table(title=title, title_justify="left")
    table.add_column("label", justify="right")
    table.add_column("name")
    for split in splits:
        table.add_column(split, justify="right")
    table.add_column("total", justify="right")
    for index, name in enumerate(summary.row_names()):
        row = [summary.counts[split].get(name, 0) for split in splits]
        label = str(index) if index < len(summary.label_names) else "?"
        table.add_row(label, name, *map(str, row), str(sum(row)))
    totals = [summary.split_total(split) for split in splits]
    table.add_section()
    table.add_row("", "all", *map(str, totals), str(sum(totals)), style="bold")
    table.add_row("", "shards", *(str(summary.shards.get(split, 0)) for split in splits), "", style="dim")
    console.print(table)


@data_app.command("digits")
def digits(
    out: OutOption,
    eval_fraction: EvalFractionOption = 0.2,
    shards: Annotated[int, typer.Option("--shards", min=1, help="TFRecord files per split.")] = 2,
    overwrite: OverwriteOption = False,
    span: SpanOption = None,
    spans: Annotated[
        int | None,
        typer.Option("--spans", min=1, help="Cut the digits into K seeded, disjoint spans (all, or the one --span)."),
    ] = None,
    corrupt_labels: Annotated[
        float, typer.Option("--corrupt-labels", help="Share of train labels made wrong (seeded), for demos.")
    ] = 0.0,
) -> None:
    """Write scikit-learn's bundled digits (1,797 8x8 images, no download) as PNG tf.Examples."""
    from components.data.digits import write_digit_spans, write_digits

    if span is None and spans is None:
        summary = write_digits(
            out, eval_fraction=eval_fraction, shards=shards, overwrite=overwrite, corrupt_labels=corrupt_labels
        )
        print_summary(summary, f"digits → {out}")
        return
    written = write_digit_spans(
        out,
        spans=spans or 1,
        only=span,
        eval_fraction=eval_fraction,
        shards=shards,
        overwrite=overwrite,
        corrupt_labels=corrupt_labels,
    )
    for summary in written:
        print_summary(summary, f"digits → {summary.path}")


@data_app.command("from-folder")
def from_folder(
    src: Annotated[
        Path,
        typer.Argument(
            parser=existing_dir, help="Image tree: SRC/<class>/<image> (JPEG, PNG, GIF, BMP, WebP; any size)."
        ),
    ],
    out: OutOption,
    eval_fraction: EvalFractionOption = 0.2,
    shards: Annotated[int, typer.Option("--shards", min=0, help="TFRecord files per split; 0 = ~128 MiB each.")] = 0,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Skip (and list) unreadable images.")] = False,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Fail on files that are not JPEG/PNG/GIF/BMP/WebP instead of skipping them."),
    ] = False,
    overwrite: OverwriteOption = False,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Parallel image checks.")] = os.cpu_count() or 1,
    span: SpanOption = None,
) -> None:
    """Convert a class-per-subfolder image tree into sharded TFRecords plus labels.txt."""
    from components.data.dataset import MANIFEST_FILE
    from components.data.from_folder import convert_folder

    summary = convert_folder(
        src,
        out,
        eval_fraction=eval_fraction,
        shards=shards or None,
        overwrite=overwrite,
        skip_bad=skip_bad,
        strict=strict,
        workers=workers,
        span=span,
    )
    print_summary(summary, f"{src} → {summary.path}")
    if summary.reencoded:
        console.print(f"re-encoded (stored as upright JPEG/PNG): {len(summary.reencoded)} files", highlight=False)
        for entry in summary.reencoded[:10]:
            console.print(f"  {entry}", highlight=False, soft_wrap=True, markup=False)
        if len(summary.reencoded) > 10:
            console.print(f"  and {len(summary.reencoded) - 10} more (all in {MANIFEST_FILE})", highlight=False)
    if summary.skipped:
        console.print(f"[yellow]skipped {len(summary.skipped)} files:[/]", highlight=False)
        for path, reason in summary.skipped:
            console.print(f"  {path}: {reason}", highlight=False, soft_wrap=True, markup=False)


@data_app.command("inspect")
@config_command
def inspect(
    config: TfxpConfig,
    directory: Annotated[
        Path,
        typer.Argument(
            parser=path_rule("existing_dir", hint="create one with `tfxp data digits --out DIR`"),
            help="A data directory in any layout `tfxp run` reads (or a directory of span-N folders).",
        ),
    ],
) -> None:
    """Print example counts per split and label (and per span, for a directory of spans).

    DIRECTORY is read as `tfxp run` reads data.path: layout and label offset detected, or as the config's data
    section sets them (`--set data.label_offset=1`, `--set data.train_pattern=... --set data.eval_pattern=...`).
    """
    from dataclasses import replace

    from components.data.inspect import inspect_data

    spec = replace(config.data.spec(), path=str(directory))
    inspection = inspect_data(directory, spec)
    spec = inspection.data.spec
    files = (
        f"{spec.file_pattern}, split by hash buckets in a run"
        if spec.split == "hash"
        else f"train {spec.train_pattern}, eval {spec.eval_pattern}"
    )
    console.print(f"{directory}: {files}; label offset {spec.first_label}", highlight=False, markup=False)
    if not inspection.spans:
        print_summary(inspection.total, str(directory))
        return
    print_spans(inspection.spans, str(directory))
    print_summary(inspection.total, f"{directory}, all {len(inspection.spans)} spans")


def print_spans(spans: dict[int, DatasetSummary], title: str) -> None:
    """One row per span: examples per split and shards."""
    splits = list(dict.fromkeys(split for summary in spans.values() for split in summary.counts))
    table = Table(title=title, title_justify="left")
    table.add_column("span", justify="right")
    for split in splits:
        table.add_column(split, justify="right")
    table.add_column("shards", justify="right")
    for span, summary in spans.items():
        shards = sum(summary.shards.values())
        table.add_row(str(span), *(str(summary.split_total(split)) for split in splits), str(shards))
    console.print(table)
