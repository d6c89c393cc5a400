"""`tfxp pipeline`, `tfxp schedule`, `tfxp runs` and `tfxp submit --param/--no-cache`: the exact requests
kfp.Client sends to a local fake of the KFP v2beta1 API (tests/support/kfp_fake.py), and the error paths (unknown
pipeline, duplicate version, bad input before any request, refused credentials, unreachable or silent host).
The pure parsing behind them is tested in test_kubeflow_ops_parsing.py."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import yaml
from kfp_fake import API, FakeKfp, closed_port, spec_dict
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.kubeflow.client.auth import TOKEN_ENV
from pipeline.kubeflow.client.pipelines import default_version_name, spec_digest
from pipeline.kubeflow.compiler.spec import load_pipeline_doc

PARAMETERS = {
    "train_steps": {"parameterType": "NUMBER_INTEGER", "defaultValue": 300},
    "min_accuracy": {"parameterType": "NUMBER_DOUBLE", "defaultValue": 0.8},
    "data_path": {"parameterType": "STRING", "defaultValue": "gs://bucket/digits"},
    "warm_start": {"parameterType": "BOOLEAN", "defaultValue": False},
}


pytestmark = pytest.mark.usefixtures("no_kfp_credentials")


@pytest.fixture
def package(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(spec_dict(["ImportExampleGen", "Trainer", "Pusher"], PARAMETERS)))
    return path


class _Result:
    """A CLI result with its output as one line (rich wraps long messages at the terminal's width)."""

    def __init__(self, exit_code: int, output: str) -> None:
        self.exit_code = exit_code
        self.output = " ".join(output.split())


def _invoke(*args: str, env: dict[str, str] | None = None) -> _Result:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250", **(env or {})})
    return _Result(result.exit_code, result.output)


# --- tfxp pipeline ------------------------------------------------------------------------------------------


def test_upload_creates_the_pipeline_with_a_content_named_version(fake: FakeKfp, host: str, package: Path) -> None:
    result = _invoke("pipeline", "upload", str(package), "--host", host)

    assert result.exit_code == 0, result.output
    version = default_version_name(load_pipeline_doc(package))
    assert f"uploaded pipeline tfxp-test (new pipeline), version {version}" in result.output
    assert fake.api_calls() == [
        ("GET", f"{API}/pipelines"),
        ("POST", f"{API}/pipelines"),
        ("POST", f"{API}/pipelines/upload_version"),
    ]
    assert fake.calls("POST", f"{API}/pipelines")[0].body == {"display_name": "tfxp-test"}
    upload = fake.calls("POST", f"{API}/pipelines/upload_version")[0]
    assert upload.query["name"] == [version]
    assert upload.query["pipelineid"] == ["pl-1"]
    assert upload.query["description"] == [f"tfxp spec sha256:{spec_digest(load_pipeline_doc(package))}"]
    assert yaml.safe_load(upload.files["uploadfile"]) == yaml.safe_load(package.read_text())
    assert f"{host}/#/pipelines/details/pl-1/version/pl-1-v1" in result.output


def test_uploading_the_same_spec_twice_is_a_no_op(fake: FakeKfp, host: str, package: Path, tmp_path: Path) -> None:
    assert _invoke("pipeline", "upload", str(package), "--host", host).exit_code == 0
    fake.requests.clear()

    again = _invoke("pipeline", "upload", str(package), "--host", host)

    assert again.exit_code == 0, again.output
    assert "already has this spec as version sha-" in again.output and "nothing uploaded" in again.output
    assert not fake.calls("POST", f"{API}/pipelines/upload_version")
    assert not fake.calls("POST", f"{API}/pipelines")
    # A changed spec is a new version of the same pipeline.
    spec = spec_dict(["Trainer"], PARAMETERS)
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(spec))
    third = _invoke("pipeline", "upload", str(changed), "--host", host)
    assert third.exit_code == 0, third.output
    assert [v["display_name"] for v in fake.versions["pl-1"]] == [
        default_version_name(load_pipeline_doc(package)),
        default_version_name(load_pipeline_doc(changed)),
    ]
    assert "(new pipeline)" not in third.output


