"""Where a run reads and writes, shared by both runners: the output layout (ARCHITECTURE.md, "Output contract"),
remote paths, and the one rule from `data.split` to the files ImportExampleGen reads.

Everything here is derived from the config, except `resolve_split`, which may look for `train/` and `eval/`
folders on the local disk (never in a bucket).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from components.data.tfrecords import SPLITS
from pipeline.config import TfxpConfig


@dataclass(frozen=True)
class OutputLayout:
    """Paths of one run's outputs; plain strings so they work for local dirs and buckets alike.

    Attributes:
        pipeline_root: TFX pipeline root (artifacts), `OUT/<pipeline>/root`.
        metadata_path: SQLite ML Metadata store, `OUT/<pipeline>/metadata.db`.
        serving_base: TF Serving model base path, `OUT/serving/<model>`; versions are subdirectories.
        edge_base: Device model base, `OUT/edge/<model>`.
        summary_path: `OUT/run-summary.json`.
        config_path: The frozen config of the run, `OUT/<pipeline>/params.yaml`.
        log_dir: TFX and Beam logs of local runs, `OUT/<pipeline>/logs`.
    """

    pipeline_root: str
    metadata_path: str
    serving_base: str
    edge_base: str
    summary_path: str
    config_path: str
    log_dir: str


def output_layout(config: TfxpConfig) -> OutputLayout:
    """The layout under `config.pipeline.output` (or `serving.base_path` for pushes when set)."""
    out = config.pipeline.output.rstrip("/")
    pipeline_dir = f"{out}/{config.pipeline.name}"
    model = config.serving.model_name
    return OutputLayout(
        pipeline_root=f"{pipeline_dir}/root",
        metadata_path=f"{pipeline_dir}/metadata.db",
        serving_base=config.serving.base_path.rstrip("/") or f"{out}/serving/{model}",
        edge_base=f"{out}/edge/{model}",
        summary_path=f"{out}/run-summary.json",
        config_path=f"{pipeline_dir}/params.yaml",
        log_dir=f"{pipeline_dir}/logs",
    )


def is_remote(path: str) -> bool:
    """Whether `path` is a URI (`gs://bucket/...`, `s3://...`) rather than a local path.

    Example:
        is_remote("gs://bucket/data")  # True
        is_remote("data/digits")  # False
    """
    return "://" in path


def resolve_split(config: TfxpConfig) -> TfxpConfig:
    """`config` with `data.split: auto` made concrete; any other split is returned as it is.

    `folders` for remote data (buckets are not listed; the ImageNet layout has the folders), and for local
    data with both `train/` and `eval/` folders; `hash` otherwise.
    """
    if config.data.split != "auto":
        return config
    path = config.data.path
    has_folders = is_remote(path) or all((Path(path) / name).is_dir() for name in SPLITS)
    data = config.data.model_copy(update={"split": "folders" if has_folders else "hash"})
    return config.model_copy(update={"data": data})


def split_patterns(config: TfxpConfig) -> dict[str, str]:
    """ImportExampleGen's input splits: split name → glob relative to `data.path`.

    `hash` reads one split `all` of `data.file_pattern` (only the TFRecords: `labels.txt` and the data set
    manifest live beside them), which ExampleGen then splits by hash buckets. Any other split reads the
    folders `tfxp data` writes, `train/*` and `eval/*` (an unresolved `auto` reads as `folders`).

    Example:
        split_patterns(config)  # {"train": "train/*", "eval": "eval/*"} for `data.split: folders`
    """
    if config.data.split == "hash":
        return {"all": config.data.file_pattern}
    return {name: f"{name}/*" for name in SPLITS}
