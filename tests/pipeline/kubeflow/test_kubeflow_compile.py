"""`tfxp compile`: the real pipeline through KubeflowV2DagRunner and pipeline.kubeflow.compiler.spec, read back as
kfp.Client reads it.

The golden file tests/golden/kubeflow_imagenet_a100.yaml makes compiler drift (TFX, kfp-pipeline-spec)
and pipeline changes visible in review. After an intended change, regenerate it with
    TFXP_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/pipeline/kubeflow/test_kubeflow_compile.py -k golden
and commit the diff.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

import kfp.components
import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec.pipeline_spec_pb2 import ParameterType
from typer.testing import CliRunner

from components.kfp import fingerprint_task
from components.kfp.entrypoint import ENTRYPOINT, TFX_ENTRYPOINT
from pipeline.cli import app
from pipeline.config import TfxpConfig, load_config
from pipeline.kubeflow.compiler.cache_keys import check_input_fingerprint
from pipeline.kubeflow.compiler.compile import CompileResult, compile_pipeline
from pipeline.kubeflow.compiler.component_setup import KubeflowCompileError, check_nothing_staged
from pipeline.kubeflow.compiler.spec import (
    PipelineDoc,
    SpecPatchError,
    container_tasks,
    exit_handler_tasks,
    load_pipeline_doc,
    pipeline_tasks,
)
from pipeline.kubeflow.emulator.spec_check import spec_problems
from pipeline.layout import output_layout, resolve_data

REPO = Path(__file__).resolve().parents[3]
A100_CONFIG = REPO / "configs" / "imagenet_a100.yaml"
# The default data.path (data/digits) does not exist here, and its `auto` values need to read it: set them.
EXPLICIT_DATA = ("data.split=folders", "data.label_offset=0")
GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "kubeflow_imagenet_a100.yaml"


@pytest.fixture(scope="module")
def default_config() -> TfxpConfig:
    return load_config(None, EXPLICIT_DATA)


@pytest.fixture(scope="module")
def a100_config() -> TfxpConfig:
    return load_config(A100_CONFIG)


@pytest.fixture(scope="module")
def default_compiled(default_config: TfxpConfig, tmp_path_factory: pytest.TempPathFactory) -> CompileResult:
    return compile_pipeline(default_config, tmp_path_factory.mktemp("default") / "pipeline.yaml")


@pytest.fixture(scope="module")
def a100_compiled(a100_config: TfxpConfig, tmp_path_factory: pytest.TempPathFactory) -> CompileResult:
    return compile_pipeline(a100_config, tmp_path_factory.mktemp("a100") / "pipeline.yaml")


def _doc(result: CompileResult) -> PipelineDoc:
    # Exactly how kfp.Client reads the file before it creates a run.
    return load_pipeline_doc(result.path)


def _components(config: TfxpConfig) -> list[Any]:
    from pipeline.pipeline import create_pipeline

    return list(create_pipeline(resolve_data(config)).components)


@pytest.mark.parametrize("which", ["default", "a100"])
def test_tasks_are_the_pipeline_components_in_order(which: str, request: pytest.FixtureRequest) -> None:
    from tfx.orchestration.kubeflow.v2.kubeflow_v2_dag_runner import KUBEFLOW_TFX_CMD

    config: TfxpConfig = request.getfixturevalue(f"{which}_config")
    result: CompileResult = request.getfixturevalue(f"{which}_compiled")
    spec = _doc(result).pipeline_spec
    components = _components(config)

    assert list(result.tasks) == [fingerprint_task.TASK, *(component.id for component in components)]
    assert sorted(spec.root.dag.tasks) == sorted(result.tasks)
    keyed = {"ImportExampleGen", "ServedBaseline", "Trainer"}  # pipeline.kubeflow.compiler.cache_keys
    for component in components:
        upstream = {node.id for node in component.upstream_nodes}
        if component.id in keyed:
            upstream.add(fingerprint_task.TASK)
        assert set(spec.root.dag.tasks[component.id].dependent_tasks) == upstream, component.id
    # Every TFX task runs the configured image with tfxp's entrypoint, which wraps TFX's V2 entrypoint.
    containers = dict(container_tasks(spec))
    assert sorted(containers) == sorted(result.tasks)
    assert {container.image for container in containers.values()} == {config.kubeflow.image}
    fingerprint = containers.pop(fingerprint_task.TASK)
    assert list(fingerprint.command) == ["python", "-m", "components.kfp.fingerprint_task"]
    assert {tuple(container.command) for container in containers.values()} == {("python", "-m", ENTRYPOINT)}
    assert KUBEFLOW_TFX_CMD[-1] == TFX_ENTRYPOINT  # what the entrypoint calls is what TFX's compiler would run
    # Schema 2.1: open-source KFP reads `runtimeValue.constant`, not the deprecated `constantValue`.
    assert spec.schema_version == "2.1.0"


def test_nothing_is_staged_the_trainer_runs_code_from_the_image(default_compiled: CompileResult) -> None:
    from pipeline.pipeline import TRAINER_RUN_FN

    spec = _doc(default_compiled).pipeline_spec
    parameters = spec.root.dag.tasks["Trainer"].inputs.parameters
    assert parameters["run_fn"].runtime_value.constant.string_value == TRAINER_RUN_FN
    for task in spec.root.dag.tasks.values():
        assert not {"module_file", "module_path"} & set(task.inputs.parameters)


def test_a100_trainer_requests_gpus_and_everything_else_cpus(
    a100_config: TfxpConfig, a100_compiled: CompileResult
) -> None:
    doc = _doc(a100_compiled)
    containers = dict(container_tasks(doc.pipeline_spec))
    kubeflow = a100_config.kubeflow

    trainer = containers.pop("Trainer").resources
    assert (trainer.accelerator.resource_type, trainer.accelerator.resource_count) == ("nvidia.com/gpu", "8")
    assert (trainer.accelerator.type, trainer.accelerator.count) == ("nvidia.com/gpu", 8)
    assert (trainer.resource_cpu_limit, trainer.resource_memory_limit) == (
        kubeflow.trainer_cpu,
        kubeflow.trainer_memory,
    )
    for task, container in containers.items():
        assert not container.resources.HasField("accelerator"), task
        assert container.resources.resource_cpu_request == kubeflow.cpu_request
        assert container.resources.resource_memory_request == kubeflow.memory_request

    executors = doc.to_dicts()[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    volume = {"volumeName": "tfxp-artifact-copies", "mountPath": "/gcs", "accessModes": ["ReadWriteOnce"],
              "size": "194Gi", "defaultStorageClass": True}  # fmt: skip
    assert executors.pop("Trainer_executor") == {
        "nodeSelector": {"labels": {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "genericEphemeralVolume": [volume],
    }
    # The tasks that take or make ImageNet's Examples get the volume for the launcher's copies.
    assert executors == {
        f"{task}_executor": {"genericEphemeralVolume": [volume]}
        for task in ("ImportExampleGen", "StatisticsGen", "ExampleValidator", "Evaluator", "EdgeExporter", "RunReport")
    }


def test_a100_retries_caching_root_and_name(a100_config: TfxpConfig, a100_compiled: CompileResult) -> None:
    spec = _doc(a100_compiled).pipeline_spec

    for name, task in spec.root.dag.tasks.items():
        assert task.retry_policy.max_retry_count == a100_config.kubeflow.retries, name
        assert task.retry_policy.backoff_duration.seconds == a100_config.kubeflow.retry_backoff_seconds
        assert task.retry_policy.backoff_max_duration.seconds == a100_config.kubeflow.retry_backoff_max_seconds
        # KFP caches everything but the fingerprint task, which keys the cache, and the run report, which takes
        # the run id and writes the run record (pipeline.kubeflow.compiler.cache_keys).
        assert task.caching_options.enable_cache == (name not in ("InputFingerprint", "RunReport")), name
    assert spec.default_pipeline_root == "gs://my-bucket/tfxp/pipeline-root"
    assert spec.pipeline_info.display_name == "tfxp ResNet-50 ImageNet (8xA100)"
    assert spec.pipeline_info.name == a100_config.pipeline.name


def test_a100_beam_components_run_on_dataflow(a100_compiled: CompileResult) -> None:
    containers = dict(container_tasks(_doc(a100_compiled).pipeline_spec))
    assert "--runner=DataflowRunner" in containers["StatisticsGen"].args


def test_example_gen_and_baseline_are_cached_keyed_by_the_fingerprint(
    default_compiled: CompileResult,
) -> None:
    doc = _doc(default_compiled)
    tasks = doc.pipeline_spec.root.dag.tasks
    uncached = {name for name, task in tasks.items() if not task.caching_options.enable_cache}
    assert uncached == {"InputFingerprint", "RunReport"}
    data = tasks["ImportExampleGen"].inputs.parameters["tfxp_cache_data"].task_output_parameter
    served = tasks["ServedBaseline"].inputs.parameters["served_fingerprint"].task_output_parameter
    assert (data.producer_task, data.output_parameter_key) == ("InputFingerprint", "tfxp_cache_data")
    assert (served.producer_task, served.output_parameter_key) == ("InputFingerprint", "tfxp_cache_served")
    # The fingerprint reads what ImportExampleGen reads: the same data_path parameter and split patterns.
    fingerprint = tasks["InputFingerprint"].inputs.parameters
    assert fingerprint["input_base"].component_input_parameter == "data_path"
    assert fingerprint["input_config"] == tasks["ImportExampleGen"].inputs.parameters["input_config"]
    assert fingerprint["serving_base"] == tasks["ServedBaseline"].inputs.parameters["base_path"]
    # The Trainer is keyed by the label map's content (a renamed class retrains), from its own custom_config.
    labels = tasks["Trainer"].inputs.parameters["tfxp_cache_labels"].task_output_parameter
    assert (labels.producer_task, labels.output_parameter_key) == ("InputFingerprint", "tfxp_cache_labels")
    assert fingerprint["trainer_custom_config"] == tasks["Trainer"].inputs.parameters["custom_config"]
    # A cached ImportExampleGen that nothing keys would never read a new span: refused.
    del tasks["ImportExampleGen"].inputs.parameters["tfxp_cache_data"]
    with pytest.raises(SpecPatchError, match="ImportExampleGen is cached by KFP but not keyed by the InputFingerprint"):
        check_input_fingerprint(doc)


@pytest.mark.parametrize("which", ["default", "a100"])
def test_the_served_baseline_feeds_the_evaluator_on_kubeflow(which: str, request: pytest.FixtureRequest) -> None:
    config: TfxpConfig = request.getfixturevalue(f"{which}_config")
    spec = _doc(request.getfixturevalue(f"{which}_compiled")).pipeline_spec
    tasks = spec.root.dag.tasks
    baseline = tasks["Evaluator"].inputs.artifacts["baseline_model"].task_output_artifact
    assert (baseline.producer_task, baseline.output_artifact_key) == ("ServedBaseline", "baseline_model")
    assert "ServedBaseline" in tasks["Evaluator"].dependent_tasks
    parameters = tasks["ServedBaseline"].inputs.parameters
    assert parameters["base_path"].runtime_value.constant.string_value == output_layout(config).serving_base
    # The max_accuracy_drop gate is compiled in (TFX drops it only when the baseline input is empty).
    eval_config = json.loads(tasks["Evaluator"].inputs.parameters["eval_config"].runtime_value.constant.string_value)
    threshold = eval_config["metrics_specs"][0]["metrics"][1]["threshold"]
    assert threshold["change_threshold"]["absolute"] == pytest.approx(-config.evaluator.max_accuracy_drop - 1e-10)
    assert not [name for name in tasks if "Resolver" in name]


def test_baseline_none_compiles_without_the_baseline_step(tmp_path: Path) -> None:
    result = compile_pipeline(
        load_config(None, [*EXPLICIT_DATA, "evaluator.baseline=none"]), tmp_path / "pipeline.yaml"
    )
    tasks = _doc(result).pipeline_spec.root.dag.tasks
    assert "ServedBaseline" not in tasks
    assert "baseline_model" not in tasks["Evaluator"].inputs.artifacts


def test_the_load_check_gates_the_pusher_on_kubeflow(tmp_path: Path) -> None:
    canary = ("serving.rollout=canary", "serving.version_policy=specific")
    result = compile_pipeline(load_config(A100_CONFIG, canary), tmp_path / "pipeline.yaml")
    spec = _doc(result).pipeline_spec
    assert not spec_problems(spec)
    tasks = spec.root.dag.tasks
    for consumer in ("Pusher", "RunReport"):
        blessing = tasks[consumer].inputs.artifacts["infra_blessing"].task_output_artifact
        assert (blessing.producer_task, blessing.output_artifact_key) == ("LoadCheck", "blessing"), consumer
        assert "LoadCheck" in tasks[consumer].dependent_tasks
    check = tasks["LoadCheck"]
    assert check.inputs.artifacts["model"].task_output_artifact.producer_task == "Trainer"
    assert check.inputs.artifacts["examples"].task_output_artifact.producer_task == "ImportExampleGen"
    assert check.inputs.parameters["model_name"].runtime_value.constant.string_value == "resnet50_imagenet"


def test_warnings_name_what_pods_cannot_read(default_compiled: CompileResult, a100_compiled: CompileResult) -> None:
    warnings = "\n".join(default_compiled.warnings)
    assert "kubeflow.pipeline_root is empty" in warnings
    assert "data.path=data/digits is a local path: pods on Kubeflow do not see it" in warnings
    assert "the edge base (pipeline.output)=tfxp_output/edge/digits is a local path" in warnings
    assert "resolver" not in warnings  # the baseline is the served model: no resolver to drop
    # The A100 config is production-shaped: only its example image, pinned by tag rather than digest, is warned of.
    assert len(a100_compiled.warnings) == 1
    assert "is pinned by tag only" in a100_compiled.warnings[0]


def _normalised(doc: PipelineDoc) -> str:
    # The compile is deterministic; paths of this checkout are the only values that depend on where it runs.
    text = yaml.safe_dump_all(doc.to_dicts(), sort_keys=True)
    return text.replace(str(REPO), "<repo>")


def test_golden_a100_spec(a100_compiled: CompileResult) -> None:
    actual = _normalised(_doc(a100_compiled))
    if os.environ.get("TFXP_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(actual)
    expected = GOLDEN.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "golden", "compiled", n=2))
    assert actual == expected, (
        f"the compiled A100 spec differs from {GOLDEN.name} (TFX/KFP or pipeline drift); if intended, "
        f"regenerate with TFXP_UPDATE_GOLDEN=1 (see the module docstring):\n{diff[:6000]}"
    )


def test_module_files_are_refused_before_compiling() -> None:
    from tfx import v1 as tfx

    trainer = tfx.components.Trainer(
        module_file="trainer_module.py",
        examples=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Examples),
        train_args=tfx.proto.TrainArgs(num_steps=1),
        eval_args=tfx.proto.EvalArgs(num_steps=1),
    )
    with pytest.raises(KubeflowCompileError, match=r"component Trainer sets module_file='trainer_module.py'.*dotted"):
        check_nothing_staged([trainer])


def _compile(tmp_path: Path, *sets: str, out: str = "pipeline.yaml") -> Any:
    args = ["compile", "--out", str(tmp_path / out)]
    for item in (*EXPLICIT_DATA, *sets):
        args += ["--set", item]
    return CliRunner().invoke(app, args)


def test_cli_compile_prints_the_tasks_and_warns_on_latest(tmp_path: Path) -> None:
    # `[bold]` in the path is user text: parsed as Rich markup it would vanish from the lines that name the file.
    out = tmp_path / "[bold]pipeline.yaml"
    result = _compile(
        tmp_path, "kubeflow.image=registry.example.com/tfxp:latest", "pipeline.output=gs://bkt/out", out=out.name
    )

    assert result.exit_code == 0, result.output
    assert out.is_file()
    assert "Trainer" in result.output and "ImportExampleGen" in result.output
    assert "warning:" in result.output
    assert "uses the `latest` tag" in result.output
    assert f"submit with: tfxp submit {out} --host URL --wait" in " ".join(result.output.split())
    assert "run parameter data_path (default data/digits)" in result.output
    spec = load_pipeline_doc(out).pipeline_spec
    assert spec.default_pipeline_root == "gs://bkt/out/tfxp-digits/root"


def test_cli_gpus_without_accelerator_type_is_a_clear_error(tmp_path: Path) -> None:
    result = _compile(tmp_path, "kubeflow.trainer_accelerator.count=8")

    assert result.exit_code == 2
    assert "kubeflow.trainer_accelerator.count is 8 but kubeflow.trainer_accelerator.type is empty" in result.output
    assert not (tmp_path / "pipeline.yaml").exists()


@pytest.mark.parametrize(
    ("sets", "out", "message"),
    [
        (
            ("kubeflow.trainer_memory=lots",),
            "pipeline.yaml",
            "`kubeflow.trainer_memory` = 'lots': 'lots' is not a Kubernetes quantity",
        ),
        (("kubeflow.uncached_components=[ExampleGen]",), "pipeline.yaml", "names ExampleGen, which the compiled"),
        (("kubeflow.trainer_tolerations=[gpu]",), "pipeline.yaml", "kubeflow.trainer_tolerations: 'gpu' is not"),
        ((), "pipeline.json", "kfp.Client accepts .yaml/.yml pipeline files"),
    ],
)
def test_cli_compile_bad_input(tmp_path: Path, sets: tuple[str, ...], out: str, message: str) -> None:
    result = _compile(tmp_path, *sets, out=out)

    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_every_executor_class_the_spec_names_is_importable(a100_compiled: CompileResult) -> None:
    # What the image must contain: TFX's executors and the project's (installed from this repository).
    import importlib

    for task, container in container_tasks(_doc(a100_compiled).pipeline_spec):
        if task == "InputFingerprint":
            continue  # not a TFX executor: components.kfp.fingerprint_task
        args = list(container.args)
        path = args[args.index("--executor_class_path") + 1]
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name), f"{task}: {path}"


def test_run_parameters_default_to_the_config(default_config: TfxpConfig, default_compiled: CompileResult) -> None:
    spec = _doc(default_compiled).pipeline_spec
    declared = json_format.MessageToDict(spec.root.input_definitions)["parameters"]

    assert declared == {
        "data_path": {"parameterType": "STRING", "defaultValue": default_config.data.path, "isOptional": True},
        "train_args": {
            "parameterType": "STRING",
            "defaultValue": json.dumps({"num_steps": default_config.trainer.train_steps}, indent=2),
            "isOptional": True,
        },
    }
    assert default_compiled.parameters == {name: value["defaultValue"] for name, value in declared.items()}
    tasks = spec.root.dag.tasks
    assert tasks["ImportExampleGen"].inputs.parameters["input_base"].component_input_parameter == "data_path"
    assert tasks["Trainer"].inputs.parameters["train_args"].component_input_parameter == "train_args"
    # kfp's own SDK reads them as the pipeline's inputs, with their defaults.
    component = kfp.components.load_component_from_file(str(default_compiled.path))
    assert {name: spec.default for name, spec in component.component_spec.inputs.items()} == {
        name: value["defaultValue"] for name, value in declared.items()
    }


def test_the_pipeline_factory_itself_has_no_run_parameters(default_config: TfxpConfig) -> None:
    # LocalDagRunner runs create_pipeline as it is: plain values, no RuntimeParameter.
    from tfx.orchestration import data_types

    for component in _components(default_config):
        for key, value in component.exec_properties.items():
            assert not isinstance(value, data_types.RuntimeParameter), (component.id, key)


@pytest.fixture(scope="module")
def notify_compiled(default_config: TfxpConfig, tmp_path_factory: pytest.TempPathFactory) -> CompileResult:
    config = default_config.model_copy(
        update={"kubeflow": default_config.kubeflow.model_copy(update={"notify_url": "https://hooks.example.com/x"})}
    )
    return compile_pipeline(config, tmp_path_factory.mktemp("notify") / "pipeline.yaml")


def test_notify_url_adds_an_exit_handler_that_sees_the_whole_run(
    default_compiled: CompileResult, notify_compiled: CompileResult
) -> None:
    spec = _doc(notify_compiled).pipeline_spec
    root = spec.root.dag.tasks

    assert notify_compiled.tasks == (*default_compiled.tasks, "RunNotice")
    assert sorted(root) == ["RunNotice", "tfx-dag"]
    assert sorted(pipeline_tasks(spec)) == sorted(notify_compiled.tasks)
    # What `tfxp submit` checks the server's version for; a spec without notify_url has none.
    assert exit_handler_tasks(spec) == ["RunNotice"]
    assert exit_handler_tasks(_doc(default_compiled).pipeline_spec) == []
    # run-spec's whole-spec check (pipeline.kubeflow.emulator.spec_check) passes what tfxp compiles, exit handler
    # or not.
    assert spec_problems(spec) == [] and spec_problems(_doc(default_compiled).pipeline_spec) == []
    notice = root["RunNotice"]
    assert list(notice.dependent_tasks) == ["tfx-dag"]
    assert notice.trigger_policy.strategy == notice.trigger_policy.ALL_UPSTREAM_TASKS_COMPLETED
    assert notice.inputs.parameters["final_status"].task_final_status.producer_task == "tfx-dag"
    assert notice.inputs.parameters["run_id"].runtime_value.constant.string_value == "{{$.pipeline_job_uuid}}"
    assert notice.inputs.parameters["notify_url"].runtime_value.constant.string_value == "https://hooks.example.com/x"
    assert not notice.caching_options.enable_cache  # a cached exit handler would not report the run
    final_status = spec.components["RunNotice"].input_definitions.parameters["final_status"]
    assert final_status.parameter_type == ParameterType.TASK_FINAL_STATUS  # as kfp types dsl.PipelineTaskFinalStatus
    # The run parameters reach the tasks inside the DAG the exit handler watches.
    dag = spec.components["tfx-dag"]
    assert dag.input_definitions.parameters.keys() == spec.root.input_definitions.parameters.keys()
    assert {key: value.component_input_parameter for key, value in root["tfx-dag"].inputs.parameters.items()} == {
        "data_path": "data_path",
        "train_args": "train_args",
    }
    assert dag.dag.tasks["ImportExampleGen"].inputs.parameters["input_base"].component_input_parameter == "data_path"
    # Patched like every task: the image, resources, retries; the rest of the pipeline's caching unchanged.
    containers = dict(container_tasks(spec))
    assert containers["RunNotice"].image == containers["Trainer"].image
    args = list(containers["RunNotice"].args)
    assert args[args.index("--executor_class_path") + 1] == "components.notify.component.RunNotice_Executor"
    assert {name for name, task in pipeline_tasks(spec).items() if not task.caching_options.enable_cache} == {
        "InputFingerprint",
        "RunNotice",
        "RunReport",
    }
    assert any(
        "kubeflow.notify_url is written into the compiled spec" in warning for warning in notify_compiled.warnings
    )


def test_every_artifact_type_the_spec_names_is_importable(default_compiled: CompileResult) -> None:
    # TFX's v2 entrypoint rebuilds each input and output artifact from its schema title: a first-party title maps
    # to TFX's class, any other title is imported as `module.Class`.
    from tfx.orchestration.kubeflow.v2.compiler_utils import TITLE_TO_CLASS_PATH
    from tfx.utils import import_utils

    spec = _doc(default_compiled).pipeline_spec
    titles = {
        yaml.safe_load(artifact.artifact_type.instance_schema)["title"]
        for component in spec.components.values()
        for definitions in (component.input_definitions, component.output_definitions)
        for artifact in definitions.artifacts.values()
    }
    unimportable = []
    for title in sorted(titles):
        try:
            import_utils.import_class_by_path(TITLE_TO_CLASS_PATH.get(title, title))
        except ImportError:
            unimportable.append(title)
    assert not unimportable, f"artifact types the v2 entrypoint cannot import: {unimportable}"


def test_the_run_report_is_the_last_task_and_outputs_an_html_report(a100_compiled: CompileResult) -> None:
    spec = _doc(a100_compiled).pipeline_spec
    assert list(a100_compiled.tasks)[-1] == "RunReport"
    assert {"Pusher", "EdgeExporter", "Evaluator"} <= set(spec.root.dag.tasks["RunReport"].dependent_tasks)
    component = spec.components[spec.root.dag.tasks["RunReport"].component_ref.name]
    schema = component.output_definitions.artifacts["report"].artifact_type.instance_schema
    # Not `system.HTML` (the KFP UI's page type): TFX's v2 entrypoint imports the title as a class path.
    assert yaml.safe_load(schema)["title"] == "components.HtmlReport"


def _example_gen_parameters(result: CompileResult) -> dict[str, Any]:
    import json

    parameters = _doc(result).pipeline_spec.root.dag.tasks["ImportExampleGen"].inputs.parameters
    values = {name: parameter.runtime_value.constant for name, parameter in parameters.items()}
    plain = {name: value.string_value or value.number_value for name, value in values.items()}
    plain["input_config"] = {s["name"]: s["pattern"] for s in json.loads(plain["input_config"])["splits"]}
    return plain


def test_a100_reads_the_flat_imagenet_shards_as_they_are(a100_compiled: CompileResult) -> None:
    from components.example_gen.executor import Executor

    parameters = _example_gen_parameters(a100_compiled)
    # input_base is the `data_path` run parameter, whose default is data.path.
    assert a100_compiled.parameters["data_path"] == "gs://my-bucket/imagenet"
    assert parameters["input_config"] == {"train": "train-*", "eval": "validation-*"}
    assert parameters["spans"] == "none"
    containers = dict(container_tasks(_doc(a100_compiled).pipeline_spec))
    args = list(containers["ImportExampleGen"].args)
    assert args[args.index("--executor_class_path") + 1] == f"{Executor.__module__}.{Executor.__name__}"


def test_compile_detects_a_readable_data_path_and_carries_the_span_policy(tmp_path: Path) -> None:
    from foundation.data.tfrecords import make_example, write_shards

    for span in (1, 2, 3):
        for split in ("train", "validation"):
            write_shards(
                tmp_path / "data" / f"span-{span}" / split,
                [0, 1],
                1,
                lambda label: make_example(b"png", label + 1, f"class{label}").SerializeToString(),
            )
    (tmp_path / "data" / "labels.txt").write_text("class0\nclass1\n")
    config = load_config(None, [f"data.path={tmp_path / 'data'}", "data.spans=2"])
    result = compile_pipeline(config, tmp_path / "pipeline.yaml")

    parameters = _example_gen_parameters(result)
    assert parameters["input_config"] == {"train": "span-*/train/*", "eval": "span-*/validation/*"}
    # The span selection is a run parameter, with the config's value as its default.
    example_gen = _doc(result).pipeline_spec.root.dag.tasks["ImportExampleGen"]
    assert example_gen.inputs.parameters["spans"].component_input_parameter == "spans"
    assert result.parameters["spans"] == "2"
    schema = _doc(result).pipeline_spec.root.dag.tasks["SchemaGen"].inputs.parameters
    assert schema["label_offset"].runtime_value.constant.number_value == 1  # labels 1 and 2 for class0, class1
    # The drift checks between spans: no resolver, the previous spans' statistics from the cache under the output.
    validator = _doc(result).pipeline_spec.root.dag.tasks["ExampleValidator"].inputs.parameters
    drift = json.loads(validator["drift"].runtime_value.constant.string_value)
    assert drift["cache_dir"] == f"{config.pipeline.output}/statistics"
    assert drift["serving_base"] == output_layout(config).serving_base
    assert drift["options"]["action"] == "fail"
    # A drift stop files the run record itself (the RunReport never runs after it), beside the RunReport's.
    record_dir = validator["run_record_dir"].runtime_value.constant.string_value
    assert record_dir == f"{output_layout(config).serving_base}/runs"


def test_compile_refuses_auto_when_the_data_cannot_be_read(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "compile",
            "--out",
            str(tmp_path / "pipeline.yaml"),
            "--set",
            "data.path=gs://no-such-bucket-for-tfxp-tests/imagenet",
        ],
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert (
        "data.split is auto, but data.path gs://no-such-bucket-for-tfxp-tests/imagenet cannot be read from here" in text
    )
    assert "set it explicitly: data.train_pattern and data.eval_pattern" in text
    assert not (tmp_path / "pipeline.yaml").exists()


def test_storage_no_pod_can_open_is_refused_before_the_data_is_read(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["compile", "--out", str(tmp_path / "pipeline.yaml"), "--set", "data.path=s3://bucket/imagenet"]
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "data.path=s3://bucket/imagenet: the executors open it themselves with TensorFlow" in text
    assert "data.split is auto" not in text
