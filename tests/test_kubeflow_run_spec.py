"""`tfxp run-spec` and the run notice: a compiled spec run task by task, the exit handler's payload and post.

Unit tests run hand-written specs whose tasks are tiny Python scripts (DAG order, nested DAG parameters,
artifacts with metadata, placeholders, the exit handler after a failure); the e2e tests compile the digits
pipeline and run it with `tfxp run-spec`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from typer.testing import CliRunner

from components.notify.notice import (
    FinalStatusError,
    blessing_verdict,
    failed_task,
    notice_payload,
    parse_final_status,
    post_notice,
    pushed_version_of,
    run_outcome,
)
from pipeline.cli import app
from pipeline.kubeflow import local_task
from pipeline.kubeflow.local_run import RunSpecError, pipeline_arguments, run_spec
from pipeline.kubeflow.local_task import TaskContext, TaskInputError, UpstreamState
from pipeline.kubeflow.params import ParamError

# One script for every task of the hand-written specs: argv = mode, the ExecutorInput JSON.
TASK_SCRIPT = """
import json, os, sys
mode, executor_input = sys.argv[1], json.loads(sys.argv[2])
params = executor_input["inputs"].get("parameterValues", {})
out_file = executor_input["outputs"]["outputFile"]
task_dir = os.path.dirname(out_file)
os.makedirs(task_dir, exist_ok=True)
result = {"artifacts": {}}
if mode == "produce":
    uri = executor_input["outputs"]["artifacts"]["data"]["artifacts"][0]["uri"]
    os.makedirs(uri, exist_ok=True)
    text = params["message"] * params["count"]
    open(os.path.join(uri, "data.txt"), "w").write(text)
    result["artifacts"]["data"] = {"artifacts": [{"uri": uri, "metadata": {"length": len(text)}}]}
elif mode == "consume":
    if params.get("fail"):
        sys.exit(3)
    data = executor_input["inputs"]["artifacts"]["data"]["artifacts"][0]
    text = open(os.path.join(data["uri"], "data.txt")).read()
    seen = {"text": text, "length": data["metadata"]["length"], "count": params["count"]}
    json.dump(seen, open(os.path.join(task_dir, "seen.json"), "w"))
else:
    json.dump(params, open(os.path.join(task_dir, "seen.json"), "w"))
