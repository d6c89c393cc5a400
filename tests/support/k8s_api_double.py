"""A local double of the Kubernetes API, for the tests of components/multinode/tfjob_client.py through the real
`kubernetes` client.

It serves what the TFJob client calls — create/get/list/delete of `kubeflow.org/v1` tfjobs in a namespace, pods
listed by label selector, a pod's log (`container`, `tailLines`, `previous`), events listed by field selector —
with the API server's JSON shapes: objects as stored, lists, and `Status` objects for errors, built as
kubernetes/apimachinery `pkg/api/errors/errors.go` builds them (NotFound:145, AlreadyExists:160, Forbidden:209,
Conflict:232, Invalid:284; the RBAC message of kubernetes/apiserver `pkg/endpoints/handlers/responsewriters/
errors.go:45-75`; the plain-text "404 page not found" of a resource nobody serves, `pkg/util/notfoundhandler/
not_found_handler.go:64`; a successful delete's Status, `pkg/registry/generic/registry/store.go:1458-1480`).
Requests pass authorization (RBAC: `Scenario.forbidden`, or only `Scenario.rbac`'s rules), then the CRD schema
(`validate_schema=True`: tests/data/crds/kubeflow.org_tfjobs.yaml's openAPIV3Schema, with jsonschema), then the
Training Operator's validating webhook (pkg/webhooks/tensorflow/tfjob_webhook.go:72-126, denied as 403 like
controller-runtime's `Denied`), as the API server orders them.

Every read of a TFJob advances the cluster one tick (tests/support/training_operator_double.py plays the operator,
scheduler and kubelet), so a test's polls step the scenario deterministically. Every request is recorded.

Example:
    scenario = Scenario.succeeds(workers=4)
    double = K8sApiDouble(scenario)
    with serve(double) as url:
        api = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=url))
        ...
        assert double.calls("DELETE")
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml
from http_double import DoubleHandler, serving
from training_operator_double import Cluster, Exit, Refusal

NAMESPACE = "kubeflow-user"
SERVICE_ACCOUNT = "pipeline-runner"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"
CRD_PATH = Path(__file__).resolve().parents[1] / "data" / "crds" / "kubeflow.org_tfjobs.yaml"
WEBHOOK = "validator.tfjob.training-operator.kubeflow.org"  # tfjob_webhook.go:49
# The fields kube-apiserver selects core/v1 events by (kubernetes pkg/registry/core/event/strategy.go).
EVENT_FIELDS = {
    "involvedObject.kind": ("involvedObject", "kind"),
    "involvedObject.name": ("involvedObject", "name"),
    "involvedObject.namespace": ("involvedObject", "namespace"),
    "involvedObject.uid": ("involvedObject", "uid"),
    "involvedObject.apiVersion": ("involvedObject", "apiVersion"),
    "reason": ("reason",),
    "type": ("type",),
    "reportingComponent": ("reportingComponent",),
    "source": ("source", "component"),
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
}
# What Go's strconv.ParseBool reads as true (the API server's query parameters; the Python client sends "True").
_GO_TRUE = frozenset({"1", "t", "T", "true", "True", "TRUE"})
DEFAULT_LOG = "epoch 1/1\nstep 100/100 - loss: 0.12\nexported the model"
FN_ARGS_URI = "gs://bucket/root/Trainer/model_run/fn_args.json"


# Why the API server refuses a pod, as kubernetes' admission plugins say it (the error NewForbidden wraps into
# `pods "NAME" is forbidden: ...`; kubernetes is not mirrored here, the formats are those plugins' fmt.Errorf):
def missing_service_account(namespace: str, name: str) -> str:
    """ServiceAccount admission (plugin/pkg/admission/serviceaccount/admission.go) with the lister's NotFound."""
    return f'error looking up service account {namespace}/{name}: serviceaccount "{name}" not found'


def pod_security_violation(level: str, detail: str) -> str:
    """PodSecurity admission (staging/src/k8s.io/pod-security-admission/admission/admission.go)."""
    return f'violates PodSecurity "{level}": {detail}'


def quota_exceeded(quota: str, resource: str, requested: str, used: str, limited: str) -> str:
    """ResourceQuota admission (staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go)."""
    return (
        f"exceeded quota: {quota}, requested: {resource}={requested}, used: {resource}={used}, "
        f"limited: {resource}={limited}"
    )