def test_a_named_version_with_another_spec_is_a_duplicate(fake: FakeKfp, host: str, package: Path) -> None:
    fake.add_pipeline("nightly", {"v1": spec_dict(["Trainer"])})

    same = _invoke("pipeline", "upload", str(package), "--host", host, "--name", "nightly", "--version", "v2")
    assert same.exit_code == 0, same.output
    again = _invoke("pipeline", "upload", str(package), "--host", host, "--name", "nightly", "--version", "v2")
    assert again.exit_code == 0 and "nothing uploaded" in again.output
    clash = _invoke("pipeline", "upload", str(package), "--host", host, "--name", "nightly", "--version", "v1")

    assert clash.exit_code == 2
    assert "pipeline 'nightly' already has a version 'v1' with a different spec; choose another --version" in (
        clash.output
    )
    assert len(fake.calls("POST", f"{API}/pipelines/upload_version")) == 1


def test_pipeline_list_and_versions(fake: FakeKfp, host: str) -> None:
    fake.add_pipeline("tfxp-digits", {"sha-aaa": None, "sha-bbb": None})
    fake.add_pipeline("tfxp-imagenet")

    listed = _invoke("pipeline", "list", "--host", host)
    versions = _invoke("pipeline", "versions", "tfxp-digits", "--host", host)
    unknown = _invoke("pipeline", "versions", "tfxp-mnist", "--host", host)

    assert listed.exit_code == 0, listed.output
    assert listed.output.index("tfxp-imagenet") < listed.output.index("tfxp-digits")  # newest first
    assert fake.calls("GET", f"{API}/pipelines")[0].query["sort_by"] == ["created_at desc"]
    assert versions.exit_code == 0, versions.output
    assert versions.output.index("sha-bbb") < versions.output.index("sha-aaa")
    assert "pl-1-v2" in versions.output
    assert unknown.exit_code == 2
    assert "no pipeline named 'tfxp-mnist'" in unknown.output and "tfxp pipeline upload" in unknown.output


def test_multi_user_lookups_find_the_namespaces_pipelines(fake: FakeKfp, host: str, package: Path) -> None:
    fake.multi_user = True
    team_a = fake.add_pipeline("tfxp-test", {"sha-aaa": None}, namespace="team-a")
    fake.add_pipeline("tfxp-shared", {"sha-sss": None})  # shared: no namespace

    versions = _invoke("pipeline", "versions", "tfxp-test", "--host", host, "--namespace", "team-a")
    listed = _invoke("pipeline", "list", "--host", host, "--namespace", "team-a")
    upload = _invoke("pipeline", "upload", str(package), "--host", host, "--namespace", "team-a")
    elsewhere = _invoke("pipeline", "upload", str(package), "--host", host, "--namespace", "team-b")
    missing = _invoke("pipeline", "versions", "tfxp-shared", "--host", host, "--namespace", "team-b")

    assert versions.exit_code == 0, versions.output
    assert "sha-aaa" in versions.output
    lookup = fake.calls("GET", f"{API}/pipelines")[0]
    assert lookup.query["namespace"] == ["team-a"] and "tfxp-test" in lookup.query["filter"][0]
    assert listed.exit_code == 0, listed.output
    assert "tfxp-test" in listed.output and "tfxp-shared" not in listed.output
    # An upload in team-a adds a version to team-a's pipeline; in team-b, where it does not exist, it makes one.
    assert upload.exit_code == 0, upload.output
    assert "(new pipeline)" not in upload.output
    assert [v["display_name"] for v in fake.versions[team_a]] == [
        "sha-aaa",
        default_version_name(load_pipeline_doc(package)),
    ]
    assert elsewhere.exit_code == 0, elsewhere.output
    assert "(new pipeline)" in elsewhere.output
    assert [p.body for p in fake.calls("POST", f"{API}/pipelines")] == [
        {"display_name": "tfxp-test", "namespace": "team-b"}
    ]
    # A shared pipeline is not one of team-b's: the message names the namespace and the options to use.
    assert missing.exit_code == 2
    assert (
        f"no pipeline named 'tfxp-shared' in namespace 'team-b' at {host}; upload it with `tfxp pipeline upload "
        f"pipeline.yaml --host {host} --namespace team-b --name tfxp-shared` or list them with `tfxp pipeline list "
        f"--host {host} --namespace team-b`"
    ) in missing.output


