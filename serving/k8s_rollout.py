"""Kubernetes and KServe manifests for a canary rollout: a stable and a canary TF Serving, and the split between them.

`track_manifests(options, config_files, track_args)` (`serving.canary.controller: none`, tfxp moves the versions
by rewriting each track's models.config, `serving.rollout.layout.track_config_path`) returns file name → YAML:

- `kubernetes/00-namespace.yaml`, `kubernetes/configmap.yaml` (batching and monitoring configs; no models.config:
  each track reads its own from the model base), `kubernetes/networkpolicy.yaml`: as in `direct` mode;
- `kubernetes/<track>.yaml` for `stable` and `canary`: a Deployment `tf-serving-<model>-<track>` whose pods carry
  `track: <track>` (Prometheus' pod labels tell TF Serving's own metrics apart by version), its Service, CPU
  autoscaler and PodDisruptionBudget;
- `kubernetes/service.yaml`: `tf-serving-<model>`, over the pods of both tracks: what clients call;
- `kubernetes/route.yaml`: a Gateway API `HTTPRoute` (REST) and `GRPCRoute` (gRPC) attached to that Service
  (the GAMMA pattern: a mesh such as Istio or Linkerd routes calls to the Service by the route), splitting by
  weight, `100 - serving.canary.traffic_percent` to stable and `traffic_percent` to canary. Without a mesh,
  kube-proxy spreads over the pods of both tracks, by their numbers.

`kserve_canary(options, versions)` renders the same rollout as a KServe InferenceService in Serverless mode:
KServe keeps the previous revision (stable) and sends `canaryTrafficPercent` to the latest, whose one
`storageUris` entry lays the version out as TF Serving's `<n>/` (see `kserve_canary`).

Example:
    files = track_manifests(options, {"monitoring.config": text}, {"stable": [...], "canary": [...]})
    yaml.safe_load_all(files["kubernetes/route.yaml"])  # HTTPRoute, GRPCRoute
"""

from __future__ import annotations

from dataclasses import dataclass

from foundation.paths import join, scheme
from serving.k8s_manifests import (
    Manifest,
    autoscaler,
    deployment,
    disruption_budget,
    dump_all,
    dump_manifest,
    inference_service,
    namespace_and_configmap,
    network_policy,
    service,
    storage_base_uri,
)
from serving.k8s_names import serving_names, track_name
from serving.options import ServingOptions
from serving.rollout.layout import TRACKS, Track

GATEWAY_API = "gateway.networking.k8s.io/v1"
SERVERLESS = {"serving.kserve.io/deploymentMode": "Serverless"}
# KServe's tensorflow runtime runs `--model_base_path=/mnt/models` (config/runtimes/kserve-tensorflow-serving.yaml:31,
# kserve/kserve@aaac4e294dae2c7b1aa1886447793f3aa1c30912).
KSERVE_MODEL_BASE = "/mnt/models"


@dataclass(frozen=True)
class RolloutVersions:
    """The versions a rendered rollout serves: `stable`, and the `canary` (0 = none)."""

    stable: int
    canary: int = 0

    @property
    def newest(self) -> int:
        """The revision a controller rolls out: the canary, else stable."""
        return self.canary or self.stable


def rollout_versions(options: ServingOptions) -> RolloutVersions | None:
    """The versions named by `serving.versions` (ascending: stable, then the canary), None when it names none.

    Raises:
        ValueError: more than two versions (a rollout serves a stable and at most one canary).
    """
    versions = sorted(set(options.versions))
    if len(versions) > 2:
        raise ValueError(
            f"serving.versions {versions} names more than two versions; with serving.rollout: canary it names the "
            "stable version and at most one canary, e.g. `--set serving.versions=[3,4]`"
        )
    return RolloutVersions(*versions) if versions else None


def _track_objects(options: ServingOptions, track: Track, args: list[str]) -> list[Manifest]:
    name = track_name(options.model_name, track)
    labels = {"app": serving_names(options.model_name).app, "track": track}
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    return [
        deployment(options, args, name=name, labels=labels),
        service(options, name=name, selector=labels),
        autoscaler(options, target=target, name=name),
        disruption_budget(options, name=name, selector=labels),
    ]


