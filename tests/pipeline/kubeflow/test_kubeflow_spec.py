"""pipeline.kubeflow.compiler.spec and .pod on hand-written KFP IR specs: quantities, the patch, loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp.pipeline_spec import pipeline_spec_pb2
from kfp_fake import ir_task

from pipeline.kubeflow.compiler.pod import (
    Accelerator,
    Resources,
    Toleration,
    cpu_cores,
    image_warnings,
    memory_gigabytes,
    parse_node_label,
    parse_toleration,
)
from pipeline.kubeflow.compiler.spec import (
    PipelineDoc,
    RetryPolicy,
    SpecPatch,
    SpecPatchError,
    container_tasks,
    load_pipeline_doc,
    patch_pipeline_doc,
    pipeline_tasks,
    write_pipeline_doc,
)

IMAGE = "registry.example.com/ml/tfxp:0.1.0"


def _artifact(schema: str) -> dict[str, Any]:
    return {"artifactType": {"instanceSchema": f"title: {schema}\ntype: object\n"}}


def _container(executor_class: str) -> dict[str, Any]:
    return {"container": {"image": "gcr.io/tfx-oss-public/tfx:1.21.0", "command": ["python"], "args": [executor_class]}}


def _spec() -> dict[str, Any]:
    """Trainer → Evaluator."""
    return {
        "pipelineInfo": {"name": "tfxp-test"},
        "schemaVersion": "2.1.0",
        "sdkVersion": "tfx-1.21.0",
        "components": {
            "Trainer": {
                "executorLabel": "Trainer_executor",
                "outputDefinitions": {"artifacts": {"model": _artifact("tfx.Model")}},
            },
            "Evaluator": {
                "executorLabel": "Evaluator_executor",
                "inputDefinitions": {"artifacts": {"model": _artifact("tfx.Model")}},
            },
        },
        "deploymentSpec": {
            "executors": {
                "Trainer_executor": _container("GenericExecutor"),
                "Evaluator_executor": _container("EvaluatorExecutor"),
            }
        },
        "root": {
            "dag": {
                "tasks": {
                    "Trainer": ir_task("Trainer", cachingOptions={"enableCache": True}),
                    "Evaluator": ir_task(
                        "Evaluator",
                        cachingOptions={"enableCache": True},
                        dependentTasks=["Trainer"],
                        inputs={
                            "artifacts": {
                                "model": {
                                    "taskOutputArtifact": {"producerTask": "Trainer", "outputArtifactKey": "model"}
                                },
                            }
                        },
                    ),
                }
            }
        },
    }


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(_spec()))
    return path


@pytest.fixture
def doc(spec_file: Path) -> PipelineDoc:
    return load_pipeline_doc(spec_file)


def _patch(**changes: Any) -> SpecPatch:
    values: dict[str, Any] = {
        "image": IMAGE,
        "resources": Resources("2", "8G"),
        "task_resources": {"Trainer": Resources("80", "560G", Accelerator("nvidia.com/gpu", 8))},
        "retry": RetryPolicy(max_retries=2, backoff_seconds=120, backoff_factor=2.0, backoff_max_seconds=1800),
        "enable_cache": True,
        "uncached_tasks": frozenset({"Evaluator"}),
        "display_name": "tfxp test (8xA100)",
        "pipeline_root": "gs://bucket/root",
    }
    return SpecPatch(**{**values, **changes})


def _reloaded(doc: PipelineDoc, tmp_path: Path) -> PipelineDoc:
    path = tmp_path / "patched.yaml"
    write_pipeline_doc(doc, path, header="patched")
    return load_pipeline_doc(path)


@pytest.mark.parametrize(("quantity", "cores"), [("8", 8.0), ("0.5", 0.5), ("500m", 0.5), ("16", 16.0)])
def test_cpu_quantities(quantity: str, cores: float) -> None:
    assert cpu_cores(quantity) == cores


@pytest.mark.parametrize(
    ("quantity", "gigabytes"),
    [("32G", 32.0), ("512Mi", 0.536870912), ("1Gi", 1.073741824), ("1T", 1000.0), ("2000000000", 2.0)],
)
def test_memory_quantities(quantity: str, gigabytes: float) -> None:
    assert memory_gigabytes(quantity) == pytest.approx(gigabytes)


def test_bad_quantities_say_what_is_expected() -> None:
    with pytest.raises(ValueError, match=r"'eight' is not a Kubernetes quantity.*e\.g\. 4, 0\.5 or 500m"):
        cpu_cores("eight")
    with pytest.raises(ValueError, match=r"'32GB' is not a Kubernetes quantity.*e\.g\. 8Gi, 512Mi or 8G"):
        memory_gigabytes("32GB")


def test_node_labels_and_tolerations_use_kubectl_syntax() -> None:
    assert parse_node_label("cloud.google.com/gke-accelerator=nvidia-tesla-a100") == (
        "cloud.google.com/gke-accelerator",
        "nvidia-tesla-a100",
    )
    assert parse_toleration("nvidia.com/gpu:NoSchedule").to_dict() == {
        "key": "nvidia.com/gpu",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    assert parse_toleration("dedicated=gpu:NoExecute") == Toleration("dedicated", "NoExecute", "gpu")
    with pytest.raises(ValueError, match="is not `key=value`"):
        parse_node_label("a100")
    with pytest.raises(ValueError, match="Effect one of NoSchedule, PreferNoSchedule, NoExecute"):
        parse_toleration("nvidia.com/gpu:Never")


@pytest.mark.parametrize(
    ("image", "warned"),
    [
        ("registry.example.com/tfxp:0.1.0", "tag only"),
        ("localhost:5000/tfxp:0.1.0", "tag only"),
        ("registry.example.com/tfxp@sha256:" + "a" * 64, ""),
        ("registry.example.com/tfxp:0.1.0@sha256:" + "a" * 64, ""),
        ("registry.example.com/tfxp:latest", "latest"),
        ("registry.example.com/tfxp", "latest"),
        ("localhost:5000/tfxp", "latest"),
    ],
)
def test_image_tags(image: str, warned: str) -> None:
    warnings = image_warnings(image)
    assert len(warnings) == (1 if warned else 0)
    if warned == "latest":
        assert "`latest` tag" in warnings[0] and "pin a version tag or a @sha256 digest" in warnings[0]
        assert ("has no tag" in warnings[0]) == (not image.endswith(":latest"))
    if warned == "tag only":
        assert "pinned by tag only: KFP's cache key holds the image string" in warnings[0]
        assert f"docker buildx imagetools inspect {image}" in warnings[0]
        assert f"kubeflow.image={image.rsplit(':', 1)[0]}@sha256:<digest>" in warnings[0]


def test_a_malformed_digest_is_an_error() -> None:
    with pytest.raises(
        ValueError,
        match=r"the digest 'sha256:abc' of .* is not sha256 \(or sha384, sha512\) and as many lower-case hex digits",
    ):
        image_warnings("registry.example.com/tfxp@sha256:abc")


def test_empty_image_is_an_error(doc: PipelineDoc) -> None:
    with pytest.raises(ValueError, match=r"kubeflow\.image: the image is empty"):
        image_warnings(" ")
    with pytest.raises(SpecPatchError, match=r"kubeflow\.image: the image is empty"):
        patch_pipeline_doc(doc, _patch(image=""))


def test_patch_sets_resources_image_retries_caching_root_and_name(doc: PipelineDoc, tmp_path: Path) -> None:
    patch_pipeline_doc(doc, _patch())
    spec = _reloaded(doc, tmp_path).pipeline_spec

    containers = dict(container_tasks(spec))
    assert sorted(containers) == ["Evaluator", "Trainer"]
    assert {container.image for container in containers.values()} == {IMAGE}
    trainer = containers["Trainer"].resources
    assert (trainer.resource_cpu_request, trainer.resource_cpu_limit) == ("80", "80")
    assert (trainer.resource_memory_request, trainer.resource_memory_limit) == ("560G", "560G")
    assert (trainer.cpu_limit, trainer.memory_limit) == (80.0, 560.0)
    assert (trainer.accelerator.type, trainer.accelerator.count) == ("nvidia.com/gpu", 8)
    assert (trainer.accelerator.resource_type, trainer.accelerator.resource_count) == ("nvidia.com/gpu", "8")
    evaluator = containers["Evaluator"].resources
    assert (evaluator.resource_cpu_limit, evaluator.resource_memory_limit) == ("2", "8G")
    assert not evaluator.HasField("accelerator")

    for task in ("Trainer", "Evaluator"):
        retry = spec.root.dag.tasks[task].retry_policy
        assert retry.max_retry_count == 2
        assert retry.backoff_duration.seconds == 120
        assert retry.backoff_factor == 2.0
        assert retry.backoff_max_duration.seconds == 1800
    assert spec.root.dag.tasks["Trainer"].caching_options.enable_cache
    assert not spec.root.dag.tasks["Evaluator"].caching_options.enable_cache
    assert spec.pipeline_info.display_name == "tfxp test (8xA100)"
    assert spec.pipeline_info.name == "tfxp-test"
    assert spec.default_pipeline_root == "gs://bucket/root"


def test_no_retries_and_caching_off(doc: PipelineDoc) -> None:
    patch_pipeline_doc(doc, _patch(retry=RetryPolicy(max_retries=0), enable_cache=False, uncached_tasks=frozenset()))

    for task in doc.pipeline_spec.root.dag.tasks.values():
        assert not task.HasField("retry_policy")
        assert not task.caching_options.enable_cache


def test_node_selector_and_tolerations_go_to_the_kubernetes_platform_spec(doc: PipelineDoc, tmp_path: Path) -> None:
    patch_pipeline_doc(
        doc,
        _patch(
            node_selectors={"Trainer": {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}},
            tolerations={"Trainer": (Toleration("nvidia.com/gpu", "NoSchedule"),)},
        ),
    )
    path = tmp_path / "patched.yaml"
    write_pipeline_doc(doc, path)

    documents = list(yaml.safe_load_all(path.read_text()))
    assert len(documents) == 2
    executors = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert executors == {
        "Trainer_executor": {
            "nodeSelector": {"labels": {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
    }


def test_no_platform_document_without_node_settings(doc: PipelineDoc, tmp_path: Path) -> None:
    patch_pipeline_doc(doc, _patch())
    path = tmp_path / "patched.yaml"
    write_pipeline_doc(doc, path, header="line one\nline two")

    text = path.read_text()
    assert text.startswith("# line one\n# line two\n")
    assert len(list(yaml.safe_load_all(text))) == 1


def test_unknown_task_names_list_the_real_ones(doc: PipelineDoc) -> None:
    with pytest.raises(SpecPatchError, match=r"kubeflow.uncached_components names ExampleGen, .*tasks are Evaluator, "):
        patch_pipeline_doc(doc, _patch(uncached_tasks=frozenset({"ExampleGen"})))
    with pytest.raises(SpecPatchError, match="the per-task resources names Trainr"):
        patch_pipeline_doc(doc, _patch(task_resources={"Trainr": Resources("1", "1G")}))


def test_accelerators_without_a_type_are_refused(doc: PipelineDoc) -> None:
    with pytest.raises(SpecPatchError, match="Trainer: 8 accelerators requested without an accelerator type"):
        patch_pipeline_doc(doc, _patch(task_resources={"Trainer": Resources("8", "32G", Accelerator("", 8))}))


def test_bad_quantities_name_the_task(doc: PipelineDoc) -> None:
    with pytest.raises(SpecPatchError, match="resources of task Trainer: 'lots' is not a Kubernetes quantity"):
        patch_pipeline_doc(doc, _patch(task_resources={"Trainer": Resources("8", "lots")}))


def test_loading_merges_platform_documents_like_kfp(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    first = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": {"a": {"x": 1}}}}}}
    path.write_text(yaml.safe_dump_all([_spec(), first]))

    doc = load_pipeline_doc(path)

    assert isinstance(doc.pipeline_spec, pipeline_spec_pb2.PipelineSpec)
    assert doc.to_dicts()[1] == first


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (json.dumps({"pipelineSpec": _spec(), "runtimeConfig": {}}), "PipelineJob wrapper"),
        ("", "holds no pipeline spec"),
        ("a: [", "is not YAML"),
        ("root:\n  dag: {}\nroot: {}\n", r"^\S*pipeline\.yaml, line 3: the key 'root' is written twice .*recompile"),
        (yaml.safe_dump({"root": {"dag": {"tasks": {"t": {"bogus": 1}}}}}), "is not a KFP pipeline spec"),
    ],
)
def test_loading_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(content)
    with pytest.raises(SpecPatchError, match=message):
        load_pipeline_doc(path)


def _spec_with_exit_handler() -> dict[str, Any]:
    """`_spec()` as TFX compiles it with an exit handler: the tasks in the DAG component `tfx-dag`, a run parameter
    declared on the root only, and the exit handler's final status typed STRING."""
    spec = _spec()
    tasks = spec["root"]["dag"]["tasks"]
    tasks["Trainer"]["inputs"] = {"parameters": {"train_args": {"componentInputParameter": "train_args"}}}
    spec["components"]["Trainer"]["inputDefinitions"] = {"parameters": {"train_args": {"parameterType": "STRING"}}}
    spec["components"]["tfx-dag"] = {"dag": {"tasks": tasks}}
    spec["components"]["Notify"] = {
        "executorLabel": "Notify_executor",
        "inputDefinitions": {"parameters": {"final_status": {"parameterType": "STRING"}}},
    }
    spec["deploymentSpec"]["executors"]["Notify_executor"] = _container("NotifyExecutor")
    spec["root"] = {
        "inputDefinitions": {"parameters": {"train_args": {"parameterType": "STRING"}}},
        "dag": {
            "tasks": {
                "tfx-dag": ir_task("tfx-dag"),
                "Notify": ir_task(
                    "Notify",
                    dependentTasks=["tfx-dag"],
                    triggerPolicy={"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"},
                    inputs={"parameters": {"final_status": {"taskFinalStatus": {"producerTask": "tfx-dag"}}}},
                ),
            }
        },
    }
    return spec


