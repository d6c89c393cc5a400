"""Where a run's outputs go (ARCHITECTURE.md, "Output contract"), derived purely from the config."""

from __future__ import annotations

from dataclasses import dataclass

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
