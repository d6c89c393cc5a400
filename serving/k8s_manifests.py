"""Kubernetes and KServe manifests for TF Serving that a "restricted" namespace admits and a scanner passes.

`kubernetes_manifests(options, config_files, args)` returns file name → YAML for:

- `kubernetes/00-namespace.yaml`: `serving.namespace`, labelled to enforce the "restricted" Pod Security Standard
  (a file of its own: leave it out to deploy into a namespace you manage);
- `kubernetes/configmap.yaml`: the TF Serving config files (`config_files`);
- `kubernetes/deployment.yaml`: TF Serving with `args`; non-root (`serving.run_as_user`), no privilege
  escalation, every capability dropped, a read-only root filesystem with an emptyDir on /tmp, seccomp
  RuntimeDefault, no service-account token; startup, readiness and liveness probes on `/v1/models/<name>`;
- `kubernetes/service.yaml`, `kubernetes/hpa.yaml` (CPU autoscaling), `kubernetes/pdb.yaml` (one pod down at a
  time), `kubernetes/networkpolicy.yaml` (only the gRPC and REST ports, only from `serving.allowed_namespaces`
  and pods with `serving.allowed_pod_labels`).

`kserve_inference_service(options)` renders a KServe `tensorflow` predictor with the same pod settings.
Object names come from `serving.k8s_names.serving_names`; images are used as configured, by digest when
`serving.cpu_image`/`gpu_image` is one (`image_warnings` says when it is not).

Example:
    manifests = kubernetes_manifests(options, {"models.config": text}, ["--port=8500"])
    manifests["kubernetes/deployment.yaml"]  # YAML text
"""

from __future__ import annotations

from typing import Any

import yaml

from foundation.k8s.image import ImageError, parse_image
from foundation.k8s.names import parse_label
from foundation.paths import uri
from serving.k8s_names import serving_names
from serving.options import ServingOptions

CONFIG_DIR = "/config"  # where the container sees models.config and the other config files
MONITORING_PATH = "/monitoring/prometheus/metrics"
TMP_DIR = "/tmp"
TMP_SIZE_LIMIT = "1Gi"
POD_SECURITY_LABELS = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}

Manifest = dict[str, Any]


def is_digest(image: str) -> bool:
    """Whether `image` names its content (`repo@sha256:<64 hex>`) rather than a movable tag."""
    try:
        return bool(parse_image(image).digest)
    except ImageError:
        return False


def image_warnings(options: ServingOptions) -> list[str]:
    """One warning for each configured TF Serving image given by tag rather than by digest."""
    return [
        f"serving.{key} = {image!r} is a tag, which its registry can move to other content; pin the digest you "
        f"reviewed, e.g. `{image.split('@')[0]}@sha256:<digest>` (`docker buildx imagetools inspect {image}` "
        "prints it)"
        for key, image in (("cpu_image", options.cpu_image), ("gpu_image", options.gpu_image))
        if not is_digest(image)
    ]


def _image(options: ServingOptions) -> str:
    return options.gpu_image if options.gpus else options.cpu_image


def _metadata(options: ServingOptions, name: str) -> Manifest:
    return {"name": name, "namespace": options.namespace, "labels": {"app": serving_names(options.model_name).app}}


def _app_object(options: ServingOptions, api_version: str, kind: str, spec: Manifest) -> Manifest:
    """An object of the serving app: named after it, labelled with it, in the serving namespace."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _metadata(options, serving_names(options.model_name).app),
        "spec": spec,
    }


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # a dict used twice is written twice, not as a YAML anchor and alias


def dump_manifest(document: Manifest) -> str:
    """`document` as YAML, keys in their order, no anchors."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False)


def dump_all(documents: list[Manifest]) -> str:
    """Several objects as one multi-document YAML file."""
    return "---\n".join(dump_manifest(document) for document in documents)


def _resources(options: ServingOptions) -> Manifest:
    resources: Manifest = {
        "requests": {"cpu": options.cpu, "memory": options.memory},
        "limits": {"cpu": options.cpu, "memory": options.memory},
    }
    if options.gpus:
        resources["limits"]["nvidia.com/gpu"] = options.gpus
    return resources