json.dump(result, open(out_file, "w"))
"""


def _container(mode: str) -> dict[str, Any]:
    return {"container": {"image": "unused:1", "command": ["python", "-c", TASK_SCRIPT], "args": [mode, "{{$}}"]}}


def _param(kind: str) -> dict[str, Any]:
    return {"parameterType": kind}


def _artifact() -> dict[str, Any]:
    return {"artifactType": {"schemaTitle": "system.Artifact", "schemaVersion": "0.0.1"}}


def _spec(with_exit_handler: bool = True) -> dict[str, Any]:
    """produce → consume inside the DAG component `tfx-dag`, and an exit handler `notify`, as TFX compiles them."""
    tasks = {
        "produce": {
            "componentRef": {"name": "produce"},
            "taskInfo": {"name": "produce"},
            "cachingOptions": {"enableCache": True},
            "inputs": {
                "parameters": {
                    "message": {"componentInputParameter": "message"},
                    "count": {"componentInputParameter": "count"},
                }
            },
        },
        "consume": {
            "componentRef": {"name": "consume"},
            "taskInfo": {"name": "consume"},
            "dependentTasks": ["produce"],
            "inputs": {
                "artifacts": {"data": {"taskOutputArtifact": {"producerTask": "produce", "outputArtifactKey": "data"}}},
                "parameters": {
                    "count": {"componentInputParameter": "count"},
                    "fail": {"componentInputParameter": "fail"},
                },
            },
        },
    }
    parameters = {"message": _param("STRING"), "count": _param("NUMBER_INTEGER"), "fail": _param("BOOLEAN")}
    components: dict[str, Any] = {
        "produce": {
            "executorLabel": "exec-produce",
            "inputDefinitions": {"parameters": {"message": _param("STRING"), "count": _param("NUMBER_INTEGER")}},
            "outputDefinitions": {"artifacts": {"data": _artifact()}},
        },
        "consume": {
            "executorLabel": "exec-consume",
            "inputDefinitions": {"artifacts": {"data": _artifact()}, "parameters": parameters},
        },
    }
    executors = {"exec-produce": _container("produce"), "exec-consume": _container("consume")}
    root: dict[str, Any] = {
        "inputDefinitions": {
            "parameters": {
                "message": {**_param("STRING"), "defaultValue": "ab", "isOptional": True},
                "count": {**_param("NUMBER_INTEGER"), "defaultValue": 2, "isOptional": True},
                "fail": {**_param("BOOLEAN"), "defaultValue": False, "isOptional": True},
            }
        }
    }
    if with_exit_handler:
        components["tfx-dag"] = {"inputDefinitions": {"parameters": parameters}, "dag": {"tasks": tasks}}
        components["notify"] = {
            "executorLabel": "exec-notify",
            "inputDefinitions": {
                "parameters": {"final_status": _param("TASK_FINAL_STATUS"), "run_id": _param("STRING")}
            },
        }
        executors["exec-notify"] = _container("notify")
        passed = {name: {"componentInputParameter": name} for name in parameters}
        root["dag"] = {
            "tasks": {
                "tfx-dag": {
                    "componentRef": {"name": "tfx-dag"},
                    "taskInfo": {"name": "tfx-dag"},
                    "inputs": {"parameters": passed},
                },
                "notify": {
                    "componentRef": {"name": "notify"},
                    "taskInfo": {"name": "notify"},
                    "dependentTasks": ["tfx-dag"],
                    "triggerPolicy": {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"},
                    "inputs": {
                        "parameters": {
                            "final_status": {"taskFinalStatus": {"producerTask": "tfx-dag"}},
                            "run_id": {"runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}},
                        }
                    },
                },
            }
        }
    else:
        root["dag"] = {"tasks": tasks}
    return {
        "pipelineInfo": {"name": "toy"},
        "schemaVersion": "2.1.0",
        "sdkVersion": "tfx-1.21.0",
        "components": components,
        "deploymentSpec": {"executors": executors},
        "root": root,
    }


def _write(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _seen(run_dir: str, task: str) -> dict[str, Any]:
    return json.loads((Path(run_dir) / task / "seen.json").read_text())


# --- the DAG walk on hand-written specs ---


def test_tasks_run_in_order_with_parameters_artifacts_and_the_exit_handler(tmp_path: Path) -> None:
    seen: list[str] = []
    run = run_spec(_write(tmp_path, _spec()), tmp_path / "root", {"count": "3"}, lambda t: seen.append(t.name), "r1")

    assert run.state == "SUCCEEDED"
    assert seen == ["produce", "consume", "notify"]
    assert run.run_dir == f"{(tmp_path / 'root').resolve()}/toy/r1"
    # Parameters reach the nested DAG typed (an int, not 3.0); the artifact arrives with its metadata.
    assert _seen(run.run_dir, "consume") == {"text": "ababab", "length": 6, "count": 3}
    assert run.task("produce").outputs["data"] == {"uri": f"{run.run_dir}/produce/data", "metadata": {"length": 6.0}}
    assert run.task("produce").cache_requested and not run.task("consume").cache_requested
    notified = _seen(run.run_dir, "notify")
    assert notified["final_status"] == {
        "state": "SUCCEEDED",
        "pipelineTaskName": "tfx-dag",
        "pipelineJobResourceName": "r1",
        "error": {},
    }
    assert notified["run_id"] == "r1"  # KFP's {{$.pipeline_job_uuid}} filled in
    record = json.loads((Path(run.run_dir) / "run-spec.json").read_text())
    assert record["state"] == "SUCCEEDED"
    assert record["parameters"] == {"message": "ab", "count": 3.0, "fail": False}


def test_a_failed_task_skips_the_rest_and_the_exit_handler_hears_it(tmp_path: Path) -> None:
    run = run_spec(_write(tmp_path, _spec()), tmp_path / "root", {"fail": "true"}, run_id="r2")

    assert run.state == "FAILED"
    assert [(t.name, t.state) for t in run.tasks] == [
        ("produce", "SUCCEEDED"),
        ("consume", "FAILED"),
        ("notify", "SUCCEEDED"),
    ]
    consume = run.task("consume")
    assert consume.error.startswith("task consume failed: exit code 3")
    status = _seen(run.run_dir, "notify")["final_status"]
    assert status["state"] == "FAILED"
    assert status["error"]["message"] == consume.error
    assert failed_task(status["error"]["message"]) == "consume"


def test_without_an_exit_handler_later_tasks_are_skipped(tmp_path: Path) -> None:
    spec = _spec(with_exit_handler=False)
    spec["components"]["produce"]["executorLabel"] = "exec-consume"  # produce now fails: it has no input artifact
    run = run_spec(_write(tmp_path, spec), tmp_path / "root", run_id="r3")

    assert [(t.name, t.state) for t in run.tasks] == [("produce", "FAILED"), ("consume", "SKIPPED")]
    assert run.task("consume").error == "upstream produce did not succeed"


def test_a_failure_lets_its_wave_finish_and_starts_no_new_wave(tmp_path: Path) -> None:
    # As on KFP: tasks ready together run together; after a failure, nothing new starts.
    spec = _spec(with_exit_handler=False)
    tasks = spec["root"]["dag"]["tasks"]
    tasks["consume2"] = json.loads(json.dumps(tasks["consume"]).replace('"fail"}', '"never"}'))
    tasks["late"] = {**json.loads(json.dumps(tasks["consume2"])), "dependentTasks": ["consume2", "produce"]}
    run = run_spec(_write(tmp_path, spec), tmp_path / "root", {"fail": "true"}, run_id="r4")

    assert [(t.name, t.state) for t in run.tasks] == [
        ("produce", "SUCCEEDED"),
        ("consume", "FAILED"),
        ("consume2", "SUCCEEDED"),
        ("late", "SKIPPED"),
    ]
    assert run.task("late").error == "an earlier task failed"
    assert run.state == "FAILED"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"steps": "1"},
            r"--param steps: toy has no such parameter; its parameters: count \(NUMBER_INTEGER, default 2\); fail",
        ),
        ({"count": "many"}, r"--param count=many: count is NUMBER_INTEGER, so the value must be a whole number"),
        ({"fail": "maybe"}, r"--param fail=maybe: fail is BOOLEAN, so the value must be true or false"),
    ],
)
def test_bad_parameters_are_refused_before_any_task(tmp_path: Path, params: dict[str, str], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        run_spec(_write(tmp_path, _spec()), tmp_path / "root", params)
    assert not (tmp_path / "root").exists()


def test_parameters_take_defaults_and_a_parameter_without_one_is_required() -> None:
    spec = json_format.ParseDict(_spec(), pipeline_spec_pb2.PipelineSpec())
    values = {
        name: json_format.MessageToDict(value) for name, value in pipeline_arguments(spec, {"message": "x"}).items()
    }
    assert values == {"message": "x", "count": 2, "fail": False}

    spec.root.input_definitions.parameters["count"].ClearField("default_value")
    spec.root.input_definitions.parameters["count"].is_optional = False
    with pytest.raises(
        ParamError, match=r"toy needs a value for count \(NUMBER_INTEGER, required\); pass --param count=VALUE"
    ):
        pipeline_arguments(spec, {})


def test_resolver_and_conditional_tasks_are_refused(tmp_path: Path) -> None:
    spec = _spec(with_exit_handler=False)
    spec["deploymentSpec"]["executors"]["exec-produce"] = {
        "resolver": {"outputArtifactQueries": {"data": {"filter": "x"}}}
    }
    with pytest.raises(
        RunSpecError, match=r"task produce runs a resolver executor \(exec-produce\); run-spec runs container"
    ):
        run_spec(_write(tmp_path, spec), tmp_path / "root")

    spec = _spec(with_exit_handler=False)
    spec["root"]["dag"]["tasks"]["consume"]["triggerPolicy"] = {"condition": "inputs.parameter_values['fail'] == true"}
    with pytest.raises(RunSpecError, match=r"task consume has a condition or a loop"):
        run_spec(_write(tmp_path, spec), tmp_path / "root")


# --- ExecutorInput and placeholders, one task at a time ---


def _context(tmp_path: Path) -> TaskContext:
    return TaskContext(
        name="consume", run_id="run-7", pipeline_root=str(tmp_path), task_dir=f"{tmp_path}/p/run-7/consume"
    )


def _task_and_component() -> tuple[pipeline_spec_pb2.PipelineTaskSpec, pipeline_spec_pb2.ComponentSpec]:
    spec = json_format.ParseDict(_spec(with_exit_handler=False), pipeline_spec_pb2.PipelineSpec())
    return spec.root.dag.tasks["consume"], spec.components["consume"]


def test_executor_input_has_upstream_artifacts_and_output_uris(tmp_path: Path) -> None:
    task, component = _task_and_component()
    component.output_definitions.artifacts["report"].artifact_type.schema_title = "system.Artifact"
    upstream_artifact = pipeline_spec_pb2.RuntimeArtifact(uri="/up/data", metadata={"length": 4})
    upstream = {"produce": UpstreamState(state="SUCCEEDED", artifacts={"data": upstream_artifact})}
    scope = {"count": local_task.python_value(2), "fail": local_task.python_value(False)}

    executor_input = local_task.build_executor_input(task, component, _context(tmp_path), scope, upstream)

    assert executor_input.inputs.artifacts["data"].artifacts[0] == upstream_artifact
    assert dict(executor_input.inputs.parameter_values) == scope
    output = executor_input.outputs.artifacts["report"].artifacts[0]
    assert (output.uri, output.name) == (f"{tmp_path}/p/run-7/consume/report", "run-7/consume/report")
    assert output.type.schema_title == "system.Artifact"
    assert executor_input.outputs.output_file == f"{tmp_path}/p/run-7/consume/executor_output.json"


def test_a_missing_upstream_output_names_the_producer(tmp_path: Path) -> None:
    task, component = _task_and_component()
    upstream = {"produce": UpstreamState(state="SUCCEEDED", artifacts={})}
    with pytest.raises(TaskInputError, match=r"input artifact data: task produce left no output artifact data"):
        local_task.build_executor_input(task, component, _context(tmp_path), {}, upstream)


def test_placeholders_are_resolved_as_kfp_does(tmp_path: Path) -> None:
    task, component = _task_and_component()
    component.input_definitions.parameters["label"].parameter_type = pipeline_spec_pb2.ParameterType.STRING
    component.output_definitions.artifacts["report"].artifact_type.schema_title = "system.Artifact"
    upstream = {
        "produce": UpstreamState(
            state="SUCCEEDED", artifacts={"data": pipeline_spec_pb2.RuntimeArtifact(uri="/up/data")}
        )
    }
    scope = {"count": local_task.python_value(2), "label": local_task.python_value("{{$.pipeline_job_uuid}}-x")}
    task.inputs.parameters["label"].component_input_parameter = "label"
    executor_input = local_task.build_executor_input(task, component, _context(tmp_path), scope, upstream)

    command = local_task.resolve_command(
        [
            "python",
            "--in={{$.inputs.artifacts['data'].uri}}",
            "{{$.inputs.parameters['count']}}",
            "{{$.outputs.artifacts['report'].uri}}",
            "{{$}}",
        ],
        component,
        executor_input,
        _context(tmp_path),
    )

    assert command[0] == sys.executable
    assert command[1:4] == ["--in=/up/data", "2", f"{tmp_path}/p/run-7/consume/report"]
    resolved = json.loads(command[4])
    # NUMBER_INTEGER stays an integer in the JSON; KFP's run placeholders inside string values are filled in.
    assert resolved["inputs"]["parameterValues"] == {"count": 2, "label": "run-7-x"}
    assert resolved["outputs"]["outputFile"].endswith("/consume/executor_output.json")


def test_outputs_keep_the_declared_type_and_take_the_executors_metadata(tmp_path: Path) -> None:
    executor_input = pipeline_spec_pb2.ExecutorInput()
    executor_input.outputs.output_file = str(tmp_path / "executor_output.json")
    executor_input.outputs.artifacts["model"].artifacts.add(uri=str(tmp_path / "model")).type.schema_title = "tfx.Model"
    written = {"artifacts": {"model": {"artifacts": [{"uri": str(tmp_path / "model"), "metadata": {"blessed": 1}}]}}}
    (tmp_path / "executor_output.json").write_text(json.dumps(written))

    artifacts, parameters = local_task.read_outputs(executor_input)

    assert artifacts["model"].type.schema_title == "tfx.Model"
    assert json_format.MessageToDict(artifacts["model"].metadata) == {"blessed": 1.0}
    assert parameters == {}


def test_final_status_is_the_struct_open_source_kfp_passes() -> None:
    value = local_task.final_status("tfx-dag", UpstreamState(state="FAILED", error="task T failed: exit code 1"), "r9")
    status = json_format.MessageToDict(value)
    assert status == {
        "state": "FAILED",
        "pipelineTaskName": "tfx-dag",
        "pipelineJobResourceName": "r9",
        "error": {"message": "task T failed: exit code 1"},
    }
    # What open-source KFP's driver marshals: a PipelineTaskFinalStatus.
    parsed = json_format.ParseDict(status, pipeline_spec_pb2.PipelineTaskFinalStatus())
    assert parsed.error.message == "task T failed: exit code 1"


# --- the notice: payload ---


@pytest.mark.parametrize(
    "value",
    [
        {
            "state": "FAILED",
            "pipelineJobResourceName": "run-1",
            "error": {"message": "task Trainer failed: exit code 1"},
        },
        '{"state": "FAILED", "pipeline_job_resource_name": "run-1", "error": {"message": "task Trainer failed"}}',
    ],
)
def test_final_status_as_struct_or_json_string(value: Any) -> None:
    status = parse_final_status(value)
    outcome = run_outcome(status, run_id="uuid-1")
    assert (outcome.status, outcome.failed_task, outcome.run_name, outcome.run_id) == (
        "failed",
        "Trainer",
        "run-1",
        "uuid-1",
    )


@pytest.mark.parametrize(
    ("value", "message"), [("{", "not JSON"), ("[1]", "not a JSON object"), ({"error": {}}, "has no state")]
)
def test_malformed_final_status(value: Any, message: str) -> None:
    with pytest.raises(FinalStatusError, match=message):
        parse_final_status(value)


@pytest.mark.parametrize(
    ("message", "task"),
    [
        ("task ImportExampleGen failed: exit code 1 (log: x)", "ImportExampleGen"),
        ("The DAG failed because some tasks failed. The failed tasks are: [Evaluator].", "Evaluator"),
        ("", None),
        ("pod was evicted", None),
    ],
)
def test_failed_task_from_the_error_message(message: str, task: str | None) -> None:
    assert failed_task(message) == task


def test_payload_of_a_pushed_run_is_slack_compatible() -> None:
    outcome = run_outcome(
        parse_final_status({"state": "SUCCEEDED"}),
        run_id="u1",
        run_name="nightly",
        blessed=True,
        pushed_version="1700000000",
        pushed_path="/s/1700000000",
    )
    payload = notice_payload("tfxp-digits", outcome)

    assert (
        payload["text"]
        == ":white_check_mark: tfxp-digits run nightly succeeded: model blessed; pushed version 1700000000"
    )
    assert {
        key: payload[key] for key in ("pipeline", "status", "state", "failed_task", "blessed", "pushed_version")
    } == {
        "pipeline": "tfxp-digits",
        "status": "succeeded",
        "state": "SUCCEEDED",
        "failed_task": None,
        "blessed": True,
        "pushed_version": "1700000000",
    }
    json.dumps(payload)  # plain JSON


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (
            {"state": "FAILED", "error": {"message": "task Trainer failed: exit code 1"}},
            ":x: tfxp-digits failed at Trainer",
        ),
        ({"state": "FAILED", "error": {}}, ":x: tfxp-digits failed"),
        ({"state": "FAILED", "error": {"message": "pod OOMKilled"}}, ":x: tfxp-digits failed: pod OOMKilled"),
        ({"state": "CANCELED"}, ":no_entry_sign: tfxp-digits cancelled"),
        ({"state": "PIPELINE_STATE_SUCCEEDED"}, ":white_check_mark: tfxp-digits succeeded"),
        ({"state": "RUNNING"}, ":grey_question: tfxp-digits unknown (state RUNNING)"),
    ],
)
def test_notice_text(status: dict[str, Any], text: str) -> None:
    assert notice_payload("tfxp-digits", run_outcome(parse_final_status(status)))["text"] == text


def test_this_runs_pushed_version_and_blessing() -> None:
    records = {
        "/s/100": {"identity": "/root/tfxp-digits/run-a/Trainer/model/Format-Serving", "version": 100},
        "/s/200": {"identity": "/root/tfxp-digits/run-b/Trainer/model/Format-Serving", "version": 200},
        "/s/300": {"source": "/root/tfxp-digits/run-b2/Trainer/model"},  # an older record's key
    }
    assert pushed_version_of(records, "run-a") == ("100", "/s/100")
    assert pushed_version_of(records, "run-b2") == ("300", "/s/300")
    assert pushed_version_of(records, "run") is None  # a whole path segment, not a prefix
    assert pushed_version_of(records, "") is None
    assert blessing_verdict(["/r/Evaluator/blessing/BLESSED"]) is True
    assert blessing_verdict(["/r/Evaluator/blessing/NOT_BLESSED"]) is False
    assert blessing_verdict([]) is None


# --- the notice: delivery to a local receiver ---


class Receiver:
    """A local HTTP endpoint that records what is posted and answers `status` after `delay` seconds."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.status = 200
        self.delay = 0.0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append({"content_type": self.headers["Content-Type"], "json": json.loads(body)})
                time.sleep(receiver.delay)
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    endpoint = Receiver()
    yield endpoint
    endpoint.close()


