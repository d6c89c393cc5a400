"""The Trainer task's side of multi-worker training on Kubeflow (`components.multinode.tfjob_launch.run_tfjob`), end to
end against the Kubernetes API double (tests/support/k8s_api_double.py, which checks every created TFJob against the
Training Operator's CRD schema and webhook and enforces the RBAC tfxp writes), through the real `kubernetes` client,
with the TFJob template `tfxp compile` puts into the spec.

Only the chief's training is played here (it writes the SavedModel where the FnArgs say): the worker entrypoint's
real training is tests/components/multinode/test_trainer_workers.py and the e2e in tests/pipeline/test_pipeline_e2e.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import kubernetes
import pytest
from k8s_api_double import NAMESPACE, K8sApiDouble, Scenario, serve

from components.multinode import tfjob_client
from components.multinode.settings import TfJobLaunch
from components.multinode.tfjob_errors import TfJobFailedError
from components.multinode.tfjob_launch import run_tfjob
from components.multinode.tfjob_names import job_name_for
from components.multinode.tfjob_rbac import RBAC_RULES
from components.multinode.worker_args import FN_ARGS_FILE, WorkerFnArgs, WorkersError, read_fn_args
from pipeline.config import load_config
from pipeline.kubeflow.compiler.component_setup import trainer_tfjob

POD_NAME = "tfxp-imagenet-resnet50-xk2lq-system-container-impl-3941066427"
POD_UID = "6d1f2c3e-8a0b-4c5d-9e7f-0a1b2c3d4e5f"
SETTINGS = ["trainer.workers=2", "trainer.strategy=auto", "kubeflow.pipeline_root=minio://mlpipeline/v2/artifacts",
            "kubeflow.volumes=[shared:/shared]", "kubeflow.workers.shared_dir=/shared/tfxp"]  # fmt: skip


def _template() -> TfJobLaunch:
    launch = trainer_tfjob(load_config(Path("configs/imagenet_a100.yaml"), SETTINGS))
    assert launch is not None
    return launch


def _launcher_copies(root: Path) -> WorkerFnArgs:
    """The Trainer's inputs and outputs as KFP's launcher hands them to the task: local copies in its own pod."""
    for split in ("train", "eval"):
        folder = root / "minio" / "Examples" / f"Split-{split}"
        folder.mkdir(parents=True)
        for number in range(2):
            (folder / f"data_tfrecord-{number:05d}-of-00002.gz").write_bytes(f"{split}-{number}".encode())
    model = root / "minio" / "Trainer" / "model"
    return WorkerFnArgs(
        custom_config={"trainer": {"workers": 2}},
        train_steps=100,
        train_files=[str(root / "minio" / "Examples" / "Split-train" / "*")],
        eval_files=[str(root / "minio" / "Examples" / "Split-eval" / "*")],
        serving_model_dir=str(model / "Format-Serving"),
        model_run_dir=str(root / "minio" / "Trainer" / "model_run"),
    )


class ChiefOnSubmit(tfjob_client.TfJobClient):
    """The client, fast-polling, that plays the chief once the job exists: it reads the FnArgs the job's pods get
    and writes the model where they say."""

    seen: ClassVar[list[WorkerFnArgs]] = []  # the FnArgs each job's pods got (the staging folder is gone afterwards)
    staged: ClassVar[list[list[bytes]]] = []  # the staged train files the workers read

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "poll_seconds": 0.01})

    def submit(self, manifest: Mapping[str, Any]) -> str:
        name = super().submit(manifest)
        (container,) = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        args = read_fn_args(container["args"][container["args"].index("--fn-args") + 1])
        ChiefOnSubmit.seen.append(args)
        ChiefOnSubmit.staged.append(sorted(p.read_bytes() for p in Path(args.train_files[0]).parent.iterdir()))
        model = Path(args.serving_model_dir)
        model.mkdir(parents=True)
        (model / "saved_model.pb").write_bytes(b"the chief's model")
        (model.parent / "training_metrics.json").write_text(json.dumps({"workers": 2}))
        return name


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[K8sApiDouble]:
    scenario: Scenario = getattr(request, "param", None) or Scenario.succeeds(workers=2, run_ticks=2)
    scenario.rbac = RBAC_RULES  # the Role tfxp writes beside the spec, and nothing more
    double = K8sApiDouble(scenario)
    with serve(double) as url:
        api = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=url))
        monkeypatch.setattr(tfjob_client, "in_cluster", lambda namespace=None: (api, NAMESPACE))
        monkeypatch.setattr(tfjob_client, "TfJobClient", ChiefOnSubmit)
        monkeypatch.setenv("KFP_POD_NAME", POD_NAME)
        monkeypatch.setenv("KFP_POD_UID", POD_UID)
        try:
            yield double
        finally:
            api.close()


def test_the_task_stages_submits_the_compiled_job_and_gets_the_chiefs_model(
    cluster: K8sApiDouble, tmp_path: Path
) -> None:
    args = _launcher_copies(tmp_path)
    launch = _template().model_copy(update={"shared_dir": str(tmp_path / "shared")})
    run_tfjob(launch, args)
    assert ChiefOnSubmit.staged[-1] == [b"train-0", b"train-1"]  # what the workers read while the job ran

    (create,) = cluster.calls("POST", "/tfjobs")
    job = create.body
    assert job["metadata"]["namespace"] == NAMESPACE
    assert (
        job["metadata"]["ownerReferences"][0] | {"kind": "Pod", "uid": POD_UID} == job["metadata"]["ownerReferences"][0]
    )
    (container,) = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    fn_args_uri = container["args"][-1]
    assert job["metadata"]["name"] == job_name_for(f"tfxp-trainer-{fn_args_uri}")
    assert fn_args_uri.startswith(str(tmp_path / "shared")) and fn_args_uri.endswith(FN_ARGS_FILE)
    staged = ChiefOnSubmit.seen[-1]
    assert all(pattern.startswith(str(tmp_path / "shared")) for pattern in [*staged.train_files, *staged.eval_files])
    assert staged.train_steps == 100 and staged.custom_config == args.custom_config
    # The model is back where KFP's launcher uploads the Trainer's model artifact from, metrics beside it.
    assert (Path(args.serving_model_dir) / "saved_model.pb").read_bytes() == b"the chief's model"
    assert (Path(args.serving_model_dir).parent / "training_metrics.json").is_file()
    assert cluster.calls("DELETE", f"/tfjobs/{job['metadata']['name']}")  # nothing left behind


@pytest.mark.parametrize(
    "cluster",
    [
        # Worker 1 runs out of memory on every try; worker 0 then fails on its next collective, every time.
        Scenario.succeeds(workers=2, run_ticks=50)
        .worker_fails(1, exit_code=137, reason="OOMKilled", log="killed", after_ticks=1, times=20)
        .worker_fails(0, exit_code=1, reason="Error", log="UnavailableError: collective", after_ticks=2, times=20)
    ],
    indirect=True,
)
def test_a_failed_job_fails_the_task_and_copies_nothing_back(cluster: K8sApiDouble, tmp_path: Path) -> None:
    args = _launcher_copies(tmp_path)
    launch = _template().model_copy(update={"shared_dir": str(tmp_path / "shared")})
    with pytest.raises(TfJobFailedError, match=r"Worker 1.*137.*OOMKilled"):
        run_tfjob(launch, args)
    assert not Path(args.serving_model_dir).exists()
    assert cluster.calls("DELETE", "/tfjobs/")


def test_local_copies_without_a_shared_dir_are_refused_before_any_job(cluster: K8sApiDouble, tmp_path: Path) -> None:
    launch = _template().model_copy(update={"shared_dir": ""})
    with pytest.raises(WorkersError, match=r"the workers' pods cannot open .*kubeflow.workers.shared_dir"):
        run_tfjob(launch, _launcher_copies(tmp_path))
    assert cluster.calls("POST", "/tfjobs") == []


def test_a_retried_task_names_the_same_job_and_runs_it_as_its_own_service_account(
    cluster: K8sApiDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KFP retries the Trainer in a new pod with the same FnArgs: the job's name stays, so the retry finds the
    earlier attempt's job (the client follows it: tests/components/multinode/test_tfjob_client.py) instead of
    starting a second one."""
    monkeypatch.setattr(tfjob_client, "task_service_account", lambda: (NAMESPACE, "default-editor"))
    args = _launcher_copies(tmp_path)
    launch = _template().model_copy(update={"shared_dir": str(tmp_path / "shared")})
    run_tfjob(launch, args)
    monkeypatch.setenv("KFP_POD_NAME", POD_NAME + "-retry")
    monkeypatch.setenv("KFP_POD_UID", "another-uid")
    shutil.rmtree(args.serving_model_dir)  # the second attempt starts without the first one's model
    run_tfjob(launch, args)
    first, second = (request.body for request in cluster.calls("POST", "/tfjobs"))
    assert first["metadata"]["name"] == second["metadata"]["name"]
    assert first["metadata"]["ownerReferences"][0]["uid"] != second["metadata"]["ownerReferences"][0]["uid"]
    pods = [job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"] for job in (first, second)]
    assert [pod["serviceAccountName"] for pod in pods] == ["default-editor", "default-editor"]
    assert not (tmp_path / "shared").exists() or not any((tmp_path / "shared").iterdir())  # staging removed
