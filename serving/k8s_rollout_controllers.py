"""The rollout assets for clusters whose canary controller owns the Deployments and routes: Argo Rollouts, Flagger.

With `serving.canary.controller: argo` or `flagger`, a revision of the pod template is one model version: the
models.config of the version (`serving.versions`, the newest of them) is in a ConfigMap named after its content
(`serving.k8s_names.revision_config_name`), so rendering the next version changes the pod template, which starts
the controller's canary, while the previous revision's pods keep their ConfigMap (one ConfigMap updated in place
would move them too: TF Serving polls its models.config). tfxp renders no route: the controller sets the weights.

- `argo_manifests`: a `Rollout` (canary strategy: `setWeight: traffic_percent`, a pause of the analysis window,
  then promotion; a background analysis from the first step; `track` labels on the stable and canary pods through
  `stableMetadata`/`canaryMetadata`), its stable and canary Services, and an `AnalysisTemplate`;
- `flagger_manifests`: the target Deployment, a `Canary` (Gateway API provider, one step to `traffic_percent`,
  analysis every window) and its `MetricTemplate`s.

The analysis is the canary's error rate above stable's (≤ `max_error_rate_increase`) and its p99 latency as a
multiple of stable's (≤ `max_latency_ratio`), in PromQL over TF Serving's own `:tensorflow:serving:request_count`
(labels model_name, status) and `:tensorflow:serving:request_latency` (a histogram, µs). Argo also waits for
`min_requests` canary requests: fewer makes the measurement inconclusive, which pauses the rollout (tfxp's
`hold`), as does a canary with no traffic (0/0 is NaN, neither success nor failure). The class distribution and
the agreement on a replayed sample need tfxp's own signals, so `tfxp rollout analyze` remains the place for them.
"""

from __future__ import annotations

from serving.canary_options import CanarySettings
from serving.k8s_manifests import (
    Manifest,
    autoscaler,
    deployment,
    disruption_budget,
    dump_all,
    dump_manifest,
    namespace_and_configmap,
    network_policy,
    pod_template,
    service,
)
from serving.k8s_names import revision_config_name, serving_names, track_name
from serving.options import ServingOptions

ARGO = "argoproj.io/v1alpha1"
FLAGGER = "flagger.app/v1beta1"
# prometheus-operator's Service for a Prometheus in namespace `monitoring`: what the Rollout's analysis args and the
# MetricTemplates name when `serving.canary.prometheus_url` is empty.
DEFAULT_PROMETHEUS_ADDRESS = "http://prometheus-operated.monitoring.svc:9090"
MODEL_VERSION_ANNOTATION = "tfxp/model-version"
_REQUESTS = ":tensorflow:serving:request_count"
_LATENCY = ":tensorflow:serving:request_latency_bucket"


def _error_rate(selector: str, window: str) -> str:
    return (
        f'sum(rate({_REQUESTS}{{{selector},status!="OK"}}[{window}])) / sum(rate({_REQUESTS}{{{selector}}}[{window}]))'
    )


def _p99(selector: str, window: str) -> str:
    return f"histogram_quantile(0.99, sum by (le) (rate({_LATENCY}{{{selector}}}[{window}])))"


def analysis_queries(canary: str, stable: str, window: str) -> dict[str, str]:
    """PromQL, metric name → query: `error-rate-increase`, `p99-latency-ratio`, `canary-requests`, over the series
    the `canary` and `stable` label selectors pick, in a range of `window`."""
    return {
        "error-rate-increase": f"({_error_rate(canary, window)}) - ({_error_rate(stable, window)})",
        "p99-latency-ratio": f"({_p99(canary, window)}) / ({_p99(stable, window)})",
        "canary-requests": f"sum(increase({_REQUESTS}{{{canary}}}[{window}]))",
    }


def _revision(options: ServingOptions, models_config: str, version: int) -> tuple[str, Manifest]:
    """The content-named ConfigMap's name and the pod template of one model version."""
    name = revision_config_name(options.model_name, models_config)
    app = serving_names(options.model_name).app
    return name, {"app": app, MODEL_VERSION_ANNOTATION: str(version)}