def test_a_pipeline_with_an_exit_handler_is_patched_inside_its_dag(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(_spec_with_exit_handler()))
    doc = load_pipeline_doc(path)

    patch_pipeline_doc(doc, _patch(uncached_tasks=frozenset(), parameter_defaults={"train_args": "{}"}))
    spec = _reloaded(doc, tmp_path).pipeline_spec

    assert sorted(pipeline_tasks(spec)) == ["Evaluator", "Notify", "Trainer"]
    containers = dict(container_tasks(spec))
    assert sorted(containers) == ["Evaluator", "Notify", "Trainer"]
    assert {container.image for container in containers.values()} == {IMAGE}
    assert containers["Trainer"].resources.accelerator.count == 8
    # The run parameter reaches the nested DAG, with its default on the root.
    assert spec.components["tfx-dag"].input_definitions.parameters["train_args"].parameter_type == (
        pipeline_spec_pb2.ParameterType.STRING
    )
    assert spec.root.dag.tasks["tfx-dag"].inputs.parameters["train_args"].component_input_parameter == "train_args"
    root_parameter = spec.root.input_definitions.parameters["train_args"]
    assert (root_parameter.default_value.string_value, root_parameter.is_optional) == ("{}", True)
    # The exit handler: typed as kfp types a final status, never cached.
    final_status = spec.components["Notify"].input_definitions.parameters["final_status"]
    assert final_status.parameter_type == pipeline_spec_pb2.ParameterType.TASK_FINAL_STATUS
    tasks = pipeline_tasks(spec)
    assert tasks["Trainer"].caching_options.enable_cache
    assert not tasks["Notify"].caching_options.enable_cache
    assert tasks["Notify"].retry_policy.max_retry_count == 2


def test_defaults_for_undeclared_parameters_are_refused(doc: PipelineDoc) -> None:
    with pytest.raises(SpecPatchError, match=r"defaults given for steps, which the compiled pipeline does not declare"):
        patch_pipeline_doc(doc, _patch(parameter_defaults={"steps": 3}))


def test_a_spec_without_tasks_or_text_is_refused_before_it_is_sent_or_run(tmp_path: Path) -> None:
    partial = tmp_path / "partial.yaml"
    partial.write_text("pipelineInfo:\n  name: x\nschemaVersion: 2.1.0\nsdkVersion: kfp-2.16.0\n")
    with pytest.raises(SpecPatchError, match=r"not a complete KFP pipeline spec .* nothing would run"):
        load_pipeline_doc(partial)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SpecPatchError, match="is not text"):
        load_pipeline_doc(binary)
