"""The Kubernetes platform document of a compiled pipeline: pod settings from the config, and a strict check with
kfp-kubernetes' own `KubernetesExecutorConfig` proto before the document is written.

KFP's server silently ignores a platform document it cannot parse, so a misspelt field (`nodeSelectors`, a
toleration without an effect in the wrong place) would compile, submit and then not apply. `check_platform_doc`
parses every executor's Kubernetes config with the proto that kfp-kubernetes writes (`kfp.kubernetes`, the
`kfp-kubernetes` package), rejecting unknown fields, and that every configured executor exists in the spec.

Example:
    apply_pod_settings(doc, pod_settings(config.kubeflow))   # image-pull secrets, pod labels and annotations
    check_platform_doc(doc)                                  # SpecPatchError naming the executor and field
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from google.protobuf import json_format
from kfp.kubernetes import kubernetes_executor_config_pb2

from foundation.k8s.names import check_secret_name
from pipeline.config_sections import KubeflowSection
from pipeline.kubeflow.compiler.pod import PodSettings, parse_pod_annotation, parse_pod_label
from pipeline.kubeflow.compiler.spec import KUBERNETES_PLATFORM, PipelineDoc, SpecPatchError

T = TypeVar("T")


def _parsed(key: str, entries: Iterable[str], parse: Callable[[str], T]) -> list[T]:
    try:
        return [parse(entry) for entry in entries]
    except ValueError as error:
        raise SpecPatchError(f"kubeflow.{key}: {error}") from None


def pod_settings(kubeflow: KubeflowSection) -> PodSettings:
    """The pod settings the `kubeflow` section asks for, checked with Kubernetes' syntax.

    Raises:
        SpecPatchError: a bad secret name, label or annotation (the message names the key).
    """
    return PodSettings(
        image_pull_secrets=tuple(_parsed("image_pull_secrets", kubeflow.image_pull_secrets, check_secret_name)),
        labels=dict(_parsed("pod_labels", kubeflow.pod_labels, parse_pod_label)),
        annotations=dict(_parsed("pod_annotations", kubeflow.pod_annotations, parse_pod_annotation)),
    )


def _container_executors(doc: PipelineDoc) -> list[str]:
    executors = json_format.MessageToDict(doc.pipeline_spec.deployment_spec).get("executors", {})
    return sorted(label for label, executor in executors.items() if "container" in executor)


def _strict(label: str, config: dict[str, Any]) -> Any:
    try:
        return json_format.ParseDict(config, kubernetes_executor_config_pb2.KubernetesExecutorConfig())
    except json_format.ParseError as error:
        raise SpecPatchError(
            f"the Kubernetes config of executor {label} is not a kfp-kubernetes KubernetesExecutorConfig ({error}); "
            "KFP would ignore it silently"
        ) from None


def _store(doc: PipelineDoc, label: str, message: Any) -> None:
    executors = doc.platform_spec.platforms[KUBERNETES_PLATFORM].deployment_spec.executors
    executors[label].Clear()
    executors[label].update(json_format.MessageToDict(message))


def apply_pod_settings(doc: PipelineDoc, settings: PodSettings) -> None:
    """Adds image-pull secrets, pod labels and pod annotations to every container executor's Kubernetes config
    (kept next to what is there, e.g. the Trainer's node selector), through the strict proto.

    Raises:
        SpecPatchError: an existing executor config is not a KubernetesExecutorConfig.
    """
    if not settings:
        return
    platform = doc.platform_spec.platforms[KUBERNETES_PLATFORM]
    for label in _container_executors(doc):
        current = platform.deployment_spec.executors.get(label)
        config = _strict(label, json_format.MessageToDict(current) if current is not None else {})
        existing = {secret.secret_name for secret in config.image_pull_secret}
        for secret in settings.image_pull_secrets:
            if secret not in existing:
                config.image_pull_secret.add(secret_name=secret)
        config.pod_metadata.labels.update(settings.labels)
        config.pod_metadata.annotations.update(settings.annotations)
        _store(doc, label, config)


def check_platform_doc(doc: PipelineDoc) -> None:
    """Parses the Kubernetes platform document strictly: every executor config must be a
    `KubernetesExecutorConfig` (no unknown or misspelt field) for an executor the pipeline spec has.

    Raises:
        SpecPatchError: names the executor and the field.
    """
    if KUBERNETES_PLATFORM not in doc.platform_spec.platforms:
        return
    known = set(json_format.MessageToDict(doc.pipeline_spec.deployment_spec).get("executors", {}))
    for label, config in doc.platform_spec.platforms[KUBERNETES_PLATFORM].deployment_spec.executors.items():
        if label not in known:
            raise SpecPatchError(
                f"the Kubernetes platform config names executor {label}, which the pipeline spec does not have "
                f"(its executors: {', '.join(sorted(known))})"
            )
        _strict(label, json_format.MessageToDict(config))
