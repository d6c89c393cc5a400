"""A local fake of the KFP v2beta1 REST API, for the tests of `tfxp submit`, `pipeline`, `schedule` and `runs`.

It implements what kfp 2.16's `Client` calls for those commands — healthz (with the server's `tag_name`, as KFP's API
server answers it); experiments (find by name, create);
runs (create, get, list, terminate, retry); pipelines (find by name, create, list), pipeline versions (upload,
list, get); recurring runs (create, list, enable, disable, delete) — over an in-memory state, and records every
request (and the `runtime_config` of every run and recurring run created) so tests assert what the real client sent.

tests/conftest.py serves it as fixtures: `fake` (a fresh FakeKfp), `host` (the URL it answers on, for `--host`) and
`no_kfp_credentials` (a test module marks itself `pytest.mark.usefixtures("no_kfp_credentials")`).
"""

from __future__ import annotations

import contextlib
import email.parser
import json
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from http_double import DoubleHandler, serving

from pipeline.kubeflow.client.auth import COOKIE_ENV, TOKEN_ENV, TOKEN_PATH_ENV

RUN_ID = "3f1e9a2c-run"
API = "/apis/v2beta1"


def ir_document(
    name: str, components: dict[str, Any], executors: dict[str, Any], root: dict[str, Any]
) -> dict[str, Any]:
    """A KFP IR document (a PipelineSpec as plain data) named `name`, with the versions TFX 1.21 writes."""
    return {
        "pipelineInfo": {"name": name},
        "schemaVersion": "2.1.0",
        "sdkVersion": "tfx-1.21.0",
        "components": components,
        "deploymentSpec": {"executors": executors},
        "root": root,
    }


def ir_task(name: str, **fields: Any) -> dict[str, Any]:
    """A DAG task `name` that runs the component of the same name; `fields` are its other IR fields, as KFP
    spells them (`dependentTasks=["Trainer"]`)."""
    return {"componentRef": {"name": name}, "taskInfo": {"name": name}, **fields}


