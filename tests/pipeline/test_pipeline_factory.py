"""create_pipeline is a pure factory: same config → same components, no file system access."""

from __future__ import annotations

import json

import pytest

from components.trainer.options import parse_custom_config
from edge.options import EdgeOptions
from pipeline.component_settings import beam_pipeline_args, eval_config
from pipeline.config import build_config
from pipeline.layout import output_layout
from pipeline.pipeline import TRAINER_RUN_FN, create_pipeline

EXPECTED_ORDER = [
    "ImportExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Trainer",
    "Evaluator", "Pusher",
]  # fmt: skip


def _config(*overrides: str):  # type: ignore[no-untyped-def]
    return build_config({}, ["data.path=/nonexistent/data", "pipeline.output=/nonexistent/out", *overrides])


def test_components_in_order_with_paths_from_the_config() -> None:
    pipeline = create_pipeline(_config())
    ids = [component.id for component in pipeline.components]
    assert [i for i in EXPECTED_ORDER if i in ids] == EXPECTED_ORDER
    assert pipeline.pipeline_info.pipeline_root == "/nonexistent/out/tfxp-digits/root"
    pusher = next(c for c in pipeline.components if c.id == "Pusher")
    assert "/nonexistent/out/serving/digits" in str(pusher.exec_properties["push_destination"])
    trainer = next(c for c in pipeline.components if c.id == "Trainer")
    assert trainer.exec_properties["run_fn"] == TRAINER_RUN_FN
    assert trainer.exec_properties.get("module_file") in (None, "")


def test_trainer_waits_for_validation() -> None:
    pipeline = create_pipeline(_config())
    trainer = next(c for c in pipeline.components if c.id == "Trainer")
    assert "ExampleValidator" in {node.id for node in trainer.upstream_nodes}


@pytest.mark.parametrize(("source", "component_type"), [
    ("label_map", "LabelMapSchemaGen"), ("infer", "SchemaGen"), ("/schemas/schema.pbtxt", "ImportSchemaGen"),
])  # fmt: skip
def test_schema_source_picks_the_component(source: str, component_type: str) -> None:
    pipeline = create_pipeline(_config(f"data.schema={source}"))
    schema_gen = next(c for c in pipeline.components if c.id == "SchemaGen")
    assert type(schema_gen).__name__ == component_type


def test_hash_split_uses_configured_buckets() -> None:
    pipeline = create_pipeline(_config("data.split=hash", "data.train_buckets=4", "data.eval_buckets=1"))
    example_gen = pipeline.components[0]
    output_config = str(example_gen.exec_properties["output_config"])
    assert '"hash_buckets": 4' in output_config and '"hash_buckets": 1' in output_config


def test_eval_config_thresholds_come_from_config() -> None:
    config = eval_config(_config("evaluator.min_accuracy=0.8", "evaluator.max_accuracy_drop=0.02"))
    assert config.model_specs[0].signature_name == "serving_tf_example"
    threshold = config.metrics_specs[0].metrics[1].threshold
    assert threshold.value_threshold.lower_bound.value == pytest.approx(0.8)
    assert threshold.change_threshold.absolute.value == pytest.approx(-0.02)


def test_beam_args() -> None:
    assert beam_pipeline_args(_config()) == ["--direct_running_mode=in_memory"]
    args = beam_pipeline_args(
        _config("beam.direct_running_mode=multi_processing", "beam.direct_num_workers=2", "beam.extra_args=[--x=1]")
    )
    assert args == ["--direct_running_mode=multi_processing", "--direct_num_workers=2", "--x=1"]


def test_layout_follows_output_contract() -> None:
    layout = output_layout(_config())
    assert layout.metadata_path == "/nonexistent/out/tfxp-digits/metadata.db"
    assert layout.summary_path == "/nonexistent/out/run-summary.json"
    assert layout.edge_base == "/nonexistent/out/edge/digits"


def test_tfma_reads_labels_through_the_models_own_signature() -> None:
    from components.trainer.export import EVAL_LABEL_KEY, SIGNATURE_EVAL_LABELS

    spec = eval_config(_config()).model_specs[0]
    assert list(spec.preprocessing_function_names) == [SIGNATURE_EVAL_LABELS]
    assert spec.label_key == EVAL_LABEL_KEY


