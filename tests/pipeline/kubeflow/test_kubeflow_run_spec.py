"""`tfxp run-spec` and the run notice: a compiled spec run task by task, the exit handler's payload and post.

Unit tests run hand-written specs whose tasks are tiny Python scripts (DAG order, nested DAG parameters,
artifacts with metadata, placeholders, the exit handler after a failure); the e2e tests compile the digits
pipeline and run it with `tfxp run-spec`.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from kfp_fake import ir_document, ir_task
from run_spec_e2e import Receiver, compile_digits, run_spec_record, task_states
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
from pipeline.kubeflow.compiler.params import ParamError
from pipeline.kubeflow.emulator import backend as backend_rules
from pipeline.kubeflow.emulator import launcher_io, local_task
from pipeline.kubeflow.emulator.backend import KFP, Backend
from pipeline.kubeflow.emulator.local_run import pipeline_arguments, run_spec
from pipeline.kubeflow.emulator.local_task import TaskContext, TaskInputError, UpstreamState
from pipeline.kubeflow.emulator.mlmd_cache import cache_fingerprint
from pipeline.kubeflow.emulator.spec_run import RunSpecError

# One script for every task of the hand-written specs, written as a KFP container component is: it reads and
# writes artifacts at the launcher's local paths (`LocalPathForURI` under the pod's `/`, TFXP_LAUNCHER_ROOT here)
# and records what it saw in $TOY_SEEN/<task>.json. argv = mode, task name, the ExecutorInput JSON.
TASK_SCRIPT = """
import json, os, sys
mode, name, executor_input = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
root = os.environ.get("TFXP_LAUNCHER_ROOT", "/")
def local(uri):
    for scheme in ("minio", "s3"):
        if uri.startswith(scheme + "://"):
            return os.path.join(root, scheme, uri[len(scheme) + 3:])
    return uri
params = executor_input["inputs"].get("parameterValues", {})
seen = {"params": params, "outputs": executor_input["outputs"]}
result = {"artifacts": {}}
if mode == "produce":
    uri = executor_input["outputs"]["artifacts"]["data"]["artifacts"][0]["uri"]
    os.makedirs(local(uri), exist_ok=True)
    text = params["message"] * params["count"]
    open(os.path.join(local(uri), "data.txt"), "w").write(text)
    result["artifacts"]["data"] = {"artifacts": [{"uri": uri, "metadata": {"length": len(text)}}]}
elif mode == "consume":
    if params.get("fail"):
        sys.exit(3)
    data = executor_input["inputs"]["artifacts"]["data"]["artifacts"][0]
    seen.update(text=open(os.path.join(local(data["uri"]), "data.txt")).read(), artifact=data)