def spec_dict(
    tasks: list[str],
    parameters: dict[str, dict[str, Any]] | None = None,
    *,
    pipeline_root: str = "",
    exit_handler: str = "",
) -> dict[str, Any]:
    """A small valid KFP IR: one container executor per task, chained; `parameters` as the root's declared
    run parameters (`{"train_steps": {"parameterType": "NUMBER_INTEGER", "defaultValue": 300}}`);
    `pipeline_root` as its `defaultPipelineRoot`; `exit_handler` names one more task that takes the final status
    of the last one (`taskFinalStatus`, as TFX's `set_exit_handler` compiles it)."""
    tasks = [*tasks, *([exit_handler] if exit_handler else [])]
    components = {name: {"executorLabel": f"{name}_executor"} for name in tasks}
    executors = {
        f"{name}_executor": {"container": {"image": "registry.example.com/tfxp:0.1.0", "command": ["python"]}}
        for name in tasks
    }
    dag = {
        name: ir_task(
            name, cachingOptions={"enableCache": True}, **({"dependentTasks": [tasks[index - 1]]} if index else {})
        )
        for index, name in enumerate(tasks)
    }
    if exit_handler:
        final_status = {"final_status": {"taskFinalStatus": {"producerTask": tasks[-2]}}}
        dag[exit_handler].update(
            inputs={"parameters": final_status}, triggerPolicy={"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
        )
        components[exit_handler]["inputDefinitions"] = {
            "parameters": {"final_status": {"parameterType": "TASK_FINAL_STATUS"}}
        }
    root: dict[str, Any] = {"dag": {"tasks": dag}}
    if parameters:
        root["inputDefinitions"] = {"parameters": parameters}
    spec = ir_document("tfxp-test", components, executors, root)
    if pipeline_root:
        spec["defaultPipelineRoot"] = pipeline_root
    return spec


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    files: dict[str, bytes] = field(default_factory=dict)


def _stamp(index: int) -> str:
    return f"2025-01-{index + 1:02d}T00:00:00Z"


def _parse_multipart(content_type: str, raw: bytes) -> dict[str, bytes]:
    message = email.parser.BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    return {
        str(part.get_param("name", header="content-disposition")): part.get_payload(decode=True)
        for part in message.get_payload()
    }


def _spec_struct(text: str) -> dict[str, Any]:
    # What the API server stores for an uploaded file: the spec, or both documents when there is a platform spec.
    documents = [doc for doc in yaml.safe_load_all(text) if doc]
    if len(documents) == 1:
        return documents[0]
    return {"pipeline_spec": documents[0], "platform_spec": documents[1]}


def _name_filter(query: dict[str, list[str]]) -> str | None:
    if "filter" not in query:
        return None
    predicates = json.loads(query["filter"][0])["predicates"]
    assert predicates[0]["key"] == "display_name" and predicates[0]["operation"] in (1, "EQUALS")
    return str(predicates[0]["stringValue"])


def _page(items: list[dict[str, Any]], query: dict[str, list[str]]) -> list[dict[str, Any]]:
    if query.get("sort_by") == ["created_at desc"]:
        items = sorted(items, key=lambda item: item["created_at"], reverse=True)
    return items[: int(query.get("page_size", ["10"])[0])]


@dataclass
class FakeKfp:
    """Scripted KFP API state: `states` are returned by successive GET runs/{RUN_ID} (the last one repeats);
    `tag_name` is the server's release on healthz (None: the answer has no `tag_name`).

    `multi_user` is the API server's mode. In multi-user mode a pipeline belongs to the namespace it was created
    in ("" = shared), ListPipelines lists exactly the namespace asked for (shared pipelines only when none is
    given) and names are unique per namespace; in single-user mode the namespace is ignored (KFP's
    `ReplaceNamespace`, backend/src/apiserver/resource/resource_manager.go:2723; the filter in
    backend/src/apiserver/storage/pipeline_store.go:231; the unique index `namespace_name` in
    backend/src/apiserver/model/pipeline.go:44,54)."""

    multi_user: bool = False
    states: list[str] = field(default_factory=lambda: ["SUCCEEDED"])
    tasks: dict[str, str] = field(default_factory=dict)
    run_error: str = ""
    required_auth: str | None = None
    refusal: int = 401
    hang: tuple[str, str] | None = None
    create_run_error: str = ""
    experiments: dict[str, str] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pipelines: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    recurring_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    polls: int = 0
    tag_name: str | None = "2.16.0"
    runtime_configs: list[dict[str, Any]] = field(default_factory=list)
    # (method, path) → (status, content type, body) sent as it is, e.g. a proxy's HTML page with 200.
    raw_answers: dict[tuple[str, str], tuple[int, str, bytes]] = field(default_factory=dict)
    # (method, path) → (status, Location): the next such request is redirected (once), e.g. 307 to another
    # origin for POST /apis/v2beta1/runs.
    redirects: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    # (method, path) → size: the answer is 200 with a JSON body of `size` bytes, written in 64 KiB chunks until the
    # client stops reading; `streamed` counts the bytes written.
    huge_answers: dict[tuple[str, str], int] = field(default_factory=dict)
    streamed: int = 0
    # Called with each request once it is recorded, before it is answered (a token file rotating meanwhile).
    on_request: Callable[[Recorded], None] | None = None

    def calls(self, method: str, path: str) -> list[Recorded]:
        return [request for request in self.requests if request.method == method and request.path == path]

    def api_calls(self) -> list[tuple[str, str]]:
        """(method, path) of every request but the health checks."""
        return [(r.method, r.path) for r in self.requests if r.path != f"{API}/healthz"]

    def add_run(self, run_id: str, state: str, experiment_id: str = "exp-1", **extra: Any) -> None:
        index = len(self.runs)
        self.runs[run_id] = {
            "run_id": run_id,
            "display_name": f"tfxp-digits-{index}",
            "state": state,
            "experiment_id": experiment_id,
            "created_at": _stamp(index),
            **extra,
        }

    def add_pipeline(
        self, name: str, versions: dict[str, dict[str, Any] | None] | None = None, namespace: str = ""
    ) -> str:
        pipeline_id = f"pl-{len(self.pipelines) + 1}"
        self.pipelines[pipeline_id] = {
            "pipeline_id": pipeline_id,
            "display_name": name,
            "created_at": _stamp(len(self.pipelines)),
            **({"namespace": namespace} if namespace else {}),
        }
        self.versions[pipeline_id] = []
        for version, spec in (versions or {}).items():
            self._add_version(pipeline_id, version, spec)
        return pipeline_id

    def _add_version(self, pipeline_id: str, name: str, spec: dict[str, Any] | None, description: str = "") -> dict:
        versions = self.versions[pipeline_id]
        version = {
            "pipeline_id": pipeline_id,
            "pipeline_version_id": f"{pipeline_id}-v{len(versions) + 1}",
            "display_name": name,
            "name": name,
            "description": description,
            "created_at": _stamp(len(versions)),
            **({"pipeline_spec": spec} if spec is not None else {}),
        }
        versions.append(version)
        return version

    def answer(self, request: Recorded) -> tuple[int, Any]:
        if self.required_auth and request.headers.get("authorization") != self.required_auth:
            return self.refusal, {"error": "unauthenticated", "code": 16}
        method, path = request.method, request.path.removeprefix(API)
        parts = path.strip("/").split("/")
        if (method, path) == ("GET", "/healthz"):
            # What backend/src/apiserver/main.go's healthz handler writes (tag_name: the image's TAG_NAME).
            healthz: dict[str, Any] = {"commit_sha": "7b70c7b", "multi_user": self.multi_user}
            if self.tag_name is not None:
                healthz["tag_name"] = self.tag_name
            return 200, healthz
        if parts[0] == "experiments":
            return self._experiments(request)
        if parts[0] == "runs":
            return self._runs(request, parts)
        if parts[0] == "pipelines":
            return self._pipelines(request, parts)
        if parts[0] == "recurringruns":
            return self._recurring_runs(request, parts)
        return 404, {"error": f"no route {request.method} {request.path}", "code": 5}

    def _experiments(self, request: Recorded) -> tuple[int, Any]:
        if request.method == "GET":
            name = _name_filter(request.query)
            if name not in self.experiments:
                return 200, {}
            return 200, {"experiments": [{"experiment_id": self.experiments[name], "display_name": name}]}
        name = request.body["display_name"]
        self.experiments[name] = f"exp-{len(self.experiments) + 1}"
        return 200, {"experiment_id": self.experiments[name], "display_name": name}

    def _runs(self, request: Recorded, parts: list[str]) -> tuple[int, Any]:
        if request.method == "POST" and len(parts) == 1:
            if self.create_run_error:
                return 400, {"error": self.create_run_error, "code": 3}
            self.runtime_configs.append(request.body.get("runtime_config") or {})
            return 200, {**request.body, "run_id": RUN_ID, "state": "PENDING"}
        if request.method == "GET" and len(parts) == 1:
            runs = [
                run
                for run in self.runs.values()
                if run["experiment_id"] in request.query.get("experiment_id", [run["experiment_id"]])
            ]
            return 200, {"runs": _page(runs, request.query), "total_size": len(runs)}
        run_id, _, action = parts[1].partition(":")
        if run_id == RUN_ID and run_id not in self.runs and request.method == "GET":
            return 200, self._scripted_run()
        if run_id not in self.runs:
            return 404, {"error": f"Run {run_id} not found", "code": 5}
        if action:
            self.runs[run_id]["state"] = {"terminate": "CANCELING", "retry": "RUNNING"}[action]
            return 200, {}
        return 200, self.runs[run_id]

    def _scripted_run(self) -> dict[str, Any]:
        state = self.states[min(self.polls, len(self.states) - 1)]
        self.polls += 1
        details = [{"display_name": name, "state": task_state} for name, task_state in self.tasks.items()]
        run: dict[str, Any] = {"run_id": RUN_ID, "state": state, "run_details": {"task_details": details}}
        if self.run_error and state == "FAILED":
            run["error"] = {"code": 2, "message": self.run_error}
        return run

    def _pipelines(self, request: Recorded, parts: list[str]) -> tuple[int, Any]:
        if parts == ["pipelines"] and request.method == "GET":
            name, namespace = _name_filter(request.query), self._namespace(request.query.get("namespace", [""])[0])
            pipelines = [
                p
                for p in self.pipelines.values()
                if (name is None or p["display_name"] == name) and p.get("namespace", "") == namespace
            ]
            return 200, {"pipelines": _page(pipelines, request.query)} if pipelines else {}
        if parts == ["pipelines"] and request.method == "POST":
            name, namespace = request.body["display_name"], self._namespace(request.body.get("namespace", ""))
            if any(p["display_name"] == name and p.get("namespace", "") == namespace for p in self.pipelines.values()):
                return 409, {"error": "Failed to create a pipeline. The pipeline already exists", "code": 6}
            return 200, self.pipelines[self.add_pipeline(name, namespace=namespace)]
        if parts == ["pipelines", "upload_version"]:
            pipeline_id = request.query["pipelineid"][0]
            name = request.query["name"][0]
            if any(v["display_name"] == name for v in self.versions.get(pipeline_id, [])):
                return 409, {"error": "Failed to create a pipeline version", "code": 6}
            spec = _spec_struct(request.files["uploadfile"].decode())
            description = request.query.get("description", [""])[0]
            return 200, self._add_version(pipeline_id, name, spec, description)
        pipeline_id = parts[1]
        if pipeline_id not in self.pipelines:
            return 404, {"error": f"Pipeline {pipeline_id} not found", "code": 5}
        versions = self.versions[pipeline_id]
        if len(parts) == 3:
            name = _name_filter(request.query)
            chosen = [v for v in versions if name is None or v["display_name"] == name]
            listed = [{k: v for k, v in version.items() if k != "pipeline_spec"} for version in chosen]
            return 200, {"pipeline_versions": _page(listed, request.query)} if listed else {}
        matching = [v for v in versions if v["pipeline_version_id"] == parts[3]]
        return (200, matching[0]) if matching else (404, {"error": "version not found", "code": 5})

    def _namespace(self, namespace: str) -> str:
        # Single-user KFP stores and lists every pipeline without a namespace.
        return namespace if self.multi_user else ""

    def _recurring_runs(self, request: Recorded, parts: list[str]) -> tuple[int, Any]:
        if len(parts) == 1 and request.method == "POST":
            self.runtime_configs.append(request.body.get("runtime_config") or {})
            recurring_id = f"rr-{len(self.recurring_runs) + 1}"
            status = "ENABLED" if request.body.get("mode") == "ENABLE" else "DISABLED"
            created = {**request.body, "recurring_run_id": recurring_id, "status": status, "created_at": _stamp(0)}
            self.recurring_runs[recurring_id] = created
            return 200, created
        if len(parts) == 1:
            # The field is camelCase in KFP's recurring_run.proto itself, so the JSON key is too.
            return 200, {"recurringRuns": _page(list(self.recurring_runs.values()), request.query)}
        recurring_id, _, action = parts[1].partition(":")
        if recurring_id not in self.recurring_runs:
            return 404, {"error": f"RecurringRun {recurring_id} not found", "code": 5}
        if request.method == "DELETE":
            del self.recurring_runs[recurring_id]
        elif action:
            self.recurring_runs[recurring_id]["status"] = {"enable": "ENABLED", "disable": "DISABLED"}[action]
        return 200, {}


def _handler(fake: FakeKfp) -> type[BaseHTTPRequestHandler]:
    class Handler(DoubleHandler):
        def answer_request(self) -> None:
            url = urlparse(self.path)
            raw = self.read_body()
            content_type = self.headers.get("Content-Type", "")
            multipart = content_type.startswith("multipart/")
            request = Recorded(
                method=self.command,
                path=url.path,
                query=parse_qs(url.query),
                headers={key.lower(): value for key, value in self.headers.items()},
                body=json.loads(raw) if raw and not multipart else None,
                files=_parse_multipart(content_type, raw) if multipart else {},
            )
            fake.requests.append(request)
            if fake.on_request is not None:
                fake.on_request(request)
            if (request.method, request.path) in fake.redirects:
                status, location = fake.redirects.pop((request.method, request.path))
                self.send_response(status)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if fake.hang == (request.method, request.path):
                time.sleep(3)  # longer than the client's deadline
            content_type = "application/json"
            if (request.method, request.path) in fake.huge_answers:
                self._stream(fake.huge_answers[(request.method, request.path)])
                return
            if (request.method, request.path) in fake.raw_answers:
                status, content_type, data = fake.raw_answers[(request.method, request.path)]
            else:
                status, payload = fake.answer(request)
                data = json.dumps(payload).encode()
            self.send_head(status, content_type, len(data))
            self.wfile.write(data)

        def _stream(self, size: int) -> None:
            self.send_head(200, "application/json", size)
            chunk = b'{"runs": [' + b" " * (64 * 1024 - 10)
            with contextlib.suppress(ConnectionError):
                while fake.streamed < size:
                    self.wfile.write(chunk)
                    fake.streamed += len(chunk)
                    chunk = b" " * len(chunk)

    return Handler


class _QuietServer(ThreadingHTTPServer):
    """Says nothing when the client hung up first: tests do that on purpose (`FakeKfp.hang`), and socketserver's
    traceback would land, seconds later, in the output of whatever CLI invocation a later test is capturing."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serve(fake: FakeKfp) -> Iterator[str]:
    """Serves `fake` on a free local port; yields its base URL."""
    with serving(_QuietServer(("127.0.0.1", 0), _handler(fake))) as url:
        yield url


def closed_port() -> int:
    """A local port nothing listens on (bound once, then released): a host that refuses connections."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clear_kfp_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removes the credentials and kfp's own variables, so a developer's environment does not leak in."""
    kfp_variables = ("ENDPOINT", "UI_ENDPOINT", "DEFAULT_EXPERIMENT_NAME", "OVERRIDE_EXPERIMENT_NAME")
    for name in (TOKEN_ENV, TOKEN_PATH_ENV, COOKIE_ENV, *(f"KF_PIPELINES_{variable}" for variable in kfp_variables)):
        monkeypatch.delenv(name, raising=False)