def test_two_pipelines_of_one_name_are_named_in_the_error(fake: FakeKfp, host: str) -> None:
    fake.add_pipeline("tfxp-test")
    # Display names need not be unique; only `name` is, per namespace (backend/src/apiserver/model/pipeline.go:44-45).
    fake.add_pipeline("tfxp-test")

    result = _invoke("pipeline", "versions", "tfxp-test", "--host", host)

    assert result.exit_code == 2
    assert (
        f"several pipelines are named 'tfxp-test' at {host}, and tfxp finds a pipeline by its name: rename or "
        "delete all but one in the KFP UI"
    ) in result.output


# --- tfxp schedule ------------------------------------------------------------------------------------------


def test_schedule_from_a_file_sends_cron_concurrency_catchup_and_typed_params(
    fake: FakeKfp, host: str, package: Path
) -> None:
    result = _invoke(
        "schedule", "create", str(package), "--host", host, "--cron", "30 2 * * 1", "--max-concurrency", "3",
        "--no-catchup", "--param", "train_steps=500", "--param", "warm_start=true", "--experiment", "nightly",
        "--start", "2030-01-01",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert "'30 2 * * 1' is '0 30 2 * * 1' in KFP's six-field form" in result.output
    assert fake.api_calls() == [
        ("GET", f"{API}/experiments"),
        ("POST", f"{API}/experiments"),
        ("POST", f"{API}/recurringruns"),
    ]
    body = fake.calls("POST", f"{API}/recurringruns")[0].body
    assert body["trigger"] == {"cron_schedule": {"cron": "0 30 2 * * 1", "start_time": "2030-01-01T00:00:00Z"}}
    assert body["max_concurrency"] == 3
    assert body["no_catchup"] is True
    assert body["mode"] == "ENABLE"
    assert body["runtime_config"]["parameters"] == {"train_steps": 500, "warm_start": True}
    assert body["experiment_id"] == fake.experiments["nightly"]
    assert body["display_name"] == "tfxp-test (cron 0 30 2 * * 1 from 2030-01-01T00:00:00Z)"
    assert body["pipeline_spec"]["root"]["dag"]["tasks"]["Trainer"]["dependentTasks"] == ["ImportExampleGen"]
    assert "recurring run id: rr-1" in result.output


def test_schedule_every_interval_of_an_uploaded_pipeline(fake: FakeKfp, host: str) -> None:
    pipeline_id = fake.add_pipeline(
        "tfxp-digits", {"sha-old": spec_dict(["Trainer"]), "sha-new": spec_dict(["Trainer"], PARAMETERS)}
    )

    result = _invoke(
        "schedule", "create", "--pipeline", "tfxp-digits", "--host", host, "--every", "6h",
        "--param", "min_accuracy=0.9", "--name", "digits-6h",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert "pipeline tfxp-digits, version sha-new" in result.output
    body = fake.calls("POST", f"{API}/recurringruns")[0].body
    assert body["trigger"] == {"periodic_schedule": {"interval_second": 21600}}
    assert body["pipeline_version_reference"] == {"pipeline_id": pipeline_id, "pipeline_version_id": "pl-1-v2"}
    assert "pipeline_spec" not in body
    assert body["runtime_config"]["parameters"] == {"min_accuracy": 0.9}
    assert body["max_concurrency"] == 1 and body["no_catchup"] is False
    assert body["display_name"] == "digits-6h"


def test_schedule_params_are_checked_against_the_version_spec(fake: FakeKfp, host: str) -> None:
    fake.add_pipeline("tfxp-digits", {"v1": spec_dict(["Trainer"], PARAMETERS), "v2": spec_dict(["Trainer"])})

    wrong = _invoke(
        "schedule", "create", "--pipeline", "tfxp-digits", "--version", "v1", "--host", host, "--every", "1d",
        "--param", "train_steps=many",
    )  # fmt: skip
    missing = _invoke(
        "schedule", "create", "--pipeline", "tfxp-digits", "--version", "v9", "--host", host, "--every", "1d"
    )
    unknown = _invoke("schedule", "create", "--pipeline", "tfxp-mnist", "--host", host, "--every", "1d")

    assert wrong.exit_code == 2
    assert "train_steps is NUMBER_INTEGER, so the value must be a whole number" in wrong.output
    assert missing.exit_code == 2 and "pipeline 'tfxp-digits' has no version 'v9'" in missing.output
    assert "(newest: v2, v1)" in missing.output
    assert unknown.exit_code == 2 and "no pipeline named 'tfxp-mnist'" in unknown.output
    assert not fake.calls("POST", f"{API}/recurringruns")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "0 0 * * 7"], "7 is outside 0-6 (Sunday is 0)"),
        (["--cron", "61 * * * * *"], "the second field '61'"),
        (["--every", "30"], "is not an interval"),
        (["--every", "10s"], "use at least 60 s"),
        (["--every", "1h", "--cron", "@daily"], "exactly one of --cron"),
        (["--every", "1h", "--max-concurrency", "11"], "KFP allows 1 to 10"),
        (["--every", "1h", "--param", "train_step=5"], "no such parameter; its parameters: data_path"),
        (["--every", "1h", "--param", "warm_start=maybe"], "warm_start is BOOLEAN"),
        (["--every", "1h", "--end", "2001-01-01"], "is in the past"),
        (["--every", "1h", "--version", "v1"], "--version picks a version of --pipeline NAME"),
    ],
)
def test_bad_schedules_fail_before_any_request(
    fake: FakeKfp, host: str, package: Path, args: list[str], message: str
) -> None:
    result = _invoke("schedule", "create", str(package), "--host", host, *args)

    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert fake.requests == []


