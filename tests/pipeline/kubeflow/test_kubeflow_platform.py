"""The Kubernetes platform document: pod settings from the config (image-pull secrets, pod labels and annotations)
written into every container executor's config, and the strict parse with kfp-kubernetes'
`KubernetesExecutorConfig` that refuses what KFP's server would silently ignore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from kfp.kubernetes import kubernetes_executor_config_pb2
from kfp_fake import spec_dict
from typer.testing import CliRunner

from foundation.k8s.names import check_secret_name
from pipeline.cli import app
from pipeline.config_sections import KubeflowSection
from pipeline.kubeflow.compiler.platform import apply_pod_settings, check_platform_doc, pod_settings
from pipeline.kubeflow.compiler.pod import PodSettings, parse_pod_annotation, parse_pod_label
from pipeline.kubeflow.compiler.spec import KUBERNETES_PLATFORM, PipelineDoc, SpecPatchError, load_pipeline_doc

TRAINER_SELECTOR = {"nodeSelector": {"labels": {"gpu": "a100"}}}


def _doc(tmp_path: Path, executors: dict[str, Any] | None = None) -> PipelineDoc:
    documents: list[dict[str, Any]] = [spec_dict(["ImportExampleGen", "Trainer"])]
    if executors is not None:
        documents.append({"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}})
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return load_pipeline_doc(path)


def _kubernetes(doc: PipelineDoc) -> dict[str, Any]:
    executors = doc.platform_spec.platforms[KUBERNETES_PLATFORM].deployment_spec.executors
    return {label: json_format.MessageToDict(config) for label, config in executors.items()}


def test_labels_annotations_and_secrets_use_kubernetes_syntax() -> None:
    assert parse_pod_label("app.kubernetes.io/part-of=tfxp") == ("app.kubernetes.io/part-of", "tfxp")
    assert parse_pod_label("team=") == ("team", "")
    assert parse_pod_annotation("note=any text: even = signs") == ("note", "any text: even = signs")
    assert check_secret_name("regcred") == "regcred"
    with pytest.raises(ValueError, match=r"'team=ml platform': the value 'ml platform' is not a Kubernetes name"):
        parse_pod_label("team=ml platform")
    with pytest.raises(ValueError, match=r"the key prefix 'Example.COM' is not a DNS subdomain"):
        parse_pod_label("Example.COM/team=ml")
    with pytest.raises(ValueError, match=r"the key '-team' is not a Kubernetes name"):
        parse_pod_annotation("-team=x")
    with pytest.raises(ValueError, match="is not `key=value`"):
        parse_pod_annotation("team")
    with pytest.raises(ValueError, match=r"'RegCred' is not a Kubernetes Secret name"):
        check_secret_name("RegCred")


def test_pod_settings_name_the_config_key() -> None:
    settings = pod_settings(
        KubeflowSection(image_pull_secrets=("regcred",), pod_labels=("team=ml",), pod_annotations=("owner=a b",))
    )
    assert settings == PodSettings(("regcred",), {"team": "ml"}, {"owner": "a b"})
    assert not pod_settings(KubeflowSection())
    with pytest.raises(SpecPatchError, match=r"kubeflow\.pod_labels: 'team=ml/x'"):
        pod_settings(KubeflowSection(pod_labels=("team=ml/x",)))
    with pytest.raises(SpecPatchError, match=r"kubeflow\.image_pull_secrets: 'Reg_Cred'"):
        pod_settings(KubeflowSection(image_pull_secrets=("Reg_Cred",)))


def test_every_container_executor_gets_the_pod_settings(tmp_path: Path) -> None:
    doc = _doc(tmp_path, {"Trainer_executor": TRAINER_SELECTOR})
    settings = PodSettings(("regcred",), {"team": "ml"}, {"sidecar.istio.io/inject": "false"})

    apply_pod_settings(doc, settings)
    apply_pod_settings(doc, settings)  # idempotent: the secret is listed once

    metadata = {"labels": {"team": "ml"}, "annotations": {"sidecar.istio.io/inject": "false"}}
    assert _kubernetes(doc) == {
        "ImportExampleGen_executor": {"imagePullSecret": [{"secretName": "regcred"}], "podMetadata": metadata},
        "Trainer_executor": {
            **TRAINER_SELECTOR,
            "imagePullSecret": [{"secretName": "regcred"}],
            "podMetadata": metadata,
        },
    }
    check_platform_doc(doc)
    for config in _kubernetes(doc).values():  # what kfp-kubernetes itself reads
        json_format.ParseDict(config, kubernetes_executor_config_pb2.KubernetesExecutorConfig())


def test_no_settings_leave_the_platform_document_alone(tmp_path: Path) -> None:
    doc = _doc(tmp_path)

    apply_pod_settings(doc, PodSettings())

    assert doc.to_dicts() == [json_format.MessageToDict(doc.pipeline_spec)]


@pytest.mark.parametrize(
    ("executors", "message"),
    [
        (
            {"Trainer_executor": {"nodeSelectors": {"labels": {"gpu": "a100"}}}},
            r"executor Trainer_executor .*nodeSelectors",
        ),
        ({"Trainer_executor": {"tolerations": [{"key": "gpu", "effekt": "NoSchedule"}]}}, r"Trainer_executor .*effekt"),
        (
            {"Pusher_executor": TRAINER_SELECTOR},
            r"names executor Pusher_executor, which the pipeline spec does not have",
        ),
    ],
)
def test_a_platform_document_kfp_would_ignore_is_refused(
    tmp_path: Path, executors: dict[str, Any], message: str
) -> None:
    doc = _doc(tmp_path, executors)

    with pytest.raises(SpecPatchError, match=message):
        check_platform_doc(doc)


def test_a_bad_pod_setting_fails_compile_before_compiling(tmp_path: Path) -> None:
    out = tmp_path / "pipeline.yaml"

    result = CliRunner().invoke(app, ["compile", "--out", str(out), "--set", "kubeflow.pod_labels=['team=ml team']"])

    assert result.exit_code == 2
    assert "kubeflow.pod_labels: 'team=ml team': the value 'ml team' is not a Kubernetes name" in " ".join(
        result.output.split()
    )
    assert not out.exists()


def test_compile_writes_the_pod_settings_into_every_container_executor(tmp_path: Path) -> None:
    out = tmp_path / "pipeline.yaml"
    sets = [
        "kubeflow.image_pull_secrets=['regcred']",
        "kubeflow.pod_labels=['team=ml']",
        "kubeflow.trainer_node_selector=['gpu=a100']",
        "kubeflow.image=registry.example.com/tfxp@sha256:" + "a" * 64,
        # data/digits does not exist here: set what `auto` would read from it.
        "data.split=folders",
        "data.label_offset=0",
    ]

    result = CliRunner().invoke(app, ["compile", "--out", str(out), *(f"--set={item}" for item in sets)])

    assert result.exit_code == 0, result.output
    assert "pinned by tag only" not in result.output
    doc = load_pipeline_doc(out)
    check_platform_doc(doc)
    configs = _kubernetes(doc)
    executors = json_format.MessageToDict(doc.pipeline_spec.deployment_spec)["executors"]
    assert set(configs) == {label for label, executor in executors.items() if "container" in executor}
    for label, config in configs.items():
        assert config["imagePullSecret"] == [{"secretName": "regcred"}]
        assert config["podMetadata"] == {"labels": {"team": "ml"}}
        assert ("nodeSelector" in config) == label.startswith("Trainer")