def pod_security_context(options: ServingOptions) -> Manifest:
    """Pod-level settings of the restricted profile: a non-root UID/GID and the runtime's seccomp profile."""
    return {
        "runAsNonRoot": True,
        "runAsUser": options.run_as_user,
        "runAsGroup": options.run_as_user,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(options: ServingOptions) -> Manifest:
    """Container-level settings of the restricted profile, plus a read-only root filesystem."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": options.run_as_user,
        "runAsGroup": options.run_as_user,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


# TF Serving itself writes nothing, but TensorFlow and CUDA keep scratch and JIT caches under /tmp and $HOME.
_TMP_VOLUME = {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}}
_TMP_MOUNT = {"name": "tmp", "mountPath": TMP_DIR}
_HOME = {"name": "HOME", "value": TMP_DIR}


def _container(options: ServingOptions, args: list[str], volume_mounts: list[Manifest]) -> Manifest:
    image = _image(options)
    status = {"httpGet": {"path": f"/v1/models/{options.model_name}", "port": options.rest_port}}
    return {
        "name": "tf-serving",
        "image": image,
        # A digest never changes, so the node's copy is the right one; a tag is checked against the registry.
        "imagePullPolicy": "IfNotPresent" if is_digest(image) else "Always",
        "args": args,
        "env": [_HOME],
        "ports": [
            {"name": "grpc", "containerPort": options.grpc_port},
            {"name": "http", "containerPort": options.rest_port},
        ],
        # The status URL answers 200 once the model has an AVAILABLE version: ready = can serve. The first load
        # of a large model from a bucket takes minutes, which the startup probe allows before liveness counts.
        "startupProbe": {**status, "periodSeconds": 10, "failureThreshold": 60},
        "readinessProbe": {**status, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**status, "periodSeconds": 10, "failureThreshold": 3},
        "resources": _resources(options),
        "securityContext": container_security_context(options),
        "volumeMounts": volume_mounts,
    }


def deployment(
    options: ServingOptions, args: list[str], name: str = "", labels: Manifest | None = None, config_name: str = ""
) -> Manifest:
    """TF Serving's Deployment running `args`.

    Args:
        options: The `serving` section.
        args: The `tensorflow_model_server` flags.
        name: The Deployment's name; empty = the app's (`serving.k8s_names.ServingNames.app`).
        labels: The pods' labels, also the selector; None = `{"app": <app>}`.
        config_name: The ConfigMap mounted on CONFIG_DIR; empty = the app's.

    Returns:
        The Deployment object.
    """
    names = serving_names(options.model_name)
    labels = labels or {"app": names.app}
    spec: Manifest = {"replicas": options.min_replicas, "selector": {"matchLabels": labels}, "template": {}}
    spec["template"] = pod_template(options, args, labels, config_name or names.config_map)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(options, name or names.app),
        "spec": spec,
    }


def pod_template(options: ServingOptions, args: list[str], labels: Manifest, config_name: str) -> Manifest:
    """The TF Serving pods' template: `labels`, scraped by Prometheus, the restricted profile, `config_name` on
    CONFIG_DIR and the models volume (unless the models are in a bucket)."""
    volume_mounts: list[Manifest] = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}, _TMP_MOUNT]
    volumes: list[Manifest] = [{"name": "config", "configMap": {"name": config_name}}, _TMP_VOLUME]
    if not options.remote_base:
        volume_mounts.append({"name": "models", "mountPath": options.container_base_path, "readOnly": True})
        volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": options.pvc, "readOnly": True}})
    return {
        "metadata": {
            "labels": dict(labels),
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(options.rest_port),
                "prometheus.io/path": MONITORING_PATH,
            },
        },
        "spec": {
            # TF Serving calls no Kubernetes API.
            "automountServiceAccountToken": False,
            "securityContext": pod_security_context(options),
            "containers": [_container(options, args, volume_mounts)],
            "volumes": volumes,
        },
    }


def network_policy(options: ServingOptions) -> Manifest:
    """Only the gRPC and REST ports, only from the allowed namespaces and pods, to every pod of the app."""
    app = serving_names(options.model_name).app
    pods: Manifest = {"matchLabels": dict(parse_label(entry) for entry in options.allowed_pod_labels)}
    peer: Manifest = {"podSelector": pods}
    if options.allowed_namespaces:
        namespaces = sorted(options.allowed_namespaces)
        # Within one peer both selectors must match: those pods in those namespaces.
        peer["namespaceSelector"] = {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]
        }
    spec: Manifest = {
        "podSelector": {"matchLabels": {"app": app}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [peer],
                "ports": [
                    {"protocol": "TCP", "port": options.grpc_port},
                    {"protocol": "TCP", "port": options.rest_port},
                ],
            }
        ],
    }
    return _app_object(options, "networking.k8s.io/v1", "NetworkPolicy", spec)


def namespace_object(options: ServingOptions) -> Manifest:
    """The serving namespace, enforcing the "restricted" Pod Security Standard."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": options.namespace, "labels": POD_SECURITY_LABELS},
    }