def test_schedule_from_a_file_sends_its_pipeline_root(fake: FakeKfp, host: str, tmp_path: Path) -> None:
    package = tmp_path / "rooted.yaml"
    package.write_text(yaml.safe_dump(spec_dict(["Trainer"], pipeline_root="gs://bucket/tfxp/root")))

    spec_root = _invoke("schedule", "create", str(package), "--host", host, "--every", "1d")
    override = _invoke(
        "schedule", "create", str(package), "--host", host, "--every", "1d", "--pipeline-root", "gs://other/root"
    )

    assert spec_root.exit_code == 0, spec_root.output
    assert override.exit_code == 0, override.output
    bodies = [request.body for request in fake.calls("POST", f"{API}/recurringruns")]
    assert [body["runtime_config"]["pipeline_root"] for body in bodies] == ["gs://bucket/tfxp/root", "gs://other/root"]
    assert [config["pipeline_root"] for config in fake.runtime_configs] == ["gs://bucket/tfxp/root", "gs://other/root"]
    assert "pipeline root: gs://bucket/tfxp/root" in spec_root.output
    assert "warning" not in spec_root.output


def test_schedule_of_an_uploaded_pipeline_sends_the_versions_root(fake: FakeKfp, host: str) -> None:
    fake.add_pipeline(
        "tfxp-digits",
        {
            "v1": spec_dict(["Trainer"], pipeline_root="gs://bucket/old"),
            "v2": spec_dict(["Trainer"], pipeline_root="gs://bucket/new"),
        },
    )

    newest = _invoke("schedule", "create", "--pipeline", "tfxp-digits", "--host", host, "--every", "1d")
    chosen = _invoke(
        "schedule", "create", "--pipeline", "tfxp-digits", "--version", "v1", "--host", host, "--every", "1d"
    )

    assert newest.exit_code == 0, newest.output
    assert chosen.exit_code == 0, chosen.output
    assert [config["pipeline_root"] for config in fake.runtime_configs] == ["gs://bucket/new", "gs://bucket/old"]
    assert all("pipeline_spec" not in r.body for r in fake.calls("POST", f"{API}/recurringruns"))