@dataclass
class Scenario:
    """What the cluster does with the job. Build one with the class methods and refine it with the others.

    Attributes:
        workers: the Worker replicas of `tfjob_manifest()` (the test's hand-written job).
        start_ticks, start_delays: ticks from a pod's creation to its container's start (more for some indices).
        exits: scripted container runs per (replica type, index), in order; later runs succeed.
        pending: Worker indices that never get scheduled (`None`: none; all when `never_scheduled` says so).
        waiting: Worker index -> (reason, message) of a scheduled pod whose container never starts.
        gang: gang scheduling with a PodGroup that is never admitted (no pod is created).
        crd, operator: whether the CRD is installed and the operator runs.
        operator_every: the operator reconciles every N ticks (a busy work queue), so a poll can see a failed pod
            before the operator restarts it.
        denied: (verb, resource) pairs RBAC refuses; `rbac`: when set, only these rules are allowed.
        unavailable_reads: the first N reads of a TFJob answer 503.
        lose_create_answer: the first create is stored but answered 504 (the answer lost on the way).
        refused: Worker index -> the API server refuses to create its pod (`pods_refused`).
    """

    workers: int = 2
    start_ticks: int = 1
    start_delays: dict[int, int] = field(default_factory=dict)
    run_ticks: int = 3
    success_log: str = DEFAULT_LOG
    exits: dict[tuple[str, int], list[Exit]] = field(default_factory=dict)
    pending: frozenset[int] | None = None
    scheduling_event: str = ""
    waiting: dict[int, tuple[str, str]] = field(default_factory=dict)
    gang: bool = False
    crd: bool = True
    operator: bool = True
    operator_every: int = 1
    denied: set[tuple[str, str]] = field(default_factory=set)
    rbac: tuple[Mapping[str, Any], ...] | None = None
    unavailable_reads: int = 0
    lose_create_answer: bool = False
    refused: dict[int, Refusal] = field(default_factory=dict)

    @classmethod
    def succeeds(cls, workers: int = 4, run_ticks: int = 3) -> Scenario:
        """Every worker is scheduled at once, trains `run_ticks` ticks and exits 0."""
        return cls(workers=workers, run_ticks=run_ticks)

    @classmethod
    def never_scheduled(
        cls, event: str, *, workers: int = 4, pending: frozenset[int] | None = None, gang: bool = False
    ) -> Scenario:
        """The scheduler places none of the workers (or only those not in `pending`) and says `event`."""
        return cls(
            workers=workers,
            pending=frozenset(range(workers)) if pending is None else pending,
            scheduling_event=event,
            gang=gang,
        )

    @classmethod
    def no_crd(cls) -> Scenario:
        """The cluster has no Training Operator: nothing serves kubeflow.org/v1 tfjobs."""
        return cls(crd=False, operator=False)

    @classmethod
    def no_operator(cls, workers: int = 2) -> Scenario:
        """The CRD is installed but no operator runs: the job never gets a status."""
        return cls(workers=workers, operator=False)

    def worker_fails(
        self, index: int, exit_code: int, reason: str = "Error", log: str = "", *, after_ticks: int = 1, times: int = 1
    ) -> Scenario:
        """Worker `index`'s container exits with `exit_code` and `reason` after `after_ticks`, `times` runs in a row."""
        self.exits.setdefault(("Worker", index), []).extend(
            Exit(code=exit_code, reason=reason, log=log, ticks=after_ticks) for _ in range(times)
        )
        return self

    def image_pull_fails(self, index: int, message: str, reason: str = "ImagePullBackOff") -> Scenario:
        """Worker `index` is scheduled, but its image never arrives."""
        self.waiting[index] = (reason, message)
        return self

    def pods_refused(self, cause: str, *, indices: Iterable[int] | None = None, times: int | None = None) -> Scenario:
        """The API server refuses to create the pods of Worker `indices` (default: every one) with `cause`, `times`
        creates in a row (default: always); the operator records each refusal as a FailedCreatePod event."""
        for index in range(self.workers) if indices is None else indices:
            self.refused[index] = Refusal(cause=cause, times=times)
        return self

    def refusal_for(self, replica_type: str, index: int) -> Refusal | None:
        return self.refused.get(index) if replica_type == "Worker" else None

    def forbidden(self, verb: str, resource: str = PLURAL) -> Scenario:
        """RBAC refuses the service account `verb` on `resource` (e.g. "create", "tfjobs"; "get", "pods/log")."""
        self.denied.add((verb, resource))
        return self

    def unschedulable(self, index: int) -> bool:
        return self.pending is not None and index in self.pending

    def exit_for(self, replica: tuple[str, int], attempt: int) -> Exit:
        scripted = self.exits.get(replica, [])
        if attempt < len(scripted):
            return scripted[attempt]
        return Exit(code=0, reason="Completed", log=self.success_log, ticks=self.run_ticks)