def test_the_notice_is_posted_as_json(receiver: Receiver) -> None:
    result = post_notice(receiver.url, {"text": "hi", "status": "failed"}, timeout=5)

    assert (result.delivered, result.status_code, result.error) == (True, 200, "")
    assert receiver.posts == [{"content_type": "application/json", "json": {"text": "hi", "status": "failed"}}]


def test_a_failing_receiver_is_reported_not_raised(receiver: Receiver) -> None:
    receiver.status = 500
    result = post_notice(receiver.url, {"text": "hi"}, timeout=5)
    assert (result.delivered, result.status_code) == (False, 500)
    assert result.error == f"{receiver.url} answered HTTP 500"


def test_a_slow_receiver_times_out(receiver: Receiver) -> None:
    receiver.delay = 2.0
    started = time.monotonic()
    result = post_notice(receiver.url, {"text": "hi"}, timeout=0.3)
    assert not result.delivered
    assert "could not be reached" in result.error
    assert time.monotonic() - started < 1.5


def test_an_unreachable_receiver_and_a_bad_url() -> None:
    refused = post_notice("http://127.0.0.1:9/hook", {"text": "hi"}, timeout=2)
    assert not refused.delivered and "could not be reached" in refused.error
    assert post_notice("ftp://example.com", {}).error == "'ftp://example.com' is not an http(s) URL"