def _route(options: ServingOptions, kind: str, port: int, port_name: str) -> Manifest:
    app = serving_names(options.model_name).app
    percent = options.canary.traffic_percent
    weights: dict[Track, int] = {"stable": 100 - percent, "canary": percent}
    backends = [{"name": track_name(options.model_name, t), "port": port, "weight": weights[t]} for t in TRACKS]
    return {
        "apiVersion": GATEWAY_API,
        "kind": kind,
        "metadata": {"name": f"{app}-{port_name}", "namespace": options.namespace, "labels": {"app": app}},
        "spec": {
            # GAMMA: the route is attached to the Service clients call (core group, kind Service, the port).
            "parentRefs": [{"group": "", "kind": "Service", "name": app, "port": port}],
            "rules": [{"backendRefs": backends}],
        },
    }


def track_manifests(
    options: ServingOptions, config_files: dict[str, str], track_args: dict[Track, list[str]]
) -> dict[str, str]:
    """The stable and canary TF Serving, their Services, the Service clients call and the weighted routes.

    Args:
        options: The `serving` section (`rollout: canary`, `canary.controller: none`).
        config_files: The ConfigMap's files (batching and monitoring configs).
        track_args: Per track, the `tensorflow_model_server` flags (each reads its track's models.config).

    Returns:
        Relative path → YAML text.
    """
    files = namespace_and_configmap(options, config_files)
    for track in TRACKS:
        files[f"kubernetes/{track}.yaml"] = dump_all(_track_objects(options, track, track_args[track]))
    files["kubernetes/service.yaml"] = dump_manifest(service(options))
    files["kubernetes/route.yaml"] = dump_all(
        [
            _route(options, "HTTPRoute", options.rest_port, "http"),
            _route(options, "GRPCRoute", options.grpc_port, "grpc"),
        ]
    )
    files["kubernetes/networkpolicy.yaml"] = dump_manifest(network_policy(options))
    return files


def kserve_canary(options: ServingOptions, versions: RolloutVersions) -> Manifest | None:
    """The InferenceService serving `versions.newest` in Serverless mode, the canary share on it when it is one.

    KServe's canary works across revisions: the spec is the latest revision, `canaryTrafficPercent` of the
    traffic goes to it and the rest to the previous ready one (the stable version, applied before); KServe's
    `canaryTrafficPercent` needs the Serverless (Knative) deployment mode.

    The version keeps TF Serving's layout this way: the runtime serves `--model_base_path=/mnt/models`
    (KSERVE_MODEL_BASE), and the storage initializer copies the *contents* of a storageUri there
    (python/storage/kserve_storage/kserve_storage.py:950 strips the URI's path from each object's key), so a
    `storageUri` of `<base>/<n>` would put `saved_model.pb` at `/mnt/models/` with no version folder, which TF
    Serving does not serve. `storageUris` takes a `mountPath`: KServe's webhook passes each entry to the
    initializer as (uri, mountPath) (pkg/webhook/admission/pod/storage_initializer_injector.go:495) and mounts an
    emptyDir at their common parent (:491; for one entry the path itself, pkg/utils/storage.go:187-189), so
    `{uri: <base>/<n>, mountPath: /mnt/models/<n>}` gives `/mnt/models/<n>/saved_model.pb` without copying the
    version anywhere. `storageUri` and `storageUris` together are refused
    (pkg/apis/serving/v1beta1/inference_service_validation.go:843-845), so the model has none.

    Returns:
        The object, or None for models on a PersistentVolumeClaim: KServe mounts a `pvc://` entry of
        `storageUris` whole, without its path (storage_initializer_injector.go:468-477, `SubPath: ""`).
    """
    base = storage_base_uri(options)
    if scheme(base) == "pvc":
        return None
    isvc = inference_service(options)
    isvc["metadata"]["annotations"] = dict(SERVERLESS)
    predictor = isvc["spec"]["predictor"]
    del predictor["model"]["storageUri"]
    version = versions.newest
    predictor["storageUris"] = [{"uri": join(base, str(version)), "mountPath": f"{KSERVE_MODEL_BASE}/{version}"}]
    if versions.canary:
        predictor["canaryTrafficPercent"] = options.canary.traffic_percent
    return isvc