def prometheus_address(options: ServingOptions) -> str:
    """The Prometheus the controllers' analysis queries: `serving.canary.prometheus_url`, else the default."""
    return options.canary.prometheus_url or DEFAULT_PROMETHEUS_ADDRESS


def _analysis_template(options: ServingOptions) -> Manifest:
    settings: CanarySettings = options.canary
    window = f"{settings.window_seconds}s"
    model = f'namespace="{{{{args.namespace}}}}",model_name="{options.model_name}"'
    queries = analysis_queries(f'{model},track="canary"', f'{model},track="stable"', window)
    bounds = {"error-rate-increase": settings.max_error_rate_increase, "p99-latency-ratio": settings.max_latency_ratio}
    metrics: list[Manifest] = [
        {
            "name": name,
            "interval": window,
            "successCondition": f"result[0] <= {bound}",
            "failureCondition": f"result[0] > {bound}",
            "provider": {"prometheus": {"address": "{{args.prometheus-address}}", "query": queries[name]}},
        }
        for name, bound in bounds.items()
    ]
    metrics.append(
        {
            "name": "canary-requests",
            "interval": window,
            "successCondition": f"result[0] >= {settings.min_requests}",
            "failureCondition": "false",  # too few requests is no failure: inconclusive pauses the rollout
            "provider": {"prometheus": {"address": "{{args.prometheus-address}}", "query": queries["canary-requests"]}},
        }
    )
    app = serving_names(options.model_name).app
    return {
        "apiVersion": ARGO,
        "kind": "AnalysisTemplate",
        "metadata": {"name": app, "namespace": options.namespace, "labels": {"app": app}},
        "spec": {
            "args": [{"name": "namespace"}, {"name": "prometheus-address", "value": prometheus_address(options)}],
            "metrics": metrics,
        },
    }


def argo_manifests(
    options: ServingOptions, config_files: dict[str, str], args: list[str], version: int
) -> dict[str, str]:
    """An Argo Rollouts `Rollout` serving model `version`, its Services, autoscaler and `AnalysisTemplate`.

    Args:
        options: The `serving` section (`canary.controller: argo`).
        config_files: The ConfigMap's files, models.config (of `version` only) among them.
        args: The `tensorflow_model_server` flags (reading CONFIG_DIR/models.config).
        version: The model version of this revision.

    Returns:
        Relative path → YAML text.
    """
    app = serving_names(options.model_name).app
    name, labels = _revision(options, config_files["models.config"], version)
    template = pod_template(options, args, {"app": app}, name)
    template["metadata"]["annotations"][MODEL_VERSION_ANNOTATION] = labels[MODEL_VERSION_ANNOTATION]
    services = {track: track_name(options.model_name, track) for track in ("stable", "canary")}
    canary: Manifest = {
        "stableService": services["stable"],
        "canaryService": services["canary"],
        "stableMetadata": {"labels": {"track": "stable"}},
        "canaryMetadata": {"labels": {"track": "canary"}},
        "analysis": {
            "templates": [{"templateName": app}],
            "startingStep": 1,
            "args": [
                {"name": "namespace", "value": options.namespace},
                {"name": "prometheus-address", "value": prometheus_address(options)},
            ],
        },
        "steps": [
            {"setWeight": options.canary.traffic_percent},
            {"pause": {"duration": f"{options.canary.window_seconds}s"}},
        ],
    }
    rollout = {
        "apiVersion": ARGO,
        "kind": "Rollout",
        "metadata": {"name": app, "namespace": options.namespace, "labels": {"app": app}},
        "spec": {
            "replicas": options.min_replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": template,
            "strategy": {"canary": canary},
        },
    }
    # Argo adds its pod-template-hash to these Services' selectors, one revision each.
    track_services = [service(options, name=services[t], selector={"app": app}) for t in ("stable", "canary")]
    return {
        **namespace_and_configmap(options, config_files, name),
        "kubernetes/rollout.yaml": dump_all([rollout, *track_services]),
        "kubernetes/analysistemplate.yaml": dump_manifest(_analysis_template(options)),
        "kubernetes/hpa.yaml": dump_manifest(
            autoscaler(options, target={"apiVersion": ARGO, "kind": "Rollout", "name": app})
        ),
        "kubernetes/pdb.yaml": dump_manifest(disruption_budget(options)),
        "kubernetes/networkpolicy.yaml": dump_manifest(network_policy(options)),
    }