os.makedirs(os.environ["TOY_SEEN"], exist_ok=True)
json.dump(seen, open(os.path.join(os.environ["TOY_SEEN"], name + ".json"), "w"))
os.makedirs(os.path.dirname(executor_input["outputs"]["outputFile"]), exist_ok=True)
json.dump(result, open(executor_input["outputs"]["outputFile"], "w"))
"""


def _container(mode: str) -> dict[str, Any]:
    command = ["python", "-c", TASK_SCRIPT]
    return {"container": {"image": "unused:1", "command": command, "args": [mode, "{{$.pipeline_task_name}}", "{{$}}"]}}


def _param(kind: str) -> dict[str, Any]:
    return {"parameterType": kind}


def _artifact() -> dict[str, Any]:
    return {"artifactType": {"schemaTitle": "system.Artifact", "schemaVersion": "0.0.1"}}


def _spec(with_exit_handler: bool = True) -> dict[str, Any]:
    """produce → consume inside the DAG component `tfx-dag`, and an exit handler `notify`, as TFX compiles them."""
    tasks = {
        "produce": ir_task(
            "produce",
            cachingOptions={"enableCache": True},
            inputs={
                "parameters": {
                    "message": {"componentInputParameter": "message"},
                    "count": {"componentInputParameter": "count"},
                }
            },
        ),
        "consume": ir_task(
            "consume",
            dependentTasks=["produce"],
            inputs={
                "artifacts": {"data": {"taskOutputArtifact": {"producerTask": "produce", "outputArtifactKey": "data"}}},
                "parameters": {
                    "count": {"componentInputParameter": "count"},
                    "fail": {"componentInputParameter": "fail"},
                },
            },
        ),
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
                "tfx-dag": ir_task("tfx-dag", inputs={"parameters": passed}),
                "notify": ir_task(
                    "notify",
                    dependentTasks=["tfx-dag"],
                    triggerPolicy={"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"},
                    inputs={
                        "parameters": {
                            "final_status": {"taskFinalStatus": {"producerTask": "tfx-dag"}},
                            "run_id": {"runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}},
                        }
                    },
                ),
            }
        }
    else:
        root["dag"] = {"tasks": tasks}
    return ir_document("toy", components, executors, root)


def _write(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture
def toy_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    seen = tmp_path / "seen"
    monkeypatch.setenv("TOY_SEEN", str(seen))
    return seen


def _seen(seen: Path, task: str) -> dict[str, Any]:
    return json.loads((seen / f"{task}.json").read_text())


def _run(tmp_path: Path, spec: dict[str, Any], params: dict[str, str] | None = None, **options: Any) -> Any:
    return run_spec(_write(tmp_path, spec), params or {}, state_dir=tmp_path / "state", **options)


def test_a_pod_folder_the_user_keeps_in_state_is_refused_not_emptied(tmp_path: Path, toy_seen: Path) -> None:
    kept = tmp_path / "state" / "pod" / "notes.txt"
    kept.parent.mkdir(parents=True)
    kept.write_text("mine")
    spec = _write(tmp_path, _spec())

    result = CliRunner().invoke(app, ["run-spec", str(spec), "--state", str(tmp_path / "state")])

    assert result.exit_code == 2, result.output
    assert "the pod folder of --state" in result.output and "holds files tfxp did not write" in result.output
    assert "Traceback" not in result.output and not toy_seen.exists()  # refused before the first task
    assert kept.read_text() == "mine"
    kept.unlink()  # emptied by the user: the run goes on, and removes the pod folder it made
    assert _run(tmp_path, _spec()).state == "SUCCEEDED"
    assert not kept.parent.exists()


def test_run_spec_prints_task_names_and_paths_literally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Names, errors and paths are user text: parsed as Rich markup, `[bold]` would vanish from the lines.
    from pipeline.kubeflow.emulator import local_run
    from pipeline.kubeflow.emulator.spec_run import SpecRun, TaskRun

    state = tmp_path / "[bold]state"

    def fake_run_spec(package: Path, params: dict[str, str], *, on_task: Any, **options: Any) -> SpecRun:
        task = TaskRun("[bold]train", "SUCCEEDED", 1.0, outputs={"model": {"metadata": {"pushed_version": "7"}}})
        task.outputs["model"]["metadata"]["pushed_destination"] = f"{state}/serving/7"
        on_task(task)
        return SpecRun("p", "id-1", "r", "kfp", "root", f"{state}/run", str(state), tasks=[task])

    monkeypatch.setattr(local_run, "run_spec", fake_run_spec)
    spec = _write(tmp_path, _spec())

    result = CliRunner().invoke(app, ["run-spec", str(spec), "--state", str(state)])

    assert result.exit_code == 0, result.output
    assert "[bold]train succeeded 1.0s" in result.output
    assert f"artifacts: {state}/run;" in result.output
    assert f"pushed version 7: {state}/serving/7" in result.output


# --- the DAG walk on hand-written specs, on the emulated open-source backend ---


def test_tasks_run_as_the_open_source_backend_runs_them(tmp_path: Path, toy_seen: Path) -> None:
    seen: list[str] = []
    run = _run(tmp_path, _spec(), {"count": "3"}, on_task=lambda t: seen.append(t.name), run_id="r1")

    assert run.state == "SUCCEEDED"
    assert seen == ["produce", "consume", "notify"]
    # The run's root: <root>/<pipeline>/<run id> (metadata/client.go:420), the default root MinIO's.
    assert run.run_dir == "minio://mlpipeline/v2/artifacts/toy/r1"
    consume = _seen(toy_seen, "consume")
    # Parameters reach the nested DAG typed; the artifact arrives through the object store into consume's own pod.
    assert consume["text"] == "ababab" and consume["params"]["count"] == 3
    # As the driver rebuilds an upstream artifact from MLMD: named by its id, no type, the launcher's properties.
    artifact = consume["artifact"]
    assert artifact["name"].isdigit() and artifact["type"] == {"instanceSchema": ""}
    assert artifact["metadata"]["length"] == 6 and artifact["metadata"]["display_name"] == "data"
    assert json.loads(artifact["metadata"]["store_session_info"])["Provider"] == "minio"
    # Outputs as provisionOutputs makes them: <task>/<uuid>/<key>, name = key, executor-logs, a local output file.
    produced = _seen(toy_seen, "produce")["outputs"]
    data_uri = produced["artifacts"]["data"]["artifacts"][0]["uri"]
    assert re.fullmatch(r"minio://mlpipeline/v2/artifacts/toy/r1/produce/[0-9a-f]{12}/data", data_uri)
    assert produced["artifacts"]["executor-logs"]["artifacts"][0]["type"] == {"schemaTitle": "system.Artifact"}
    assert produced["outputFile"].endswith(
        data_uri.removeprefix("minio://").rsplit("/", 1)[0] + "/output_metadata.json"
    )
    store = tmp_path / "state" / "object-store" / "minio" / data_uri.removeprefix("minio://")
    assert (store / "data.txt").read_text() == "ababab"
    assert (store.parent / "executor-logs").is_file()  # the launcher uploads the task's log
    assert not (tmp_path / "state" / "pod").exists()  # a pod is gone after its task
    assert run.task("produce").outputs["data"]["uri"] == data_uri
    assert run.task("produce").cache_requested and not run.task("consume").cache_requested
    # The exit handler's final status: MLMD's state of the DAG and an empty error (driver/resolve.go:471-477).
    notified = _seen(toy_seen, "notify")["params"]
    assert notified["final_status"] == {
        "state": "COMPLETE",
        "pipelineTaskName": "tfx-dag",
        "pipelineJobResourceName": run.run_name,
        "error": {},
    }
    assert notified["run_id"] == "r1"  # KFP's {{$.pipeline_job_uuid}}, resolved by the driver
    record = json.loads((tmp_path / "state" / "runs" / "r1.json").read_text())
    assert record["state"] == "SUCCEEDED"
    assert record["parameters"] == {"message": "ab", "count": 3.0, "fail": False}


def test_a_second_run_is_served_from_kfps_cache_by_kfps_key(tmp_path: Path, toy_seen: Path) -> None:
    first = _run(tmp_path, _spec(), run_id="r1")
    second = _run(tmp_path, _spec(), run_id="r2")

    assert [(t.name, t.state) for t in second.tasks] == [
        ("produce", "CACHED"),
        ("consume", "SUCCEEDED"),  # no cachingOptions: it always runs
        ("notify", "SUCCEEDED"),
    ]
    assert second.task("produce").cached_from == "r1"
    # The cached execution's artifact: the same MLMD id, the first run's URI.
    assert second.task("produce").outputs["data"] == first.task("produce").outputs["data"]
    assert _seen(toy_seen, "consume")["artifact"]["uri"].startswith("minio://mlpipeline/v2/artifacts/toy/r1/")
    # A new input parameter value is a new key; --no-cache runs everything.
    assert _run(tmp_path, _spec(), {"count": "4"}, run_id="r3").task("produce").state == "SUCCEEDED"
    assert _run(tmp_path, _spec(), run_id="r4", cache=False).task("produce").state == "SUCCEEDED"


def test_a_failed_task_skips_the_rest_and_the_exit_handler_hears_it(tmp_path: Path, toy_seen: Path) -> None:
    run = _run(tmp_path, _spec(), {"fail": "true"}, run_id="r2")

    assert run.state == "FAILED"
    assert [(t.name, t.state) for t in run.tasks] == [
        ("produce", "SUCCEEDED"),
        ("consume", "FAILED"),
        ("notify", "SUCCEEDED"),
    ]
    consume = run.task("consume")
    assert consume.error.startswith("task consume failed: exit code 3")
    assert list(consume.outputs) == ["executor-logs"]  # a failed task records only its logs
    status = _seen(toy_seen, "notify")["params"]["final_status"]
    # Open-source KFP names neither the failed task nor the error (resolve.go:475: "TODO: Implement fields").
    assert (status["state"], status["error"]) == ("FAILED", {})


def test_vertex_builds_typed_inputs_named_by_resource(tmp_path: Path, toy_seen: Path) -> None:
    first = _run(tmp_path, _spec(), run_id="v1", backend="vertex")
    consume = _seen(toy_seen, "consume")["artifact"]
    assert consume["name"].startswith("projects/123456789/locations/us-central1/metadataStores/default/artifacts/")
    assert consume["type"] == {"schemaTitle": "system.Artifact", "schemaVersion": "0.0.1"}
    assert consume["uri"].startswith(str((tmp_path / "state" / "vertex-root").resolve()))
    assert "executor-logs" not in _seen(toy_seen, "produce")["outputs"]["artifacts"]
    assert _seen(toy_seen, "notify")["params"]["final_status"]["state"] == "SUCCEEDED"
    assert first.state == "SUCCEEDED"

    second = _run(tmp_path, _spec(), {"fail": "true"}, run_id="v2", backend="vertex")

    assert second.task("produce").state == "SUCCEEDED"  # Vertex's cache is not emulated
    status = _seen(toy_seen, "notify")["params"]["final_status"]
    assert (status["state"], failed_task(status["error"]["message"])) == ("FAILED", "consume")


def test_executor_logs_follow_publish_logs(tmp_path: Path, toy_seen: Path) -> None:
    _run(tmp_path, _spec(with_exit_handler=False), publish_logs=False)
    assert list(_seen(toy_seen, "produce")["outputs"]["artifacts"]) == ["data"]


@pytest.mark.parametrize(
    ("backend", "root", "message"),
    [
        ("kfp", "/tmp/runs", r"with --backend kfp the root is an object-store URI"),
        ("kfp", "gs://bucket/root", r"gs:// needs a real bucket"),
        ("vertex", "minio://b/r", r"with --backend vertex the root is a local folder"),
    ],
)
def test_roots_the_backend_cannot_hold_are_refused(tmp_path: Path, backend: str, root: str, message: str) -> None:
    with pytest.raises(RunSpecError, match=message):
        _run(tmp_path, _spec(), backend=backend, pipeline_root=root)


@pytest.mark.parametrize(
    "root",
    ["minio:///tmp/escape", "minio://my bucket/x", "minio://mlpipeline/../../etc", "s3://b/./x/y", "minio://ab/x"],
)
def test_roots_kfp_would_not_accept_never_write_outside_the_state(tmp_path: Path, root: str) -> None:
    with pytest.raises(RunSpecError, match="not an object-store URI KFP accepts"):
        _run(tmp_path, _spec(), pipeline_root=root)
    assert not (tmp_path / "state" / "object-store").exists()


def test_a_query_string_stays_on_the_runs_root(tmp_path: Path, toy_seen: Path) -> None:
    # metadata/client.go:420 keeps it on the run's root; driver.go:767 drops it for the tasks' folders.
    run = _run(tmp_path, _spec(with_exit_handler=False), pipeline_root="s3://bucket/x?region=us-east-1", run_id="q1")
    assert run.state == "SUCCEEDED" and run.pipeline_root == "s3://bucket/x?region=us-east-1"
    uri = run.task("produce").outputs["data"]["uri"]
    assert re.fullmatch(r"s3://bucket/x/toy/q1/produce/[0-9a-f]{12}/data", uri)


def test_a_corrupt_store_is_one_message_and_saves_are_atomic(tmp_path: Path, toy_seen: Path) -> None:
    _run(tmp_path, _spec(with_exit_handler=False), run_id="c1")
    store = tmp_path / "state" / "mlmd.json"
    assert json.loads(store.read_text())["cache"] and not list(store.parent.glob(".mlmd.json*"))
    store.write_text(store.read_text()[:200])  # what a crash mid-write would have left without the rename
    with pytest.raises(RunSpecError, match=r"MLMD and cache store .*mlmd\.json is not JSON"):
        _run(tmp_path, _spec(with_exit_handler=False))
    store.write_text('{"artifacts": {}}')
    with pytest.raises(RunSpecError, match=r"\(executions: Field required\); move it away"):
        _run(tmp_path, _spec(with_exit_handler=False))


_STORE = {"artifacts": {}, "executions": {}, "cache": {}, "next_id": 1}


@pytest.mark.parametrize(
    ("store", "field"),
    [
        ({**_STORE, "cache": [], "next_id": "abc"}, "cache: Input should be a valid dictionary"),  # a ValueError before
        ({**_STORE, "next_id": "abc"}, "next_id: Input should be a valid integer"),
        ({**_STORE, "next_id": 1e999}, "next_id: Input should be a valid integer"),
        ({**_STORE, "next_id": 10**4000}, "next_id: Input should be less than or equal to"),  # int64 ids
        ({**_STORE, "cache": {"pipeline/toy/ab": 7}}, "cache entry pipeline/toy/ab names execution 7"),
        ({**_STORE, "artifacts": {"1": {"uri": 3}}}, "artifacts.1.uri: Input should be a valid string"),
    ],
    ids=["keys-of-other-types", "text-id", "infinite-id", "huge-id", "cache-without-execution", "artifact-uri-number"],
)
def test_a_store_of_other_types_is_one_message_naming_the_field(tmp_path: Path, store: Any, field: str) -> None:
    spec = _write(tmp_path, _spec(with_exit_handler=False))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "mlmd.json").write_text(json.dumps(store))
    result = CliRunner().invoke(app, ["run-spec", str(spec), "--state", str(tmp_path / "state")])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"state/mlmd.json is not a record as tfxp writes one ({field}" in text and "move it away" in text
    assert "Traceback" not in result.output


def test_an_unwritable_state_is_one_message(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunSpecError, match=r"--state .*file/state: cannot write there"):
        run_spec(_write(tmp_path, _spec()), {}, state_dir=tmp_path / "file" / "state")


def test_without_an_exit_handler_later_tasks_are_skipped(tmp_path: Path, toy_seen: Path) -> None:
    spec = _spec(with_exit_handler=False)
    spec["components"]["produce"]["executorLabel"] = "exec-consume"  # produce now fails: it has no input artifact
    run = _run(tmp_path, spec, run_id="r3")

    assert [(t.name, t.state) for t in run.tasks] == [("produce", "FAILED"), ("consume", "SKIPPED")]
    assert run.task("consume").error == "upstream produce did not succeed"


def test_a_failure_lets_its_wave_finish_and_starts_no_new_wave(tmp_path: Path, toy_seen: Path) -> None:
    # As on KFP: tasks ready together run together; after a failure, nothing new starts.
    spec = _spec(with_exit_handler=False)
    tasks = spec["root"]["dag"]["tasks"]
    tasks["consume2"] = json.loads(json.dumps(tasks["consume"]).replace('"fail"}', '"never"}'))
    # KFP's driver refuses an input its DAG does not declare (backend/src/v2/driver/resolve.go:396).
    spec["root"]["inputDefinitions"]["parameters"]["never"] = {"parameterType": "BOOLEAN", "defaultValue": False}
    tasks["late"] = {**json.loads(json.dumps(tasks["consume2"])), "dependentTasks": ["consume2", "produce"]}
    run = _run(tmp_path, spec, {"fail": "true"}, run_id="r4")

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
        _run(tmp_path, _spec(), params)
    assert not (tmp_path / "state").exists()


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
        _run(tmp_path, spec)

    spec = _spec(with_exit_handler=False)
    spec["root"]["dag"]["tasks"]["consume"]["triggerPolicy"] = {"condition": "inputs.parameter_values['fail'] == true"}
    with pytest.raises(RunSpecError, match=r"task consume has a condition or a loop"):
        _run(tmp_path, spec)


# --- one task at a time: inputs, placeholders, outputs, cache key, final status ---


def _context() -> TaskContext:
    return TaskContext(
        name="consume",
        run_id="run-7",
        pipeline_root="minio://mlpipeline/v2/artifacts",
        task_dir="minio://mlpipeline/v2/artifacts/toy/run-7/consume/abc",
        run_name="toy-run-7",
    )


def _task_and_component() -> tuple[pipeline_spec_pb2.PipelineTaskSpec, pipeline_spec_pb2.ComponentSpec]:
    spec = json_format.ParseDict(_spec(with_exit_handler=False), pipeline_spec_pb2.PipelineSpec())
    return spec.root.dag.tasks["consume"], spec.components["consume"]


def _no_status(producer: str, upstream: UpstreamState) -> Any:
    raise AssertionError("no final status here")


def test_a_missing_upstream_output_names_the_producer() -> None:
    task, _ = _task_and_component()
    upstream = {"produce": UpstreamState(state="SUCCEEDED", artifacts={})}
    with pytest.raises(TaskInputError, match=r"input artifact data: task produce left no output artifact data"):
        local_task.build_inputs(
            task, _context(), {}, upstream, lambda i: pipeline_spec_pb2.RuntimeArtifact(), _no_status
        )


def test_placeholders_are_resolved_as_kfp_does(tmp_path: Path) -> None:
    task, component = _task_and_component()
    component.input_definitions.parameters["label"].parameter_type = pipeline_spec_pb2.ParameterType.STRING
    component.output_definitions.artifacts["report"].artifact_type.schema_title = "system.Artifact"
    upstream = {"produce": UpstreamState(state="SUCCEEDED", artifacts={"data": 7})}
    scope = {"count": local_task.python_value(2)}
    task.inputs.parameters["label"].runtime_value.constant.string_value = "{{$.pipeline_job_uuid}}"
    inputs = local_task.build_inputs(
        task, _context(), scope, upstream, lambda i: pipeline_spec_pb2.RuntimeArtifact(uri=f"minio://b/{i}"), _no_status
    )
    backend = Backend(kind=KFP, state_dir=tmp_path)
    outputs = backend_rules.provision_outputs(backend, component, _context().task_dir, str(tmp_path / "pod"))
    executor_input = pipeline_spec_pb2.ExecutorInput(inputs=inputs, outputs=outputs)

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
        _context(),
    )

    assert command[0] == sys.executable
    assert command[1:4] == ["--in=minio://b/7", "2", f"{_context().task_dir}/report"]
    resolved = json.loads(command[4])
    # The driver replaces a whole-value run placeholder (resolve.go:436-450); NUMBER_INTEGER stays an integer.
    assert resolved["inputs"]["parameterValues"] == {"count": 2, "label": "run-7"}
    assert (
        resolved["outputs"]["outputFile"]
        == f"{tmp_path}/pod/minio/mlpipeline/v2/artifacts/toy/run-7/consume/abc/output_metadata.json"
    )


def test_uploaded_outputs_keep_the_declared_type_and_take_the_executors_uri_and_metadata(tmp_path: Path) -> None:
    backend = Backend(kind=KFP, state_dir=tmp_path / "state")
    executor_input = pipeline_spec_pb2.ExecutorInput()
    declared = executor_input.outputs.artifacts["model"].artifacts.add(name="model", uri="minio://b/t/model")
    declared.type.instance_schema = "title: tfx.Model\n"
    written = pipeline_spec_pb2.ExecutorOutput()
    written.artifacts["model"].artifacts.add(uri="minio://b/t/model").metadata.update({"blessed": 1})
    (tmp_path / "pod" / "minio" / "b" / "t" / "model").mkdir(parents=True)
    (tmp_path / "pod" / "minio" / "b" / "t" / "model" / "saved_model.pb").write_text("x")

    recorded = launcher_io.upload_outputs(backend, executor_input, written, str(tmp_path / "pod"), succeeded=True)

    assert recorded["model"].type.instance_schema == "title: tfx.Model\n"
    assert json_format.MessageToDict(recorded["model"].metadata) == {"blessed": 1.0}
    assert (backend.store_path("minio://b/t/model") / "saved_model.pb").read_text() == "x"


def test_an_executor_output_naming_a_local_path_is_not_uploaded(tmp_path: Path) -> None:
    # What the launcher does when an executor hands back its local path instead of the URI (the bug the
    # entrypoint's restore_output_uris prevents): "does not have a recognized storage URI", nothing uploaded.
    backend = Backend(kind=KFP, state_dir=tmp_path / "state")
    executor_input = pipeline_spec_pb2.ExecutorInput()
    executor_input.outputs.artifacts["model"].artifacts.add(name="model", uri="minio://b/t/model")
    local = tmp_path / "pod" / "minio" / "b" / "t" / "model"
    local.mkdir(parents=True)
    (local / "saved_model.pb").write_text("x")
    written = pipeline_spec_pb2.ExecutorOutput()
    written.artifacts["model"].artifacts.add(uri=str(local))

    recorded = launcher_io.upload_outputs(backend, executor_input, written, str(tmp_path / "pod"), succeeded=True)

    assert recorded["model"].uri == str(local)
    assert not backend.store_path("minio://b/t/model").exists()


def test_the_cache_key_is_kfps(tmp_path: Path) -> None:
    task, component = _task_and_component()
    container = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec(image="img:1", command=["python"])
    backend = Backend(kind=KFP, state_dir=tmp_path)

    def key(artifact_id: int, count: int, task_dir: str, image: str = "img:1") -> str:
        inputs = local_task.build_inputs(
            task, _context(), {"count": local_task.python_value(count)},
            {"produce": UpstreamState(state="SUCCEEDED", artifacts={"data": artifact_id})},
            lambda i: pipeline_spec_pb2.RuntimeArtifact(name=str(i), uri=f"minio://b/{i}"), _no_status,
        )  # fmt: skip
        outputs = backend_rules.provision_outputs(backend, component, task_dir, "/pod")
        container.image = image
        return cache_fingerprint(pipeline_spec_pb2.ExecutorInput(inputs=inputs, outputs=outputs),
                                               component, container)  # fmt: skip

    base = key(7, 2, "minio://r/run-1/consume/aaa")
    assert key(7, 2, "minio://r/run-2/consume/bbb") == base  # output URIs are wiped (cache.go:201-210)
    assert key(8, 2, "minio://r/run-1/consume/aaa") != base  # another upstream artifact id
    assert key(7, 3, "minio://r/run-1/consume/aaa") != base  # another parameter value
    assert key(7, 2, "minio://r/run-1/consume/aaa", image="img:2") != base


def test_final_status_is_the_struct_open_source_kfp_passes() -> None:
    value = backend_rules.final_status(KFP, "FAILED", "toy-abcde", "consume")
    status = json_format.MessageToDict(value)
    assert status == {
        "state": "FAILED",
        "pipelineTaskName": "tfx-dag",
        "pipelineJobResourceName": "toy-abcde",
        "error": {},
    }
    # What open-source KFP's driver marshals: a PipelineTaskFinalStatus.
    parsed = json_format.ParseDict(status, pipeline_spec_pb2.PipelineTaskFinalStatus())
    assert parsed.state == "FAILED"
    assert json_format.MessageToDict(backend_rules.final_status(KFP, "SUCCEEDED", "toy-abcde"))["state"] == "COMPLETE"
    vertex = json_format.MessageToDict(backend_rules.final_status("vertex", "FAILED", "toy-1", "Trainer"))
    assert failed_task(vertex["error"]["message"]) == "Trainer"


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
        (
            {"state": "FAILED", "error": {}},
            ":x: tfxp-digits failed: the orchestrator does not say which task failed: "
            "see the run's graph and task logs",
        ),
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
        # The identity is the model's content now; the record names the SavedModel's path beside it.
        "/s/400": {"identity": "model:abc", "saved_model": "/root/tfxp-digits/run-d/Trainer/model", "version": 400},
    }
    assert pushed_version_of(records, "run-d") == ("400", "/s/400")
    assert pushed_version_of(records, "run-a") == ("100", "/s/100")
    assert pushed_version_of(records, "run-b2") == ("300", "/s/300")
    assert pushed_version_of(records, "run") is None  # a whole path segment, not a prefix
    assert pushed_version_of(records, "") is None
    assert blessing_verdict(["/r/Evaluator/blessing/BLESSED"]) is True
    assert blessing_verdict(["/r/Evaluator/blessing/NOT_BLESSED"]) is False
    assert blessing_verdict([]) is None


# --- the notice: delivery to a local receiver ---


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


def _notify(tmp_path: Path, **arguments: Any) -> None:
    """Calls RunNotice's function as the exit task does: pipeline tfxp-digits, its root and serving under tmp_path."""
    from components.notify.component import RunNotice

    defaults = {
        "pipeline_name": "tfxp-digits",
        "pipeline_root": str(tmp_path / "root"),
        "serving_base": str(tmp_path / "serving"),
        "run_id": "r1",
        "run_name": "",
        "timeout_seconds": 5.0,
    }
    RunNotice.test_call(**{**defaults, **arguments})


