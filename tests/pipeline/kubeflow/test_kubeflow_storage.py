"""Storage on Kubeflow: what the pods and Beam workers can open, PVC mounts and the launcher's artifact volume."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.config import TfxpConfig, load_config
from pipeline.kubeflow.compiler import storage
from pipeline.kubeflow.compiler.storage import ArtifactVolume, StorageError, VolumeMount

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def _config(*sets: str) -> TfxpConfig:
    return load_config(CONFIGS / "default.yaml", list(sets))


def _problems(
    config: TfxpConfig, root: str = "", serving: str = "gs://b/serving/digits"
) -> tuple[list[str], list[str]]:
    return storage.storage_problems(config, root, serving, "gs://b/edge/digits")


def test_a_minio_serving_base_is_refused_naming_the_key() -> None:
    errors, _ = _problems(_config("data.path=gs://b/digits"), serving="minio://mlpipeline/serving/digits")
    assert len(errors) == 1
    assert errors[0].startswith("the serving base (serving.base_path or pipeline.output)=minio://mlpipeline/serving")
    assert "no minio:// filesystem in the tfxp image" in errors[0]


def test_local_paths_with_dataflow_are_refused_and_the_root_must_be_gs() -> None:
    config = _config("data.path=/data/digits", "beam.extra_args=[--runner=DataflowRunner]")
    errors, _ = _problems(config, root="minio://mlpipeline/v2/artifacts")
    assert any(
        error.startswith("data.path=/data/digits is a local path, but beam.extra_args runs Beam on") for error in errors
    )
    assert any("kubeflow.pipeline_root must be a gs:// bucket (it is minio://" in error for error in errors)
    assert not _problems(_config("data.path=gs://b/d", "beam.extra_args=[--runner=DataflowRunner]"), "gs://bkt/r")[0]
    # Every spelling Beam accepts (create_runner: case-insensitive, `Runner` optional, a class path, two args).
    class_path = "apache_beam.runners.dataflow.dataflow_runner.DataflowRunner"
    for runner in ("[--runner,DataflowRunner]", "[--runner=dataflow]", f"[--runner={class_path}]", "[--runner=flink]"):
        assert _problems(_config("data.path=/data/d", f"beam.extra_args={runner}"), "gs://bkt/r")[0], runner
    assert not _problems(_config("data.path=gs://b/d", "beam.extra_args=[--runner=DirectRunner]"), "minio://bkt/r")[0]


def test_local_paths_on_a_pvc_are_what_pods_see() -> None:
    config = _config("data.path=/data/digits", "kubeflow.volumes=[datasets:/data]")
    errors, warnings = _problems(config, root="minio://mlpipeline/v2/artifacts")
    assert errors == [] and not any("data.path" in warning for warning in warnings)
    unmounted = _problems(_config("data.path=/elsewhere/digits", "kubeflow.volumes=[datasets:/data]"))[1]
    assert any(warning.startswith("data.path=/elsewhere/digits is a local path: pods on Kubeflow do not see it")
               for warning in unmounted)  # fmt: skip


def test_an_empty_root_says_where_kfp_takes_one() -> None:
    _, warnings = _problems(_config("data.path=gs://b/d"))
    assert any(
        "the kfp-launcher ConfigMap's defaultPipelineRoot, else minio://mlpipeline/v2/artifacts" in w for w in warnings
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("data", "expected `pvc-name:/mount/path`"),
        ("Data:/data", "expected `pvc-name:/mount/path`"),
        ("data:relative", "the mount path must be absolute"),
        ("data:/minio", "not / or a launcher folder"),
    ],
)
def test_malformed_volumes_are_refused(entry: str, message: str) -> None:
    with pytest.raises(StorageError, match=f"kubeflow.volumes: .*{message}"):
        storage.volumes(_config(f"kubeflow.volumes=[{entry}]"))


def test_the_artifact_volume_is_sized_from_the_data_at_the_roots_launcher_folder() -> None:
    config = _config()
    volume = storage.artifact_volume(config, "gs://b/root", data_bytes=147 * 2**30)
    assert volume == ArtifactVolume(mount_path="/gcs", size="194Gi")  # 147 × 1.25 = 183.75 → 184 + 10
    assert storage.artifact_volume(config, "", data_bytes=0) == ArtifactVolume(mount_path="/minio", size="10Gi")
    assert storage.artifact_volume(_config("kubeflow.artifact_volume_size=none"), "", None) is None
    sized = storage.artifact_volume(_config("kubeflow.artifact_volume_size=500Gi"), "s3://b/r", None)
    assert sized == ArtifactVolume(mount_path="/s3", size="500Gi")
    with pytest.raises(StorageError, match=r"kubeflow\.artifact_volume_size: 'lots' is not a Kubernetes quantity"):
        storage.artifact_volume(_config("kubeflow.artifact_volume_size=lots"), "", None)
    assert storage.artifact_volume(config, "", None) is None  # auto, unmeasured: tfxp compile warns
    assert "could not be listed here, so no volume is mounted" in storage.unmeasured_warning("gs://b/d")
    for size, reason in (
        ("0", "more than 0"),
        ("-5Gi", "more than 0"),
        ("65Ti", "at most 64Ti"),
        ("99999Ei", "2^63-1"),
    ):
        with pytest.raises(StorageError, match=re.escape(reason)):
            storage.artifact_volume(_config(f"kubeflow.artifact_volume_size={size}"), "", None)


def test_data_size_counts_every_file(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "x").write_bytes(b"12345")
    (tmp_path / "a" / "b" / "y").write_bytes(b"123")
    assert storage.data_size(str(tmp_path)) == 8
    assert storage.data_size(str(tmp_path / "missing")) is None


def test_mounts_and_the_volume_reach_every_container_executor(tmp_path: Path) -> None:
    from google.protobuf import json_format
    from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s

    from components.data.digits import write_digits
    from pipeline.kubeflow.compiler.compile import compile_pipeline
    from pipeline.kubeflow.compiler.spec import container_tasks, load_pipeline_doc

    write_digits(tmp_path / "digits")
    volume_sets = ("kubeflow.artifact_volume_size=50Gi", "kubeflow.artifact_volume_storage_class=premium-rwo")
    config = _config(f"data.path={tmp_path / 'digits'}", "edge.enabled=false", "kubeflow.volumes=[datasets:/data]",
                     *volume_sets)  # fmt: skip
    doc = load_pipeline_doc(compile_pipeline(config, tmp_path / "pipeline.yaml").path)

    executors = doc.to_dicts()[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    tasks = [task for task, _ in container_tasks(doc.pipeline_spec)]
    assert sorted(executors) == sorted(f"{task}_executor" for task in tasks)
    with_volume = set()
    for label, value in executors.items():
        parsed = json_format.ParseDict(value, k8s.KubernetesExecutorConfig())  # strict: what the driver reads
        [pvc] = parsed.pvc_mount
        assert (pvc.mount_path, pvc.pvc_name_parameter.runtime_value.constant.string_value) == ("/data", "datasets")
        for volume in parsed.generic_ephemeral_volume:
            assert (volume.mount_path, volume.size, volume.storage_class_name) == ("/minio", "50Gi", "premium-rwo")
            assert not volume.default_storage_class
            with_volume.add(label.removesuffix("_executor"))
    # The copies of the Examples need the volume (ExampleValidator reads the images); the rest fit the node.
    assert with_volume == {"ImportExampleGen", "StatisticsGen", "ExampleValidator", "Trainer", "Evaluator", "RunReport"}


def test_two_mounts_at_one_path_are_refused() -> None:
    from pipeline.kubeflow.compiler.spec import SpecPatchError

    with pytest.raises(SpecPatchError, match="mounts a and b both at /data"):
        storage.check_mounts([VolumeMount("a", "/data"), VolumeMount("b", "/data")])


@pytest.mark.parametrize(
    ("path", "on"),
    [("/data/digits", True), ("/data", True), ("/data/../etc", False), ("/data/x/../../etc", False),
     ("/database/x", False), ("//data/x", True)],
)  # fmt: skip
def test_a_path_is_on_a_pvc_by_its_resolved_path(path: str, on: bool) -> None:
    assert storage.on_volume(path, [VolumeMount("datasets", "/data")]) is on
    _, warnings = _problems(_config(f"data.path={path}", "kubeflow.volumes=[datasets:/data]"), "gs://bkt/r")
    assert any(warning.startswith(f"data.path={path} is a local path") for warning in warnings) is not on


def test_a_mount_path_is_resolved_before_it_is_checked() -> None:
    assert storage.parse_volume("data:/data/./x/../y/").path == "/data/y"
    for entry in ("data:/data/../minio", "data:/gcs/sub", "data:/x/.."):
        with pytest.raises(ValueError, match="not / or a launcher folder"):
            storage.parse_volume(entry)


def test_a_shared_dir_that_leaves_its_mount_is_refused() -> None:
    from pipeline.kubeflow.compiler.workers import WorkersConfigError, worker_template

    sets = ["trainer.workers=2", "kubeflow.volumes=[shared:/shared]", "kubeflow.pipeline_root=minio://bkt/r"]
    with pytest.raises(WorkersConfigError, match=r"shared_dir=/shared/../etc is on no kubeflow.volumes mount"):
        worker_template(_config(*sets, "kubeflow.workers.shared_dir=/shared/../etc"))


@pytest.mark.parametrize(
    ("root", "problem"),
    [("hdfs://namenode/tfxp", "it is a hdfs:// URI"), ("file:///tmp/root", "it is a file:// URI"),
     ("gs://B/root", "the bucket name 'B'"), ("s3://bkt/a/../b", "its path 'a/../b' has an empty, . or .. part")],
)  # fmt: skip
def test_a_compiled_pipeline_root_kfp_cannot_use_is_an_error(root: str, problem: str) -> None:
    errors, _ = _problems(_config(f"kubeflow.pipeline_root={root}"), root)
    assert any(
        error.startswith(f"kubeflow.pipeline_root={root} is not a root KFP can use: {problem}") for error in errors
    )
    assert _problems(_config("kubeflow.pipeline_root=gs://my-bucket/tfxp"), "gs://my-bucket/tfxp")[0] == []
