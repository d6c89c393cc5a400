"""Where a run reads and writes, shared by both runners: the output layout (docs/architecture.md, "Output contract"),
and the config's data section handed to the data-files rule (`foundation.data.layout`, which every reader of data
shares: `tfxp run`, `tfxp compile`, `tfxp data inspect`, `tfxp predict --examples`, edge and bench).

`resolve_data` makes `data.split: auto` and `data.label_offset: auto` concrete from what a `DataProbe` reports, and
checks span folders against `data.spans`; the runners pass the probe (`foundation.data.probe.FileProbe`: local disk
or `tf.io.gfile`), so this module never touches the disk itself; only `check_data_apart` follows the links of local
paths (`foundation.path_rules.lies_in`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from foundation.data import layout as data_layout
from foundation.data.layout import DataProbe
from foundation.path_rules import check_apart_from_data
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


def check_data_apart(config: TfxpConfig, outputs: Mapping[str, str] | None = None) -> None:
    """Refuses a config whose outputs are or lie in `data.path`, or whose `data.path` lies in a folder a run fills
    (`OUT/<pipeline>`, the serving and edge bases): ImportExampleGen would read the outputs as TFRecords
    (`foundation.path_rules.check_apart_from_data`).

    Args:
        config: The config, its paths as the command resolves them.
        outputs: More outputs, by option or key (`{"--out": spec, "kubeflow.pipeline_root": root}`).

    Raises:
        PathRuleError: naming the output and the data folder.
    """
    layout = output_layout(config)
    check_apart_from_data(
        {"pipeline.output": config.pipeline.output, **(outputs or {})},
        config.data.path,
        written={
            "the pipeline folder": layout.pipeline_root.rsplit("/", 1)[0],
            "the serving base": layout.serving_base,
            "the edge base": layout.edge_base,
        },
    )


def resolve_data(config: TfxpConfig, probe: DataProbe | None = None) -> TfxpConfig:
    """`config` with `data.split` (and its patterns) and `data.label_offset` made concrete, span folders checked
    (`foundation.data.layout.resolve_spec`, which says when the data is listed and what each error names).

    Raises:
        DataError: see `resolve_spec`.
    """
    resolved = data_layout.resolve_spec(config.data.spec(), probe)
    keys = ("split", "train_pattern", "eval_pattern", "label_offset")
    update = {key: getattr(resolved, key) for key in keys if getattr(resolved, key) != getattr(config.data, key)}
    return config.model_copy(update={"data": config.data.model_copy(update=update)})


def split_patterns(config: TfxpConfig) -> dict[str, str]:
    """ImportExampleGen's input splits: split name → glob relative to `data.path`
    (`foundation.data.layout.split_patterns`).

    Example:
        split_patterns(config)  # {"train": "span-*/train/*", "eval": "span-*/eval/*"} with data.spans=all
    """
    return data_layout.split_patterns(config.data.spec())