def test_run_notice_reports_blessing_and_this_runs_pushed_version(tmp_path: Path, receiver: Receiver) -> None:
    from google.protobuf import struct_pb2

    blessing = tmp_path / "root" / "tfxp-digits" / "run-5" / "Evaluator" / "blessing"
    blessing.mkdir(parents=True)
    (blessing / "BLESSED").touch()
    for version, run in (("100", "run-4"), ("200", "run-5")):
        (tmp_path / "serving" / version).mkdir(parents=True)
        (tmp_path / "serving" / version / "saved_model.pb").write_bytes(b"pb")  # a complete version
        identity = f"{tmp_path}/root/tfxp-digits/{run}/Trainer/model/Format-Serving"
        (tmp_path / "serving" / version / "tfxp_push.json").write_text(
            json.dumps({"identity": identity, "version": int(version)})
        )
    # Open-source KFP hands the final status over as a struct, which TFX's entrypoint passes on as a Struct.
    status = json_format.ParseDict(
        {"state": "SUCCEEDED", "pipelineTaskName": "tfx-dag", "error": {}}, struct_pb2.Struct()
    )

    _notify(tmp_path, final_status=status, notify_url=receiver.url, run_id="run-5", run_name="nightly-5")

    [post] = receiver.posts
    assert (
        post["json"]["text"]
        == ":white_check_mark: tfxp-digits run nightly-5 succeeded: model blessed; pushed version 200"
    )
    assert (post["json"]["blessed"], post["json"]["pushed_path"]) == (True, f"{tmp_path}/serving/200")


