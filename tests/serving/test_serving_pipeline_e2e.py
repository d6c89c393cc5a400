"""The model the pipeline pushes, served like `tfxp serve` serves it: one answer over every path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from typer.testing import CliRunner

from foundation.data.tfrecords import iter_examples
from pipeline.cli import app
from serving.batching import BatchingOptions
from serving.grpc_client import GrpcClient
from serving.model_config import ModelConfig
from serving.rest_client import RestClient
from serving.server import ModelServer
from serving.server_options import ServerOptions

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pushed(digits_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pipeline") / "out"
    overrides = [
        f"data.path={digits_dir}",
        "trainer.train_steps=60",  # serving needs a pushed model, not an accurate one
        "evaluator.min_accuracy=0",
        "evaluator.max_accuracy_drop=1",
        "edge.enabled=false",
    ]
    args = ["run", "--config", "configs/default.yaml", "--output", str(out)]
    for override in overrides:
        args += ["--set", override]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "run-summary.json").read_text())
    assert summary["blessed"], summary
    return Path(summary["pushed_model_dir"])


def test_pushed_model_gives_the_same_probabilities_over_grpc_rest_and_in_process(
    pushed: Path, digits_dir: Path
) -> None:
    examples = list(iter_examples(sorted((digits_dir / "eval").glob("part-*"))))[:5]
    images = [example.features.feature["image/encoded"].bytes_list.value[0] for example in examples]
    loaded = tf.saved_model.load(str(pushed))
    expected = loaded.signatures["serving_default"](image_bytes=tf.constant(images))["probabilities"].numpy()
    options = ServerOptions(grpc_port=0, rest_port=0, batching=BatchingOptions(max_batch_size=8))
    with ModelServer([ModelConfig("digits", pushed.parent)], options) as server:
        with GrpcClient(server.grpc_target, "digits") as grpc_client:
            over_grpc = grpc_client.predict_images(images)
        with (
            RestClient(server.rest_url, "digits") as rows,
            RestClient(server.rest_url, "digits", columnar=True) as cols,
        ):
            over_rows, over_columns = rows.predict_images(images), cols.predict_images(images)
    assert over_grpc.model_version == int(pushed.name)
    for prediction in (over_grpc, over_rows, over_columns):
        np.testing.assert_allclose(prediction.probabilities, expected, atol=1e-5)
    assert expected.shape == (5, 10)