def test_schedule_of_a_version_without_a_spec_warns_that_no_root_is_sent(fake: FakeKfp, host: str) -> None:
    fake.add_pipeline("tfxp-digits", {"v1": None})

    result = _invoke("schedule", "create", "--pipeline", "tfxp-digits", "--host", host, "--every", "1d")

    assert result.exit_code == 0, result.output
    assert "pipeline_root" not in fake.runtime_configs[0]
    assert (
        "warning: the spec of pipeline tfxp-digits, version v1 is not known and no --pipeline-root was given, so the "
        "run names no pipeline root: KFP then uses the defaultPipelineRoot of the kfp-launcher ConfigMap"
    ) in result.output


def test_schedule_with_a_local_pipeline_root_is_refused(fake: FakeKfp, host: str, package: Path) -> None:
    fake.add_pipeline("tfxp-digits", {"v1": spec_dict(["Trainer"], pipeline_root="/mnt/tfxp/root")})

    from_file = _invoke("schedule", "create", str(package), "--host", host, "--every", "1d", "--pipeline-root", "root")
    requests_before_version = list(fake.requests)
    from_version = _invoke("schedule", "create", "--pipeline", "tfxp-digits", "--host", host, "--every", "1d")

    assert from_file.exit_code == 2
    assert "the pipeline root (--pipeline-root root) is a local path, which the run's pods on Kubeflow cannot" in (
        from_file.output
    )
    assert requests_before_version == []  # a file's root is checked before any request
    assert from_version.exit_code == 2
    assert (
        "the pipeline root (defaultPipelineRoot /mnt/tfxp/root of pipeline tfxp-digits, version v1) is a local path"
    ) in from_version.output
    assert not fake.calls("POST", f"{API}/recurringruns")


@pytest.mark.parametrize("uploaded", [False, True])
def test_schedule_with_an_exit_handler_needs_kfp_2_14(fake: FakeKfp, host: str, tmp_path: Path, uploaded: bool) -> None:
    spec = spec_dict(["Trainer"], pipeline_root="gs://bucket/root", exit_handler="RunNotice")
    package = tmp_path / "notify.yaml"
    package.write_text(yaml.safe_dump(spec))
    fake.add_pipeline("tfxp-notify", {"v1": spec})
    source = ["--pipeline", "tfxp-notify"] if uploaded else [str(package)]
    fake.tag_name = "2.5.0"

    old = _invoke("schedule", "create", *source, "--host", host, "--every", "1d")
    fake.tag_name = "2.14.0"
    new = _invoke("schedule", "create", *source, "--host", host, "--every", "1d")

    assert old.exit_code == 2
    assert "is version 2.5.0 (healthz tag_name), which cannot run the pipeline's exit handler (RunNotice" in old.output
    assert "upgrade KFP, or recompile without kubeflow.notify_url" in old.output
    assert new.exit_code == 0, new.output
    assert len(fake.calls("POST", f"{API}/recurringruns")) == 1


def test_schedule_list_pause_resume_delete(fake: FakeKfp, host: str, package: Path) -> None:
    assert _invoke("schedule", "create", str(package), "--host", host, "--every", "1d").exit_code == 0

    paused = _invoke("schedule", "pause", "rr-1", "--host", host)
    listed = _invoke("schedule", "list", "--host", host)
    resumed = _invoke("schedule", "resume", "rr-1", "--host", host)
    deleted = _invoke("schedule", "delete", "rr-1", "--host", host)
    again = _invoke("schedule", "delete", "rr-1", "--host", host)

    assert paused.exit_code == 0 and "paused recurring run rr-1" in paused.output
    assert listed.exit_code == 0, listed.output
    assert "paused" in listed.output and "every 1d" in listed.output
    assert resumed.exit_code == 0 and deleted.exit_code == 0
    assert [call for call in fake.api_calls() if "rr-1" in call[1]] == [
        ("POST", f"{API}/recurringruns/rr-1:disable"),
        ("POST", f"{API}/recurringruns/rr-1:enable"),
        ("DELETE", f"{API}/recurringruns/rr-1"),
        ("DELETE", f"{API}/recurringruns/rr-1"),
    ]
    assert again.exit_code == 2
    assert "no recurring run rr-1 at" in again.output and "tfxp schedule list" in again.output


