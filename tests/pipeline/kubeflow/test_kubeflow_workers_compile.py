"""`tfxp compile` with `trainer.workers` > 1: the workers' TFJob travels inside the compiled spec (the Trainer's
custom_config), the same manifest is written beside it for review with the RBAC, the Trainer task itself only
waits, and storage the worker pods cannot share is refused. The manifest's own checks (CRD schema, webhook,
kubernetes-validate) are in tests/components/multinode/test_tfjob_manifest.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from config_checks import assert_moved_key_refused
from typer.testing import CliRunner

from components.multinode.tfjob import tfjob_template
from components.trainer.options import parse_custom_config
from pipeline.cli import app
from pipeline.config import load_config
from pipeline.kubeflow.compiler.compile import CompileResult, compile_pipeline
from pipeline.kubeflow.compiler.component_setup import KubeflowCompileError
from pipeline.kubeflow.compiler.spec import container_tasks, load_pipeline_doc
from pipeline.kubeflow.compiler.workers import worker_template

A100_CONFIG = Path("configs/imagenet_a100.yaml")
FOUR_WORKERS = ("trainer.workers=4", "trainer.strategy=auto")
MINIO_ROOT = ("data.split=folders", "data.label_offset=0", "kubeflow.pipeline_root=minio://mlpipeline/v2")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> CompileResult:
    config = load_config(A100_CONFIG, list(FOUR_WORKERS))
    return compile_pipeline(config, tmp_path_factory.mktemp("workers") / "pipeline.yaml")


def _trainer_custom_config(result: CompileResult) -> dict[str, Any]:
    task = load_pipeline_doc(result.path).pipeline_spec.root.dag.tasks["Trainer"]
    return json.loads(task.inputs.parameters["custom_config"].runtime_value.constant.string_value)


def test_the_tfjob_travels_in_the_spec_and_beside_it(compiled: CompileResult) -> None:
    run = parse_custom_config(_trainer_custom_config(compiled))  # what run_fn reads on the cluster
    assert run.tfjob is not None and run.trainer.workers == 4
    tfjob_path, rbac_path = compiled.beside
    assert (tfjob_path.name, rbac_path.name) == ("pipeline.tfjob.yaml", "pipeline.rbac.yaml")
    (reviewed,) = list(yaml.safe_load_all(tfjob_path.read_text()))
    assert reviewed == run.tfjob.manifest  # the copy a user reviews is the one that runs
    assert reviewed["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 4
    assert (run.tfjob.deadline_seconds, run.tfjob.schedule_timeout_seconds) == (172_800, 1_800)
    kinds = [doc["kind"] for doc in yaml.safe_load_all(rbac_path.read_text())]
    assert kinds == ["Role", "RoleBinding"]


def test_the_trainer_task_only_waits_its_gpus_go_to_the_workers(compiled: CompileResult) -> None:
    doc = load_pipeline_doc(compiled.path)
    trainer = dict(container_tasks(doc.pipeline_spec))["Trainer"].resources
    assert not trainer.HasField("accelerator")
    assert (trainer.resource_cpu_limit, trainer.resource_memory_limit) == ("4", "16G")  # kubeflow.cpu/memory_request
    executor = doc.to_dicts()[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["Trainer_executor"]
    assert "nodeSelector" not in executor and "tolerations" not in executor
    worker = parse_custom_config(_trainer_custom_config(compiled)).tfjob
    assert worker is not None
    pod = worker.manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}


def test_one_worker_compiles_as_before_without_a_tfjob(tmp_path: Path) -> None:
    result = compile_pipeline(load_config(A100_CONFIG), tmp_path / "pipeline.yaml")
    assert "tfjob" not in _trainer_custom_config(result)
    assert result.beside == ()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pipeline.yaml"]


def test_workers_without_storage_every_pod_opens_are_refused(tmp_path: Path) -> None:
    config = load_config(None, [*MINIO_ROOT, *FOUR_WORKERS])
    with pytest.raises(KubeflowCompileError, match=r"trainer.workers=4: the worker pods read the Examples") as error:
        compile_pipeline(config, tmp_path / "pipeline.yaml")
    assert "kubeflow.pipeline_root to a gs:// bucket, or kubeflow.workers.shared_dir" in str(error.value)
    assert not (tmp_path / "pipeline.yaml").exists()


def test_a_shared_dir_must_be_on_a_mounted_volume(tmp_path: Path) -> None:
    sets = [*MINIO_ROOT, *FOUR_WORKERS]
    with pytest.raises(KubeflowCompileError, match=r"kubeflow.workers.shared_dir=/scratch/tfxp is on no kubeflow"):
        compile_pipeline(load_config(None, [*sets, "kubeflow.workers.shared_dir=/scratch/tfxp"]), tmp_path / "a.yaml")
    mounted = [*sets, "kubeflow.workers.shared_dir=/shared/tfxp", "kubeflow.volumes=[shared:/shared]"]
    result = compile_pipeline(load_config(None, mounted), tmp_path / "b.yaml")
    run = parse_custom_config(_trainer_custom_config(result))
    assert run.tfjob is not None and run.tfjob.shared_dir == "/shared/tfxp"
    pod = run.tfjob.manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert "/shared" in [mount["mountPath"] for mount in pod["containers"][0]["volumeMounts"]]


def test_cli_names_the_files_beside_the_spec_and_the_rbac_command(tmp_path: Path) -> None:
    args = ["compile", "--config", str(A100_CONFIG), "--out", str(tmp_path / "pipeline.yaml")]
    for item in FOUR_WORKERS:
        args += ["--set", item]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    words = "".join(result.output.split())  # the console wraps long paths
    assert f"besideit:{tmp_path}/pipeline.tfjob.yaml" in words
    assert f"kubectlapply-nkubeflow-f{tmp_path}/pipeline.rbac.yaml" in words


def test_the_multi_node_config_compiles_to_eight_a100_workers(tmp_path: Path) -> None:
    result = compile_pipeline(load_config(Path("configs/imagenet_a100_multinode.yaml")), tmp_path / "pipeline.yaml")
    run = parse_custom_config(_trainer_custom_config(result))
    assert run.tfjob is not None and run.trainer.workers == 8
    assert (run.trainer.optimizer.name, run.trainer.schedule.name) == ("lars", "polynomial")
    worker = run.tfjob.manifest["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 8
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert run.tfjob.manifest["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 8


@pytest.mark.parametrize(
    ("old", "new", "value"), [("trainer_env", "env", "[]"), ("trainer_shm_size", "shm_size", "8Gi")]
)
def test_the_workers_old_flat_keys_are_refused_naming_kubeflow_workers(
    old: str, new: str, value: str, tmp_path: Path
) -> None:
    assert_moved_key_refused("kubeflow", old, f"workers.{new}", value, tmp_path)


def test_the_workers_section_reaches_the_manifest_whole(tmp_path: Path) -> None:
    config = load_config(
        None, ["trainer.workers=2", "kubeflow.workers.backoff_limit=2", "kubeflow.workers.job_deadline_seconds=600"]
    )
    template = worker_template(config)
    assert template.settings == config.kubeflow.workers
    policy = tfjob_template(template)["spec"]["runPolicy"]
    assert policy["activeDeadlineSeconds"] == 600 and policy["backoffLimit"] == 2 * 2 + 1