def test_trainer_and_edge_exporter_receive_their_sections_as_json() -> None:
    config = _config("trainer.train_steps=7", "trainer.augment=[flip]", "edge.mode=dynamic", "data.label_offset=1")
    components = {component.id: component for component in create_pipeline(config).components}

    run = parse_custom_config(json.loads(components["Trainer"].exec_properties["custom_config"]))
    assert run.trainer == config.trainer
    assert (run.labels_path, run.label_offset, run.warmup_requests) == ("/nonexistent/data/labels.txt", 1, 4)
    edge = components["EdgeExporter"].exec_properties
    assert EdgeOptions.model_validate_json(edge["options"]) == config.edge
    assert (edge["push_base"], edge["label_offset"]) == ("/nonexistent/out/edge/digits", 1)


def test_disabled_edge_section_leaves_out_the_edge_exporter() -> None:
    ids = [component.id for component in create_pipeline(_config("edge.enabled=false")).components]
    assert "EdgeExporter" not in ids


def test_the_served_model_is_the_evaluators_baseline() -> None:
    components = {component.id: component for component in create_pipeline(_config()).components}
    baseline = components["ServedBaseline"]
    assert baseline.exec_properties["base_path"] == "/nonexistent/out/serving/digits"
    assert components["Evaluator"].inputs["baseline_model"] is baseline.outputs["baseline_model"]
    assert "ServedBaseline" in {node.id for node in components["Evaluator"].upstream_nodes}
    assert not any("Resolver" in name for name in components)  # works without ML Metadata resolvers


def test_baseline_none_compares_with_nothing() -> None:
    components = {
        component.id: component for component in create_pipeline(_config("evaluator.baseline=none")).components
    }
    assert "ServedBaseline" not in components
    assert "baseline_model" not in components["Evaluator"].inputs


@pytest.mark.parametrize(("warm_start", "serving_base"), [("none", ""), ("served", "/nonexistent/out/serving/digits")])
def test_warm_start_tells_the_trainer_where_the_served_model_is(warm_start: str, serving_base: str) -> None:
    components = {c.id: c for c in create_pipeline(_config(f"trainer.warm_start={warm_start}")).components}
    run = parse_custom_config(json.loads(components["Trainer"].exec_properties["custom_config"]))
    assert (run.trainer.warm_start, run.serving_base) == (warm_start, serving_base)
    # Not a Trainer input: a rerun on the same data stays cached when a new version is served.
    assert "base_model" not in components["Trainer"].inputs


@pytest.mark.parametrize(
    ("overrides", "absent"),
    [((), set()), (("edge.enabled=false",), {"edge_model"}), (("evaluator.baseline=none",), {"baseline_model"})],
)
def test_the_run_report_is_last_and_reads_every_output_there_is(overrides: tuple[str, ...], absent: set[str]) -> None:
    components = list(
        create_pipeline(_config(*overrides, "kubeflow.notify_url=https://hooks.example/secret")).components
    )
    report = components[-1]
    assert report.id == "RunReport"
    wired = {"examples", "statistics", "anomalies", "model", "model_run", "evaluation", "model_blessing"}
    wired |= {"baseline_model", "pushed_model", "edge_model"} - absent
    assert set(report.inputs) == wired
    upstream = {node.id for node in report.upstream_nodes}
    assert {"Pusher", "Evaluator", "Trainer"} <= upstream
    assert ("EdgeExporter" in upstream) == ("edge_model" in wired)
    shown = json.loads(report.exec_properties["config"])
    assert shown["evaluator"]["min_accuracy"] == 0.9
    assert shown["kubeflow"]["notify_url"] == "(set; not shown)"  # a webhook is a secret: not on the page
    assert report.exec_properties["labels_path"] == "/nonexistent/data/labels.txt"


def test_without_the_load_check_the_pusher_reads_no_infra_blessing() -> None:
    components = {component.id: component for component in create_pipeline(_config()).components}
    assert "LoadCheck" not in components
    assert "infra_blessing" not in components["Pusher"].inputs
    assert "infra_blessing" not in components["RunReport"].inputs


@pytest.mark.parametrize(
    "overrides",
    [("serving.load_check=true",), ("serving.rollout=canary", "serving.version_policy=specific")],
)
def test_the_load_check_gates_the_pusher(overrides: tuple[str, ...]) -> None:
    components = list(create_pipeline(_config(*overrides)).components)
    ids = [component.id for component in components]
    assert ids.index("Evaluator") < ids.index("LoadCheck") < ids.index("Pusher")
    by_id = {component.id: component for component in components}
    check = by_id["LoadCheck"]
    assert check.inputs["model"] is by_id["Trainer"].outputs["model"]
    assert check.inputs["examples"] is by_id["ImportExampleGen"].outputs["examples"]
    assert check.exec_properties["model_name"] == "digits"
    assert by_id["Pusher"].inputs["infra_blessing"] is check.outputs["blessing"]
    assert by_id["RunReport"].inputs["infra_blessing"] is check.outputs["blessing"]