# --- tfxp runs ----------------------------------------------------------------------------------------------


def test_runs_list_and_get(fake: FakeKfp, host: str) -> None:
    fake.experiments["nightly"] = "exp-7"
    fake.add_run("run-a", "SUCCEEDED", "exp-7", finished_at="2025-01-01T01:00:00Z")
    fake.add_run("run-b", "FAILED", "exp-7", error={"code": 2, "message": "Trainer: OOMKilled"},
                 run_details={"task_details": [{"display_name": "Trainer", "state": "FAILED"}]})  # fmt: skip
    fake.add_run("run-c", "RUNNING", "exp-other")

    listed = _invoke("runs", "list", "--host", host, "--experiment", "nightly")
    shown = _invoke("runs", "get", "run-b", "--host", host)
    missing = _invoke("runs", "list", "--host", host, "--experiment", "weekly")

    assert listed.exit_code == 0, listed.output
    assert "run-a" in listed.output and "run-b" in listed.output and "run-c" not in listed.output
    assert listed.output.index("run-b") < listed.output.index("run-a")  # newest first
    assert fake.calls("GET", f"{API}/runs")[0].query["experiment_id"] == ["exp-7"]
    assert shown.exit_code == 0, shown.output
    assert "state: FAILED" in shown.output and "error: Trainer: OOMKilled" in shown.output
    assert f"{host}/#/runs/details/run-b" in shown.output
    assert missing.exit_code == 2 and "no experiment named 'weekly'" in missing.output


def test_runs_terminate_and_retry(fake: FakeKfp, host: str) -> None:
    fake.add_run("run-going", "RUNNING")
    fake.add_run("run-failed", "FAILED")
    fake.add_run("run-done", "SUCCEEDED")

    terminated = _invoke("runs", "terminate", "run-going", "--host", host)
    retried = _invoke("runs", "retry", "run-failed", "--host", host)
    done = _invoke("runs", "terminate", "run-done", "--host", host)
    not_failed = _invoke("runs", "retry", "run-done", "--host", host)
    unknown = _invoke("runs", "terminate", "run-nosuch", "--host", host)

    assert terminated.exit_code == 0 and "terminating run run-going (was RUNNING)" in terminated.output
    assert retried.exit_code == 0 and "retrying run run-failed (was FAILED)" in retried.output
    assert fake.runs["run-going"]["state"] == "CANCELING" and fake.runs["run-failed"]["state"] == "RUNNING"
    assert [call for call in fake.api_calls() if call[0] == "POST"] == [
        ("POST", f"{API}/runs/run-going:terminate"),
        ("POST", f"{API}/runs/run-failed:retry"),
    ]
    assert done.exit_code == 2 and "run run-done already ended SUCCEEDED; there is nothing to terminate" in done.output
    assert not_failed.exit_code == 2 and "only a run that ended CANCELED or FAILED can be retried" in not_failed.output
    assert unknown.exit_code == 2 and "no run run-nosuch at" in unknown.output and "tfxp runs list" in unknown.output


# --- tfxp submit --param / --no-cache -----------------------------------------------------------------------