def test_a_corrupt_run_record_is_said_in_the_notice(tmp_path: Path, receiver: Receiver) -> None:
    (tmp_path / "serving" / "runs").mkdir(parents=True)
    (tmp_path / "serving" / "runs" / "r1.json").write_text('{"run_id": "r1", "deci')
    _notify(
        tmp_path,
        final_status='{"state": "COMPLETE"}',
        notify_url=receiver.url,
        pipeline_root="minio://mlpipeline/v2/artifacts",  # the launcher's: never opened by the notice
    )
    [post] = receiver.posts
    assert post["json"]["status"] == "succeeded"
    assert post["json"]["decision"].startswith(f"run record {tmp_path}/serving/runs/r1.json unreadable (")
    assert "unreadable" in post["json"]["text"]


def test_run_notice_finds_a_drift_stops_record_under_the_vertex_job_name(tmp_path: Path, receiver: Receiver) -> None:
    from components.notify.run_record import RunRecord, write_run_record

    # Vertex AI: the run's folder (and the stop's record) is named after the job, not the run's uuid.
    stop = "stopped by the drift check: span 4, feature 'label' (drift against spans 1,2,3): L-infinity 0.3"
    records = str(tmp_path / "serving" / "runs")
    write_run_record(records, RunRecord.stopped("tfxp-digits-2026", "ExampleValidator", stop))
    message = "The DAG failed because some tasks failed. The failed tasks are: [ExampleValidator]."
    _notify(
        tmp_path,
        final_status=json.dumps({"state": "FAILED", "error": {"code": 9, "message": message}}),
        notify_url=receiver.url,
        run_id="0b6c-uuid",
        run_name="tfxp-digits-2026",
    )
    [post] = receiver.posts
    assert post["json"]["text"] == f":x: tfxp-digits run tfxp-digits-2026 failed at ExampleValidator: {stop}"
    assert post["json"]["decision"] == stop


