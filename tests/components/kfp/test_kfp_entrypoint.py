"""The container entrypoint against the executor input the open-source KFP backend builds, checked with TFX's own
parser (`kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict`), which is what fails on a real cluster.

The executor inputs below are shaped as kubeflow/pipelines `backend/src/v2` builds them (commit 7b70c7b):
inputs rebuilt from MLMD (`metadata/client.go:1144`, `converter.go:181-221`: name = MLMD id, type
`instanceSchema: ""`, metadata with `display_name` and `store_session_info`), outputs from `provisionOutputs`
(`driver/driver.go:733-802`: name = key, URIs `<root>/<pipeline>/<run>/<task>/<uuid>/<key>`, `executor-logs`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as tfx_entrypoint

from components.kfp.entrypoint import EntrypointError, adapt_executor_input, restore_output_uris
from components.kfp.launcher_paths import LauncherPathError, local_path_for_uri, opens_directly

EXAMPLES_SCHEMA = "title: tfx.Examples\ntype: object\n"
STATISTICS_SCHEMA = "title: tfx.ExampleStatistics\ntype: object\n"
ROOT = "minio://mlpipeline/v2/artifacts/tfxp-digits/7d0c/StatisticsGen/1a2b"


def _kfp_executor_input(root: str = "minio://mlpipeline/v2/artifacts") -> pipeline_spec_pb2.ExecutorInput:
    task_root = f"{root}/tfxp-digits/7d0c/StatisticsGen/1a2b"
    return json_format.ParseDict(
        {
            "inputs": {
                "artifacts": {
                    "examples": {
                        "artifacts": [
                            {
                                "name": "41",
                                "uri": f"{root}/tfxp-digits/7d0c/ImportExampleGen/9f8e/examples",
                                "type": {"instanceSchema": ""},
                                "metadata": {
                                    "split_names": '["train", "eval"]',
                                    "display_name": "examples",
                                    "store_session_info": '{"Provider":"minio"}',
                                },
                            }
                        ]
                    }
                },
                "parameterValues": {"exclude_splits": "[]", "tfxp_cache_data": "spans 1: 2 files"},
            },
            "outputs": {
                "artifacts": {
                    "statistics": {
                        "artifacts": [
                            {
                                "name": "statistics",
                                "uri": f"{task_root}/statistics",
                                "type": {"instanceSchema": STATISTICS_SCHEMA},
                            }
                        ]
                    },
                    "executor-logs": {
                        "artifacts": [
                            {
                                "name": "executor-logs",
                                "uri": f"{task_root}/executor-logs",
                                "type": {"schemaTitle": "system.Artifact"},
                            }
                        ]
                    },
                },
                "outputFile": "/minio/mlpipeline/v2/artifacts/tfxp-digits/7d0c/StatisticsGen/1a2b/output_metadata.json",
            },
        },
        pipeline_spec_pb2.ExecutorInput(),
    )


def _inputs_spec() -> pipeline_spec_pb2.ComponentInputsSpec:
    spec = pipeline_spec_pb2.ComponentInputsSpec()
    spec.artifacts["examples"].artifact_type.instance_schema = EXAMPLES_SCHEMA
    return spec


def test_tfx_alone_cannot_read_the_open_source_executor_input() -> None:
    # What every task hits on open-source KFP without the entrypoint (tensorflow/tfx#7768).
    executor_input = _kfp_executor_input()
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'get'"):
        tfx_entrypoint.parse_raw_artifact_dict(executor_input.inputs.artifacts)
    with pytest.raises(ImportError, match=r"system\.Artifact"):
        tfx_entrypoint.parse_raw_artifact_dict(executor_input.outputs.artifacts)


def test_the_adapted_input_is_what_tfx_reads(tmp_path: Path) -> None:
    executor_input = _kfp_executor_input()

    adapted = adapt_executor_input(executor_input, _inputs_spec(), launcher_root=str(tmp_path))

    inputs = tfx_entrypoint.parse_raw_artifact_dict(executor_input.inputs.artifacts)
    outputs = tfx_entrypoint.parse_raw_artifact_dict(executor_input.outputs.artifacts)
    [examples] = inputs["examples"]
    assert type(examples).__name__ == "Examples"
    assert examples.split_names == '["train", "eval"]'
    # The launcher's local copy, not the minio:// URI TensorFlow cannot open.
    assert examples.uri == f"{tmp_path}/minio/mlpipeline/v2/artifacts/tfxp-digits/7d0c/ImportExampleGen/9f8e/examples"
    assert list(outputs) == ["statistics"]  # executor-logs is the launcher's
    assert outputs["statistics"][0].uri.startswith(f"{tmp_path}/minio/mlpipeline/")
    assert adapted.restored_types == ["examples"]
    assert adapted.dropped_outputs == ["executor-logs"]
    assert adapted.dropped_parameters == ["tfxp_cache_data"]
    assert "tfxp_cache_data" not in executor_input.inputs.parameter_values
    assert executor_input.inputs.parameter_values["exclude_splits"].string_value == "[]"


def test_import_example_gen_reads_the_spans_its_cache_key_was_taken_of(tmp_path: Path) -> None:
    # The InputFingerprint task listed spans 1 and 3; a span that arrives before ImportExampleGen starts is not
    # read by this run (it would be read but not fingerprinted, and the next run on the same spans retrain).
    executor_input = _kfp_executor_input()
    executor_input.inputs.parameter_values["tfxp_cache_data"].string_value = "spans 1,3: 4 files, 9 bytes, sha256 0"
    adapted = adapt_executor_input(executor_input, _inputs_spec(), launcher_root=str(tmp_path))
    assert adapted.selected_spans == "1,3"
    properties = tfx_entrypoint.parse_execution_properties(executor_input.inputs.parameter_values, None, _inputs_spec())
    assert properties["selected_spans"] == "1,3" and "tfxp_cache_data" not in properties
    executor_input = _kfp_executor_input()
    executor_input.inputs.parameter_values["tfxp_cache_data"].string_value = "2 files, 9 bytes, sha256 0"
    adapt_executor_input(executor_input, _inputs_spec(), launcher_root=str(tmp_path))
    assert "selected_spans" not in executor_input.inputs.parameter_values  # no spans: ImportExampleGen as TFX's


def test_output_uris_are_restored_for_the_launchers_upload(tmp_path: Path) -> None:
    executor_input = _kfp_executor_input()
    adapted = adapt_executor_input(executor_input, _inputs_spec(), launcher_root=str(tmp_path))
    local = executor_input.outputs.artifacts["statistics"].artifacts[0].uri
    written = pipeline_spec_pb2.ExecutorOutput()
    written.artifacts["statistics"].artifacts.add(uri=local).metadata.update({"span": 0})

    restore_output_uris(written, adapted.local_to_remote)

    # mergeRuntimeArtifacts (launcher_v2.go:1188) takes a non-empty URI from the executor output, then uploads from
    # LocalPathForURI(uri): a local path there would be skipped ("does not have a recognized storage URI").
    assert written.artifacts["statistics"].artifacts[0].uri == f"{ROOT}/statistics"


def test_gcs_and_vertex_inputs_pass_through() -> None:
    executor_input = _kfp_executor_input(root="gs://bucket/root")
    examples = executor_input.inputs.artifacts["examples"].artifacts[0]
    examples.type.instance_schema = EXAMPLES_SCHEMA  # Vertex AI: typed
    examples.name = "projects/123/locations/us-central1/metadataStores/default/artifacts/41"
    del executor_input.outputs.artifacts["executor-logs"]
    before = json_format.MessageToDict(executor_input)

    adapted = adapt_executor_input(executor_input, None)

    assert adapted.local_to_remote == {}
    assert adapted.restored_types == []
    before["inputs"]["parameterValues"].pop("tfxp_cache_data")
    before["inputs"]["parameterValues"]["selected_spans"] = "1"
    assert json_format.MessageToDict(executor_input) == before


def test_an_untyped_input_the_spec_does_not_declare_is_refused() -> None:
    with pytest.raises(EntrypointError, match=r"input artifact examples has no type .* recompile the pipeline"):
        adapt_executor_input(_kfp_executor_input(), pipeline_spec_pb2.ComponentInputsSpec())


@pytest.mark.parametrize(
    ("uri", "local"),
    [
        ("gs://b/k/x", "/gcs/b/k/x"),
        ("minio://mlpipeline/v2/a", "/minio/mlpipeline/v2/a"),
        ("s3://b/k", "/s3/b/k"),
        ("oci://registry.io/models/m:1", "/oci/registry.io_models_m:1/models"),  # a modelcar's folder
    ],
)
def test_local_path_for_uri_is_the_launchers(uri: str, local: str) -> None:
    # launcher_v2.go:1239-1253
    assert local_path_for_uri(uri, "/") == local


def test_unknown_schemes_have_no_local_path() -> None:
    with pytest.raises(LauncherPathError, match="LocalPathForURI"):
        local_path_for_uri("hdfs://n/x", "/")
    assert opens_directly("gs://b/x") and opens_directly("/data/x")
    assert not opens_directly("minio://b/x") and not opens_directly("s3://b/x")


def test_the_compiled_spec_runs_every_tfx_task_through_the_entrypoint() -> None:
    import yaml

    golden = Path(__file__).resolve().parents[2] / "golden" / "kubeflow_imagenet_a100.yaml"
    spec = next(yaml.safe_load_all(golden.read_text()))
    executors = spec["deploymentSpec"]["executors"]
    commands = {name: executor["container"]["command"] for name, executor in executors.items()}
    assert commands.pop("InputFingerprint_executor") == ["python", "-m", "components.kfp.fingerprint_task"]
    assert set(map(json.dumps, commands.values())) == {json.dumps(["python", "-m", "components.kfp.entrypoint"])}