# --- the exit handler component (TFX glue) ---


def test_run_notice_reports_blessing_and_this_runs_pushed_version(tmp_path: Path, receiver: Receiver) -> None:
    from google.protobuf import struct_pb2

    from components.notify.component import RunNotice

    blessing = tmp_path / "root" / "tfxp-digits" / "run-5" / "Evaluator" / "blessing"
    blessing.mkdir(parents=True)
    (blessing / "BLESSED").touch()
    for version, run in (("100", "run-4"), ("200", "run-5")):
        (tmp_path / "serving" / version).mkdir(parents=True)
        identity = f"{tmp_path}/root/tfxp-digits/{run}/Trainer/model/Format-Serving"
        (tmp_path / "serving" / version / "tfxp_push.json").write_text(
            json.dumps({"identity": identity, "version": int(version)})
        )
    # Open-source KFP hands the final status over as a struct, which TFX's entrypoint passes on as a Struct.
    status = json_format.ParseDict(
        {"state": "SUCCEEDED", "pipelineTaskName": "tfx-dag", "error": {}}, struct_pb2.Struct()
    )

    RunNotice.test_call(
        final_status=status,
        notify_url=receiver.url,
        pipeline_name="tfxp-digits",
        pipeline_root=str(tmp_path / "root"),
        serving_base=str(tmp_path / "serving"),
        run_id="run-5",
        run_name="nightly-5",
        timeout_seconds=5.0,
    )

    [post] = receiver.posts
    assert (
        post["json"]["text"]
        == ":white_check_mark: tfxp-digits run nightly-5 succeeded: model blessed; pushed version 200"
    )
    assert (post["json"]["blessed"], post["json"]["pushed_path"]) == (True, f"{tmp_path}/serving/200")