def test_run_notice_never_fails_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _notify(
        tmp_path / "missing",  # neither a pipeline root nor a serving base
        final_status="not json",
        notify_url="http://127.0.0.1:9/hook",
        run_id="r",
        timeout_seconds=1.0,
    )
    assert "run notice NOT delivered (http://127.0.0.1:9/hook could not be reached" in caplog.text
    assert "grey_question: tfxp-digits run r unknown (state UNKNOWN)" in caplog.text


# --- e2e: the digits pipeline compiled, then run from its spec on the emulated backends (the four nights on
# open-source KFP: test_kubeflow_nightly_e2e.py) ---


@pytest.mark.e2e(seconds=150)  # a run-spec run and a LocalDagRunner run
def test_run_spec_on_vertex_matches_local_training(tmp_path: Path, digits_dir: Path, receiver: Receiver) -> None:
    # Op determinism and a fixed input order on both sides: without them 60 steps of CPU training depend on the
    # thread schedule, and CI saw the two runs 0.056 apart with another test process beside it.
    spec = compile_digits(tmp_path, digits_dir, receiver.url, "trainer.deterministic=true")

    record, _, seconds = run_spec_record(spec, tmp_path / "state", "--backend", "vertex")

    assert record["state"] == "SUCCEEDED" and set(task_states(record).values()) == {"SUCCEEDED"}
    tasks = {task["name"]: task for task in record["tasks"]}
    metrics = json.loads((Path(tasks["Trainer"]["outputs"]["model"]["uri"]) / "training_metrics.json").read_text())
    [post] = receiver.posts
    outcome = (post["json"]["status"], post["json"]["state"], post["json"]["blessed"])
    assert outcome == ("succeeded", "SUCCEEDED", True), (post["json"].get("decision"), metrics["final_accuracy"])
    assert post["json"]["pushed_version"] == tasks["Pusher"]["outputs"]["pushed_model"]["metadata"]["pushed_version"]
    print(f"run-spec --backend vertex, digits: {seconds:.0f} s")

    # The same config on LocalDagRunner trains a model of the same accuracy (same code, data and seed).
    local = CliRunner().invoke(
        app,
        ["run", "--set", f"data.path={digits_dir}", "--set", "edge.enabled=false", "--set", "trainer.train_steps=60",
         "--set", "trainer.deterministic=true", "--output", str(tmp_path / "local")],
    )  # fmt: skip
    assert local.exit_code == 0, local.output
    [local_metrics] = (tmp_path / "local").glob("tfxp-digits/root/Trainer/model/*/training_metrics.json")
    local_accuracy = json.loads(local_metrics.read_text())["final_accuracy"]
    assert abs(local_accuracy - metrics["final_accuracy"]) <= 0.005, (local_accuracy, metrics["final_accuracy"])


@pytest.mark.e2e
def test_a_failed_run_spec_still_runs_the_exit_handler(tmp_path: Path, digits_dir: Path, receiver: Receiver) -> None:
    spec = compile_digits(tmp_path, digits_dir, receiver.url)

    result = CliRunner().invoke(
        app, ["run-spec", str(spec), "--state", str(tmp_path / "state"), "--param", f"data_path={tmp_path}/none"]
    )

    assert result.exit_code == 1, result.output
    assert "task InputFingerprint failed: exit code" in " ".join(result.output.split())
    [post] = receiver.posts
    # Open-source KFP's final status names no task and no error (driver/resolve.go:475).
    assert (post["json"]["status"], post["json"]["state"], post["json"]["failed_task"]) == ("failed", "FAILED", None)
    assert post["json"]["text"].startswith(":x: tfxp-digits run tfxp-digits-")
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
    trainer = {"train_steps": 300, "schedule": {"warmup_steps": 30}}
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
    assert seen[0].trainer.schedule.warmup_steps == 30