def _metric_templates(options: ServingOptions) -> list[Manifest]:
    # Flagger's own pod rule (its builtin metrics): the canary's pods are `<target>-<hash>-<id>`, the primary's
    # `<target>-primary-<hash>-<id>`; Flagger fills in {{ namespace }}, {{ target }} and {{ interval }}.
    scope = f'namespace="{{{{ namespace }}}}",model_name="{options.model_name}"'
    canary = f'{scope},pod=~"{{{{ target }}}}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"'
    primary = f'{scope},pod=~"{{{{ target }}}}-primary-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"'
    queries = analysis_queries(canary, primary, "{{ interval }}")
    app, address = serving_names(options.model_name).app, prometheus_address(options)
    return [
        {
            "apiVersion": FLAGGER,
            "kind": "MetricTemplate",
            "metadata": {"name": f"{app}-{name}", "namespace": options.namespace, "labels": {"app": app}},
            "spec": {"provider": {"type": "prometheus", "address": address}, "query": queries[name]},
        }
        for name in ("error-rate-increase", "p99-latency-ratio")
    ]


def _flagger_canary(options: ServingOptions) -> Manifest:
    app = serving_names(options.model_name).app
    settings: CanarySettings = options.canary
    window = f"{settings.window_seconds}s"
    bounds = {"error-rate-increase": settings.max_error_rate_increase, "p99-latency-ratio": settings.max_latency_ratio}
    metrics = [
        {
            "name": name,
            "templateRef": {"name": f"{app}-{name}", "namespace": options.namespace},
            "thresholdRange": {"max": bound},
            "interval": window,
        }
        for name, bound in bounds.items()
    ]
    spec: Manifest = {
        "provider": "gatewayapi:v1",
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
        "autoscalerRef": {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "name": app},
        "service": {
            "port": options.rest_port,
            "targetPort": options.rest_port,
            "portName": "http",
            "portDiscovery": True,  # the gRPC port too
            # GAMMA: the routes Flagger writes are attached to the Service clients call.
            "gatewayRefs": [{"group": "", "kind": "Service", "name": app, "namespace": options.namespace}],
        },
        "analysis": {
            "interval": window,
            "threshold": 1,
            "stepWeight": settings.traffic_percent,
            "maxWeight": settings.traffic_percent,
            "metrics": metrics,
        },
    }
    return {
        "apiVersion": FLAGGER,
        "kind": "Canary",
        "metadata": {"name": app, "namespace": options.namespace, "labels": {"app": app}},
        "spec": spec,
    }


def flagger_manifests(
    options: ServingOptions, config_files: dict[str, str], args: list[str], version: int
) -> dict[str, str]:
    """Flagger's target Deployment serving model `version`, its autoscaler, the `Canary` and `MetricTemplate`s.

    Flagger creates the `-primary` Deployment, the Services and the routes from these; its primary pods are
    labelled `app: <app>-primary`, so the NetworkPolicy and the PodDisruptionBudget select both names.

    Args: as `argo_manifests`.

    Returns:
        Relative path → YAML text.
    """
    app = serving_names(options.model_name).app
    name, labels = _revision(options, config_files["models.config"], version)
    target = deployment(options, args, config_name=name)
    target["spec"]["template"]["metadata"]["annotations"][MODEL_VERSION_ANNOTATION] = labels[MODEL_VERSION_ANNOTATION]
    both = {"matchExpressions": [{"key": "app", "operator": "In", "values": [app, f"{app}-primary"]}]}
    policy = network_policy(options)
    policy["spec"]["podSelector"] = both
    budget = disruption_budget(options)
    budget["spec"]["selector"] = both
    return {
        **namespace_and_configmap(options, config_files, name),
        "kubernetes/deployment.yaml": dump_manifest(target),
        "kubernetes/hpa.yaml": dump_manifest(autoscaler(options)),
        "kubernetes/canary.yaml": dump_manifest(_flagger_canary(options)),
        "kubernetes/metrictemplates.yaml": dump_all(_metric_templates(options)),
        "kubernetes/pdb.yaml": dump_manifest(budget),
        "kubernetes/networkpolicy.yaml": dump_manifest(policy),
    }