def test_run_notice_never_fails_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from components.notify.component import RunNotice

    RunNotice.test_call(
        final_status="not json",
        notify_url="http://127.0.0.1:9/hook",
        pipeline_name="tfxp-digits",
        pipeline_root=str(tmp_path / "missing"),
        serving_base=str(tmp_path / "missing"),
        run_id="r",
        run_name="",
        timeout_seconds=1.0,
    )
    assert "run notice NOT delivered (http://127.0.0.1:9/hook could not be reached" in caplog.text
    assert "grey_question: tfxp-digits run r unknown (state UNKNOWN)" in caplog.text


# --- e2e: the digits pipeline compiled, then run from its spec ---


def _compile_digits(tmp_path: Path, digits_dir: Path, notify_url: str) -> Path:
    spec = tmp_path / "pipeline.yaml"
    sets = [
        f"data.path={digits_dir}",
        f"pipeline.output={tmp_path / 'out'}",
        "edge.enabled=false",
        f"kubeflow.notify_url={notify_url}",
    ]
    result = CliRunner().invoke(app, ["compile", "--out", str(spec), *(arg for s in sets for arg in ("--set", s))])
    assert result.exit_code == 0, result.output
    return spec


@pytest.mark.e2e
def test_run_spec_trains_blesses_pushes_and_notifies(tmp_path: Path, digits_dir: Path, receiver: Receiver) -> None:
    spec = _compile_digits(tmp_path, digits_dir, receiver.url)
    root = tmp_path / "runs"

    started = time.monotonic()
    result = CliRunner().invoke(
        app, ["run-spec", str(spec), "--pipeline-root", str(root), "--param", 'train_args={"num_steps": 120}']
    )
    seconds = time.monotonic() - started

    assert result.exit_code == 0, result.output
    [run_dir] = (root / "tfxp-digits").iterdir()
    record = json.loads((run_dir / "run-spec.json").read_text())
    assert record["state"] == "SUCCEEDED"
    assert [task["name"] for task in record["tasks"]] == [
        "ImportExampleGen",
        "ServedBaseline",
        "StatisticsGen",
        "SchemaGen",
        "ExampleValidator",
        "Trainer",
        "Evaluator",
        "Pusher",
        "RunReport",
        "RunNotice",
    ]
    tasks = {task["name"]: task for task in record["tasks"]}
    assert tasks["Evaluator"]["outputs"]["blessing"]["metadata"]["blessed"] == 1.0
    # Nothing was served yet: the baseline task ran (KFP never caches it) and handed over an empty baseline.
    assert tasks["ServedBaseline"]["outputs"]["baseline_model"]["metadata"]["served_version"] == ""
    pushed = tasks["Pusher"]["outputs"]["pushed_model"]["metadata"]
    version_dir = Path(pushed["pushed_destination"])
    assert version_dir == tmp_path / "out" / "serving" / "digits" / pushed["pushed_version"]
    assert (version_dir / "saved_model.pb").is_file()
    # The run report: in the RunReport task's artifact, and beside the versions it reports on.
    report = tasks["RunReport"]["outputs"]["report"]
    page = (run_dir / "RunReport" / "report" / "report.html").read_text()
    assert f"Pushed version {pushed['pushed_version']}" in page
    published = version_dir.parent / "reports" / f"{pushed['pushed_version']}.html"
    assert report["metadata"]["published_path"] == str(published)
    assert published.read_text() == page
    assert report["metadata"]["problems"] == 0, page  # TFMA, statistics, anomalies and scalars were all read
    # The run parameter reached the Trainer: it trained 120 steps, not the config's 300.
    metrics = json.loads((run_dir / "Trainer" / "model" / "training_metrics.json").read_text())
    assert metrics["steps"] == 120
    assert metrics["final_accuracy"] >= 0.9
    assert f"pushed version {pushed['pushed_version']}" in result.output
    [post] = receiver.posts
    assert post["json"]["status"] == "succeeded"
    assert (post["json"]["blessed"], post["json"]["pushed_version"]) == (True, pushed["pushed_version"])
    assert post["json"]["run_id"] == run_dir.name
    print(f"run-spec of the digits pipeline: {seconds:.0f} s")

    # The same config on LocalDagRunner trains a model of the same accuracy (same code, data and seed).
    local = CliRunner().invoke(
        app,
        ["run", "--set", f"data.path={digits_dir}", "--set", "edge.enabled=false", "--set", "trainer.train_steps=120",
         "--output", str(tmp_path / "local")],
    )  # fmt: skip
    assert local.exit_code == 0, local.output
    [local_metrics] = (tmp_path / "local").glob("tfxp-digits/root/Trainer/model/*/training_metrics.json")
    local_accuracy = json.loads(local_metrics.read_text())["final_accuracy"]
    assert abs(local_accuracy - metrics["final_accuracy"]) <= 0.02, (local_accuracy, metrics["final_accuracy"])