def config_map(options: ServingOptions, config_files: dict[str, str], name: str = "") -> Manifest:
    """The ConfigMap of TF Serving's config files (name → text), `name` (empty = the app's)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(options, name or serving_names(options.model_name).config_map),
        "data": config_files,
    }


def kubernetes_manifests(options: ServingOptions, config_files: dict[str, str], args: list[str]) -> dict[str, str]:
    """Namespace, ConfigMap, Deployment, Service, HPA, PodDisruptionBudget and NetworkPolicy.

    Args:
        options: The `serving` section.
        config_files: The ConfigMap's files, name → text (models.config, batching and monitoring configs).
        args: The `tensorflow_model_server` flags, reading the config files from CONFIG_DIR.

    Returns:
        Relative path → YAML text.
    """
    return {
        **namespace_and_configmap(options, config_files),
        "kubernetes/deployment.yaml": dump_manifest(deployment(options, args)),
        "kubernetes/service.yaml": dump_manifest(service(options)),
        "kubernetes/hpa.yaml": dump_manifest(autoscaler(options)),
        "kubernetes/pdb.yaml": dump_manifest(disruption_budget(options)),
        "kubernetes/networkpolicy.yaml": dump_manifest(network_policy(options)),
    }


def namespace_and_configmap(options: ServingOptions, config_files: dict[str, str], name: str = "") -> dict[str, str]:
    """The Namespace and the ConfigMap of `config_files` (named `name`; empty = the app's), which every layout of the
    serving manifests starts with; relative path → YAML text."""
    return {
        "kubernetes/00-namespace.yaml": dump_manifest(namespace_object(options)),
        "kubernetes/configmap.yaml": dump_manifest(config_map(options, config_files, name=name)),
    }


def service(options: ServingOptions, name: str = "", selector: Manifest | None = None) -> Manifest:
    """The Service of TF Serving's gRPC and REST ports, `name` (empty = the app's) over the pods `selector` picks
    (None = every pod of the app)."""
    app = serving_names(options.model_name).app
    spec: Manifest = {
        "selector": selector or {"app": app},
        "ports": [
            {"name": "grpc", "port": options.grpc_port, "targetPort": options.grpc_port},
            {"name": "http", "port": options.rest_port, "targetPort": options.rest_port},
        ],
    }
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(options, name or app), "spec": spec}


def autoscaler(options: ServingOptions, target: Manifest | None = None, name: str = "") -> Manifest:
    """The CPU autoscaler of `target` (`{apiVersion, kind, name}`; None = the app's Deployment), named `name`."""
    app = serving_names(options.model_name).app
    spec: Manifest = {
        "scaleTargetRef": target or {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
        "minReplicas": options.min_replicas,
        "maxReplicas": options.max_replicas,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": options.target_cpu_percent},
                },
            }
        ],
    }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(options, name or app),
        "spec": spec,
    }


def disruption_budget(options: ServingOptions, name: str = "", selector: Manifest | None = None) -> Manifest:
    """One pod down at a time among those `selector` picks (None = every pod of the app)."""
    app = serving_names(options.model_name).app
    # maxUnavailable (not minAvailable) never blocks a node drain, whatever the replica count.
    spec: Manifest = {"maxUnavailable": 1, "selector": {"matchLabels": selector or {"app": app}}}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(options, name or app),
        "spec": spec,
    }


def storage_base_uri(options: ServingOptions) -> str:
    """The model base path as KServe's storageUri: `serving.storage_uri`, else a bucket base path, else
    `pvc://<claim>/<model_name>`."""
    return options.storage_uri or (
        options.base_path if options.remote_base else uri("pvc", f"{options.pvc}/{options.model_name}")
    )


def kserve_inference_service(options: ServingOptions) -> str:
    """`inference_service(options)` as YAML."""
    return dump_manifest(inference_service(options))


def inference_service(options: ServingOptions) -> Manifest:
    """A KServe v1beta1 InferenceService with the `tensorflow` model format (KServe runs TF Serving).

    The predictor carries the Deployment's pod settings where KServe's schema has them: the pod and container
    security contexts, no service-account token, /tmp on an emptyDir. An image by digest replaces KServe's
    runtime image; a tag becomes `runtimeVersion`.
    """
    image = _image(options)
    names = serving_names(options.model_name)
    model: Manifest = {
        "modelFormat": {"name": "tensorflow"},
        **({"image": image} if is_digest(image) else {"runtimeVersion": parse_image(image).tag or "latest"}),
        "storageUri": storage_base_uri(options),
        "resources": _resources(options),
        "env": [_HOME],
        "securityContext": container_security_context(options),
        "volumeMounts": [_TMP_MOUNT],
    }
    service = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        # No `app` label: KServe copies the InferenceService's labels to its pods, which the Service, PDB and
        # NetworkPolicy of the Deployment (same label) would then select.
        "metadata": {"name": names.inference_service, "namespace": options.namespace},
        "spec": {
            "predictor": {
                "minReplicas": options.min_replicas,
                "maxReplicas": options.max_replicas,
                "automountServiceAccountToken": False,
                "securityContext": pod_security_context(options),
                "model": model,
                "volumes": [_TMP_VOLUME],
            }
        },
    }
    return service
