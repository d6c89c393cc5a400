"""LabelMapSchemaGen: TFDV's inferred schema, tightened with the label map (see label_map_schema)."""

# No `from __future__ import annotations` here: TFX parses the component signature's annotations at runtime.

import os

import tensorflow_data_validation as tfdv
from tfx import v1 as tfx
from tfx.types import artifact_utils
from tfx.utils import io_utils

from components.validation.label_map_schema import tighten_schema
from foundation.contract import read_label_map

SCHEMA_FILE = "schema.pbtxt"


@tfx.dsl.components.component
def LabelMapSchemaGen(  # noqa: N802  (TFX names components in CamelCase)
    statistics: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.ExampleStatistics],
    schema: tfx.dsl.components.OutputArtifact[tfx.types.standard_artifacts.Schema],
    labels_path: tfx.dsl.components.Parameter[str],
    label_offset: tfx.dsl.components.Parameter[int] = 0,
) -> None:
    """Infers a schema from the train split's statistics and enforces the label map on it."""
    train_stats_dir = artifact_utils.get_split_uri([statistics], "train")
    stats = tfdv.load_stats_binary(os.path.join(train_stats_dir, "FeatureStats.pb"))
    inferred = tfdv.infer_schema(stats, infer_feature_shape=True)
    labels = read_label_map(labels_path)
    io_utils.write_pbtxt_file(
        os.path.join(schema.uri, SCHEMA_FILE), tighten_schema(inferred, len(labels), label_offset)
    )