def test_submit_with_params_and_no_cache(fake: FakeKfp, host: str, tmp_path: Path) -> None:
    spec = spec_dict(["Trainer", "Pusher"], PARAMETERS)
    # An exit handler nests the pipeline's tasks in a sub-DAG, which kfp's own cache override does not reach.
    inner = {
        "taskInfo": {"name": "Inner"},
        "componentRef": {"name": "Trainer"},
        "cachingOptions": {"enableCache": True},
    }
    spec["components"]["tfx-dag"] = {"dag": {"tasks": {"Inner": inner}}}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(spec))

    result = _invoke(
        "submit", str(path), "--host", host, "--param", "train_steps=50", "-p", "data_path=/d", "--no-cache"
    )

    assert result.exit_code == 0, result.output
    body = fake.calls("POST", f"{API}/runs")[0].body
    assert body["runtime_config"]["parameters"] == {"train_steps": 50, "data_path": "/d"}
    sent = body["pipeline_spec"]
    tasks = [*sent["root"]["dag"]["tasks"].values(), *sent["components"]["tfx-dag"]["dag"]["tasks"].values()]
    assert len(tasks) == 3
    assert not any(task.get("cachingOptions", {}).get("enableCache") for task in tasks)
    assert yaml.safe_load(path.read_text()) == spec  # the file itself is untouched


def test_submit_keeps_compiled_caching_without_no_cache(fake: FakeKfp, host: str, package: Path) -> None:
    assert _invoke("submit", str(package), "--host", host).exit_code == 0

    body = fake.calls("POST", f"{API}/runs")[0].body
    assert all(task["cachingOptions"]["enableCache"] for task in body["pipeline_spec"]["root"]["dag"]["tasks"].values())
    assert body["runtime_config"]["parameters"] == {}


def test_submit_with_a_bad_param_sends_nothing(fake: FakeKfp, host: str, package: Path) -> None:
    result = _invoke("submit", str(package), "--host", host, "--param", "min_accuracy=high")

    assert result.exit_code == 2
    assert "min_accuracy is NUMBER_DOUBLE, so the value must be a number" in result.output
    assert fake.requests == []


# --- auth and unreachable hosts -----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize(
    "command", [["pipeline", "list"], ["runs", "list"], ["schedule", "list"], ["schedule", "create", "--every", "1h"]]
)
def test_refused_credentials_give_the_auth_hint(
    fake: FakeKfp, host: str, package: Path, status: int, command: list[str]
) -> None:
    fake.required_auth, fake.refusal = "Bearer right", status
    extra = [str(package)] if command[-1] == "1h" else []

    result = _invoke(*command, *extra, "--host", host, env={TOKEN_ENV: "wrong"})

    assert result.exit_code == 2
    text = result.output
    assert f"refused the request (HTTP {status})" in text
    assert f"a bearer token from {TOKEN_ENV}" in text and "KF_PIPELINES_SA_TOKEN_PATH" in text


@pytest.mark.parametrize(
    "command",
    [["pipeline", "list"], ["runs", "get", "r1"], ["schedule", "pause", "rr-1"], ["pipeline", "versions", "p"]],
)
def test_an_unreachable_host_fails_within_the_timeout(command: list[str]) -> None:
    started = time.monotonic()
    result = _invoke(*command, "--host", f"http://127.0.0.1:{closed_port()}", "--request-timeout", "5")

    assert result.exit_code == 2
    assert "cannot reach Kubeflow Pipelines" in result.output
    assert time.monotonic() - started < 5


def test_a_silent_host_fails_within_the_request_timeout() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        result = _invoke(
            "schedule", "list", "--host", f"http://127.0.0.1:{silent.getsockname()[1]}", "--request-timeout", "1"
        )
    assert result.exit_code == 2
    assert "did not answer within 1 s" in result.output
    assert time.monotonic() - started < 4


def test_a_server_that_hangs_while_creating_the_schedule(fake: FakeKfp, host: str, package: Path) -> None:
    fake.hang = ("POST", f"{API}/recurringruns")

    started = time.monotonic()
    result = _invoke("schedule", "create", str(package), "--host", host, "--every", "1h", "--request-timeout", "0.5")

    assert result.exit_code == 2
    assert "did not answer within 0.5 s while creating the recurring run" in result.output
    assert time.monotonic() - started < 2.5