def tfjob_manifest(
    name: str = "tfxp-train",
    *,
    workers: int = 2,
    owner_uid: str | None = "pod-uid-1",
    restart_policy: str | None = None,
    run_policy: Mapping[str, Any] | None = None,
    container_name: str = "tensorflow",
    fn_args_uri: str | None = FN_ARGS_URI,
) -> dict[str, Any]:
    """A minimal TFJob of `workers` workers, as the manifest module writes it: owned by the task's pod, its
    workers running `--fn-args fn_args_uri` (no arguments when None)."""
    container: dict[str, Any] = {
        "name": container_name,
        "image": "registry.example.com/tfxp:0.1.0",
        "command": ["python", "-m", "components.trainer.worker"],
    }
    if fn_args_uri is not None:
        container["args"] = ["--fn-args", fn_args_uri]
    worker: dict[str, Any] = {"replicas": workers, "template": {"spec": {"containers": [container]}}}
    if restart_policy:
        worker["restartPolicy"] = restart_policy
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "tfxp"}}
    if owner_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "tfxp-trainer-pod", "uid": owner_uid}
        ]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TFJob",
        "metadata": metadata,
        "spec": {"runPolicy": dict(run_policy or {}), "tfReplicaSpecs": {"Worker": worker}},
    }


@dataclass
class Recorded:
    """One request; `verb` and `resource` as RBAC sees it (`get`, `pods/log`), empty for an unknown path."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    verb: str = ""
    resource: str = ""


@dataclass
class SlowAnswer:
    """Answers to requests of `verb` on `resource` (RBAC's words: `create`/`get`/`list`/`delete`, `tfjobs`/`pods`)
    come `seconds` late: all at once after the wait, or (`trickle`) one byte at a time spread over it, which socket
    read timeouts never trip. The request takes effect at once (a create is stored before its answer is sent);
    `times` such answers (None: every one). `started` is set when the first one begins."""

    verb: str
    resource: str
    seconds: float
    trickle: bool = False
    times: int | None = None
    started: threading.Event = field(default_factory=threading.Event)


def _status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def _qualified(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource  # schema.GroupResource.String()


def _selector(text: str) -> list[tuple[str, str, bool]]:
    """`a=b,c!=d` (also `==`) as (key, value, equal) triples."""
    terms = []
    for term in filter(None, text.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            terms.append((key, value, False))
        else:
            key, value = term.replace("==", "=").split("=", 1)
            terms.append((key, value, True))
    return terms


class K8sApiDouble:
    """The API server of one namespace over a `Cluster`.

    Args:
        scenario: what the cluster does.
        clock: seconds since the double's epoch (timestamps, activeDeadlineSeconds); default: counts ticks.
        validate_schema: check created TFJobs against the CRD's openAPIV3Schema (422 Invalid when they fail).
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        namespace: str = NAMESPACE,
        service_account: str = SERVICE_ACCOUNT,
        clock: Callable[[], float] | None = None,
        validate_schema: bool = True,
    ) -> None:
        self.scenario = scenario
        self.namespace = namespace
        self.user = f"system:serviceaccount:{namespace}:{service_account}"
        self.cluster = Cluster(scenario, namespace, clock or (lambda: float(self.cluster.ticks)))
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self._schema = _crd_schema() if validate_schema else None
        self._unavailable_left = scenario.unavailable_reads
        self._lose_create = scenario.lose_create_answer
        self.slow: list[SlowAnswer] = []
        # The next reads of a TFJob answered 200 with this body instead (a proxy's HTML page, a cut-off JSON...);
        # None: that read is answered as usual.
        self.odd_reads: list[tuple[str, bytes] | None] = []
        # The same for the next lists of pods.
        self.odd_pod_lists: list[tuple[str, bytes]] = []
        # Requests whose answer is not sent yet (a slow one), by RBAC verb: what a test may interrupt.
        self.in_flight: dict[str, int] = {}

    def slow_answer(self, verb: str, resource: str = PLURAL, seconds: float = 5.0, **options: Any) -> SlowAnswer:
        """Makes answers to `verb` on `resource` slow (SlowAnswer); returns it (its `started` event)."""
        slow = SlowAnswer(verb, resource, seconds, **options)
        with self.lock:
            self.slow.append(slow)
        return slow

    def _slowness(self, request: Recorded) -> SlowAnswer | None:
        with self.lock:
            for slow in self.slow:
                if (slow.verb, slow.resource) == (request.verb, request.resource) and slow.times != 0:
                    if slow.times is not None:
                        slow.times -= 1
                    return slow
        return None

    def calls(self, method: str, path_part: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and path_part in r.path]

    def add_job(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Stores a TFJob as if someone had created it before the test (no request recorded)."""
        return self._store(json.loads(json.dumps(manifest)))

    # -- routing -----------------------------------------------------------------------------------------------

    def answer(self, request: Recorded) -> tuple[int, str, bytes]:
        with self.lock:
            self.requests.append(request)
            route = self._route(request)
            if route is None:
                return 404, "text/plain; charset=utf-8", b"404 page not found\n"
            verb, group, resource, namespace, name = route
            request.verb, request.resource = verb, resource
            refusal = self._authorize(verb, group, resource, namespace, name)
            if refusal is not None:
                return self._json(403, refusal)
            if group == GROUP and not self.scenario.crd:
                # No CRD: the apiextensions handler passes it on and nobody serves it
                # (customresource_handler.go:256-260, not_found_handler.go:64).
                return 404, "text/plain; charset=utf-8", b"404 page not found\n"
            if namespace != self.namespace:
                return self._json(
                    404,
                    _status(404, "NotFound", f'namespaces "{namespace}" not found', name=namespace, kind="namespaces"),
                )
            handler = getattr(self, f"_{verb}_{resource.replace('/', '_')}")
            return handler(request, name)

    def _route(self, request: Recorded) -> tuple[str, str, str, str, str] | None:
        parts = request.path.strip("/").split("/")
        if (
            parts[:3] == ["apis", GROUP, VERSION]
            and len(parts) in (6, 7)
            and parts[3] == "namespaces"
            and parts[5] == PLURAL
        ):
            name = parts[6] if len(parts) == 7 else ""
            verb = {"POST": "create", "DELETE": "delete"}.get(request.method, "get" if name else "list")
            if verb == "list" and request.query.get("watch") == ["true"]:
                verb = "watch"
            return verb, GROUP, PLURAL, parts[4], name
        if parts[:2] == ["api", "v1"] and len(parts) >= 4 and parts[2] == "namespaces" and request.method == "GET":
            if parts[4:] == ["pods"]:
                return "list", "", "pods", parts[3], ""
            if len(parts) == 7 and parts[4] == "pods" and parts[6] == "log":
                return "get", "", "pods/log", parts[3], parts[5]
            if parts[4:] == ["events"]:
                return "list", "", "events", parts[3], ""
        return None

    def _authorize(self, verb: str, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        allowed = (verb, resource) not in self.scenario.denied
        if allowed and self.scenario.rbac is not None:
            allowed = any(
                group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
                for rule in self.scenario.rbac
            )
        if allowed:
            return None
        base = resource.split("/")[0]
        said = (
            f'User "{self.user}" cannot {verb} resource "{resource}" in API group "{group}" '
            f'in the namespace "{namespace}"'
        )
        qualified = _qualified(group, base)
        message = f'{qualified} "{name}" is forbidden: {said}' if name else f"{qualified} is forbidden: {said}"
        details = {"group": group, "kind": base, **({"name": name} if name else {})}
        return _status(403, "Forbidden", message, **details)

    @staticmethod
    def _json(code: int, body: Any) -> tuple[int, str, bytes]:
        return code, "application/json", json.dumps(body).encode()

    # -- tfjobs ------------------------------------------------------------------------------------------------

    def _not_found(self, name: str) -> tuple[int, str, bytes]:
        return self._json(
            404, _status(404, "NotFound", f'{PLURAL}.{GROUP} "{name}" not found', name=name, group=GROUP, kind=PLURAL)
        )

    def _create_tfjobs(self, request: Recorded, _: str) -> tuple[int, str, bytes]:
        body = request.body or {}
        name = (body.get("metadata") or {}).get("name", "")
        if name in self.cluster.jobs:
            return self._json(
                409,
                _status(
                    409,
                    "AlreadyExists",
                    f'{PLURAL}.{GROUP} "{name}" already exists',
                    name=name,
                    group=GROUP,
                    kind=PLURAL,
                ),
            )
        invalid = self._schema_problems(body)
        if invalid:
            causes = [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in invalid]
            text = "; ".join(f"{f}: {m}" for f, m in invalid)
            return self._json(
                422,
                _status(
                    422,
                    "Invalid",
                    f'TFJob.{GROUP} "{name}" is invalid: {text}',
                    name=name,
                    group=GROUP,
                    kind="TFJob",
                    causes=causes,
                ),
            )
        denied = _webhook_problems(body)
        if denied:
            said = denied[0] if len(denied) == 1 else "[" + ", ".join(denied) + "]"
            return self._json(
                403, _status(403, "Forbidden", f'admission webhook "{WEBHOOK}" denied the request: {said}')
            )
        stored = self._store(body)
        if self._lose_create:
            self._lose_create = False
            return self._json(
                504,
                _status(
                    504,
                    "Timeout",
                    "the server was unable to return a response in the time allotted, but may still be processing "
                    "the request",
                ),
            )
        return self._json(201, stored)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        metadata = body.setdefault("metadata", {})
        metadata.update(
            namespace=self.namespace,
            uid=str(uuid.uuid4()),
            creationTimestamp=self.cluster.now(),
            resourceVersion=self.cluster.next_version(),
            generation=1,
        )
        self.cluster.jobs[metadata["name"]] = body
        return json.loads(json.dumps(body))

    def _get_tfjobs(self, _: Recorded, name: str) -> tuple[int, str, bytes]:
        if self._unavailable_left > 0:
            self._unavailable_left -= 1
            return self._json(
                503, _status(503, "ServiceUnavailable", "the server is currently unable to handle the request")
            )
        odd = self.odd_reads.pop(0) if self.odd_reads else None
        if odd is not None:
            return 200, *odd
        if name in self.cluster.jobs:
            self.cluster.tick()
        if name not in self.cluster.jobs:
            return self._not_found(name)
        return self._json(200, self.cluster.jobs[name])

    def _list_tfjobs(self, _: Recorded, __: str) -> tuple[int, str, bytes]:
        items = list(self.cluster.jobs.values())
        return self._json(
            200, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TFJobList", "metadata": {}, "items": items}
        )

    def _delete_tfjobs(self, request: Recorded, name: str) -> tuple[int, str, bytes]:
        job = self.cluster.jobs.get(name)
        if job is None:
            return self._not_found(name)
        wanted = ((request.body or {}).get("preconditions") or {}).get("uid")
        uid = job["metadata"]["uid"]
        if wanted and wanted != uid:
            # storage Preconditions.Check (kubernetes/apiserver pkg/storage/interfaces.go:145-163) -> NewConflict
            message = (
                f'Operation cannot be fulfilled on {PLURAL}.{GROUP} "{name}": Precondition failed: UID in '
                f"precondition: {wanted}, UID in object meta: {uid}"
            )
            return self._json(409, _status(409, "Conflict", message, name=name, group=GROUP, kind=PLURAL))
        self.cluster.delete_job(name)
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": GROUP, "kind": PLURAL, "uid": uid},
        }
        return self._json(200, body)

    def _schema_problems(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        if self._schema is None:
            return []
        import jsonschema

        validator = jsonschema.Draft4Validator(self._schema)
        return [
            (".".join(str(p) for p in error.absolute_path) or "<root>", error.message)
            for error in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        ]

    # -- pods, logs, events ------------------------------------------------------------------------------------

    def _list_pods(self, request: Recorded, _: str) -> tuple[int, str, bytes]:
        if self.odd_pod_lists:
            content_type, body = self.odd_pod_lists.pop(0)
            return 200, content_type, body
        terms = _selector(request.query.get("labelSelector", [""])[0])
        items = [
            pod
            for _, pod in sorted(self.cluster.pods.items())
            if all((pod["metadata"]["labels"].get(k) == v) == equal for k, v, equal in terms)
        ]
        return self._json(200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items})

    def _get_pods_log(self, request: Recorded, name: str) -> tuple[int, str, bytes]:
        pod = self.cluster.pods.get(name)
        if pod is None:
            return self._json(404, _status(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods"))
        container = request.query.get("container", ["tensorflow"])[0]
        previous = request.query.get("previous", ["false"])[0] in _GO_TRUE
        logs = self.cluster.runs[name].logs
        statuses = pod["status"].get("containerStatuses") or [{}]
        # In CrashLoopBackOff the container that ran last is the "previous" one; while one runs, the one before.
        crashed = "waiting" in (statuses[0].get("state") or {}) and bool(statuses[0].get("lastState"))
        previous_index = -1 if crashed else -2
        if previous and len(logs) < -previous_index:
            message = f'previous terminated container "{container}" in pod "{name}" not found'
            return self._json(400, _status(400, "BadRequest", message))
        if not logs:
            message = f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            return self._json(400, _status(400, "BadRequest", message))
        text = logs[previous_index] if previous else logs[-1]
        lines = text.splitlines()
        tail = int(request.query.get("tailLines", [str(len(lines))])[0])
        data = "".join(f"{line}\n" for line in lines[-tail:] if tail > 0)
        return 200, "text/plain", data.encode()

    def _list_events(self, request: Recorded, _: str) -> tuple[int, str, bytes]:
        terms = _selector(request.query.get("fieldSelector", [""])[0])
        for key, _value, _equal in terms:
            if key not in EVENT_FIELDS:
                return self._json(400, _status(400, "BadRequest", f'"{key}" is not a known field selector'))

        def value(event: Mapping[str, Any], path: tuple[str, ...]) -> str:
            found: Any = event
            for part in path:
                found = (found or {}).get(part)
            return str(found or "")

        items = [
            event
            for event in self.cluster.events
            if all((value(event, EVENT_FIELDS[k]) == v) == equal for k, v, equal in terms)
        ]
        return self._json(200, {"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": items})


@functools.cache
def _crd_schema() -> dict[str, Any]:
    documents = [d for d in yaml.safe_load_all(CRD_PATH.read_text()) if d]
    return documents[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _webhook_problems(body: Mapping[str, Any]) -> list[str]:
    """validateTFJob (tfjob_webhook.go:72-126), the parts a hand-written manifest can get wrong: a DNS-1035 name,
    replica specs, an image on every container and one container named `tensorflow` per replica type."""
    import re

    problems = []
    name = str((body.get("metadata") or {}).get("name", ""))
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
        problems.append(f'metadata.name: Invalid value: "{name}": should match: a DNS-1035 label')
    specs = (body.get("spec") or {}).get("tfReplicaSpecs")
    if not specs:
        problems.append("spec.tfReplicaSpecs: Required value: must be required")
    for kind, spec in (specs or {}).items():
        path = f"spec.tfReplicaSpecs[{kind}].template.spec.containers"
        containers = (((spec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        for index, container in enumerate(containers):
            if not container.get("image"):
                problems.append(f"{path}[{index}].image: Required value: must be required")
        if not any(c.get("name") == "tensorflow" for c in containers):
            problems.append(f"{path}: Required value: must have at least one container with name tensorflow")
    return problems


def _handler(double: K8sApiDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(DoubleHandler):
        def answer_request(self) -> None:
            url = urlparse(self.path)
            raw = self.read_body()
            request = Recorded(self.command, url.path, parse_qs(url.query), json.loads(raw) if raw else None)
            status, content_type, data = double.answer(request)
            slow = double._slowness(request)
            if slow is not None:
                with double.lock:
                    double.in_flight[request.verb] = double.in_flight.get(request.verb, 0) + 1
                slow.started.set()
            try:
                if slow is not None and not slow.trickle:
                    time.sleep(slow.seconds)
                self.send_head(status, content_type, len(data))
                if slow is not None and slow.trickle:
                    for index in range(len(data)):
                        self.wfile.write(data[index : index + 1])
                        self.wfile.flush()
                        time.sleep(slow.seconds / max(len(data), 1))
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away (abandoned the call, or its process ended)
            finally:
                if slow is not None:
                    with double.lock:
                        double.in_flight[request.verb] -= 1

    return Handler


@contextlib.contextmanager
def serve(double: K8sApiDouble) -> Iterator[str]:
    """Serves `double` on a free local port; yields its base URL."""
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _handler(double)), poll_interval=0.05) as url:
        yield url