@pytest.mark.e2e
def test_a_failed_run_spec_still_runs_the_exit_handler(tmp_path: Path, digits_dir: Path, receiver: Receiver) -> None:
    spec = _compile_digits(tmp_path, digits_dir, receiver.url)

    result = CliRunner().invoke(
        app, ["run-spec", str(spec), "--pipeline-root", str(tmp_path / "runs"), "--param", f"data_path={tmp_path}/none"]
    )

    assert result.exit_code == 1, result.output
    assert "task ImportExampleGen failed: exit code" in " ".join(result.output.split())
    [post] = receiver.posts
    assert (post["json"]["status"], post["json"]["failed_task"]) == ("failed", "ImportExampleGen")
    assert post["json"]["text"].startswith(":x: tfxp-digits run tfxp-digits-")
    assert post["json"]["text"].endswith(" failed at ImportExampleGen")
    assert post["json"]["pushed_version"] is None


def test_train_args_overrides_the_trainer_sections_steps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # What makes the `train_args` run parameter work: run_fn trains TFX's train_args.num_steps.
    import types

    from components.trainer import run_fn as module

    seen: list[Any] = []
    monkeypatch.setattr(module, "backup_dir_for", lambda *args: str(tmp_path / "backup"))
    monkeypatch.setattr(
        module,
        "train_and_export",
        lambda run, paths: seen.append(run) or {"final_accuracy": 1.0, "images_per_second": 1.0, "total_seconds": 1.0},
    )
    trainer = {"train_steps": 300, "warmup_steps": 30}
    fn_args = types.SimpleNamespace(
        train_steps=40,
        custom_config={"trainer": trainer, "labels_path": "labels.txt", "label_offset": 0, "warmup_requests": 0},
        train_files=[],
        eval_files=[],
        serving_model_dir=f"{tmp_path}/model/Format-Serving",
        model_run_dir=f"{tmp_path}/run/1",
    )

    module.run_fn(fn_args)
    module.run_fn(types.SimpleNamespace(**{**vars(fn_args), "train_steps": 300}))

    assert [run.trainer.train_steps for run in seen] == [40, 300]
    assert seen[0].trainer.warmup_steps == 30
