"""`tfxp submit` and pipeline.kubeflow (submit, auth, runs) against a local fake of the KFP v2beta1 REST API.

The fake (tests/support/kfp_fake.py) answers what kfp 2.16's `Client.create_run_from_pipeline_package` calls: GET
healthz
(the client's constructor), GET experiments?filter= (find by name), POST experiments, POST runs; and GET
runs/{id} for waiting. It records every request so the tests assert what the real client sent.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from kfp_fake import API, RUN_ID, FakeKfp, closed_port, spec_dict
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.kubeflow.client.auth import COOKIE_ENV, TOKEN_ENV, TOKEN_PATH_ENV, KfpAuth
from pipeline.kubeflow.client.runs import (
    NoAnswerError,
    RunFailedError,
    RunStatus,
    RunTimeoutError,
    SubmitError,
    progress_line,
    wait_for_run,
)
from pipeline.kubeflow.client.submit import KfpRunClient
from pipeline.kubeflow.compiler.spec import load_pipeline_doc

pytestmark = pytest.mark.usefixtures("no_kfp_credentials")


@pytest.fixture
def package(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(spec_dict(["ImportExampleGen", "Trainer", "Pusher"])))
    return path


@pytest.fixture
def package_with_platform(tmp_path: Path) -> Path:
    platform = {
        "platforms": {
            "kubernetes": {
                "deploymentSpec": {"executors": {"Trainer_executor": {"nodeSelector": {"labels": {"gpu": "a100"}}}}}
            }
        }
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump_all([spec_dict(["Trainer"]), platform]))
    return path


def test_submit_sends_the_compiled_spec_and_creates_the_experiment(fake: FakeKfp, host: str, package: Path) -> None:
    run = KfpRunClient(host).submit(package, experiment="nightly", run_name="tfxp-test-1")

    assert run.run_id == RUN_ID
    assert run.url == f"{host}/#/runs/details/{RUN_ID}"
    assert run.tasks == ("ImportExampleGen", "Pusher", "Trainer")
    # tfxp checks the health endpoint first (kfp.Client's constructor may check it again).
    assert (fake.requests[0].method, fake.requests[0].path) == ("GET", f"{API}/healthz")
    assert [(r.method, r.path) for r in fake.requests if r.path != f"{API}/healthz"] == [
        ("GET", f"{API}/experiments"),
        ("POST", f"{API}/experiments"),
        ("POST", f"{API}/runs"),
    ]
    assert fake.calls("POST", f"{API}/experiments")[0].body["display_name"] == "nightly"
    body = fake.calls("POST", f"{API}/runs")[0].body
    assert body["display_name"] == "tfxp-test-1"
    assert body["experiment_id"] == "exp-1"
    # What the client sent is exactly the file as pipeline.kubeflow.compiler.spec loads it.
    expected = json_format.MessageToDict(load_pipeline_doc(package).pipeline_spec)
    assert body["pipeline_spec"] == expected
    assert body["pipeline_spec"]["root"]["dag"]["tasks"]["Trainer"]["dependentTasks"] == ["ImportExampleGen"]


def test_submit_reuses_an_existing_experiment_named_after_the_pipeline(fake: FakeKfp, host: str, package: Path) -> None:
    fake.experiments["tfxp-test"] = "exp-existing"

    run = KfpRunClient(host).submit(package)

    assert run.experiment == "tfxp-test"
    assert not fake.calls("POST", f"{API}/experiments")
    body = fake.calls("POST", f"{API}/runs")[0].body
    assert body["experiment_id"] == "exp-existing"
    assert body["display_name"].startswith("tfxp-test-")


def test_submit_sends_the_platform_spec_too(fake: FakeKfp, host: str, package_with_platform: Path) -> None:
    KfpRunClient(host).submit(package_with_platform)

    sent = fake.calls("POST", f"{API}/runs")[0].body["pipeline_spec"]
    doc = load_pipeline_doc(package_with_platform)
    # kfp sends {"pipeline_spec", "platform_spec"} when the file has a platform document.
    assert sent == {
        "pipeline_spec": json_format.MessageToDict(doc.pipeline_spec),
        "platform_spec": json_format.MessageToDict(doc.platform_spec),
    }
    executors = sent["platform_spec"]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert executors["Trainer_executor"]["nodeSelector"] == {"labels": {"gpu": "a100"}}


def test_credentials_come_from_the_environment(fake: FakeKfp, host: str, package: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("sa-token\n")
    fake.required_auth = "Bearer sa-token"

    auth = KfpAuth.from_env({TOKEN_PATH_ENV: str(token_file), COOKIE_ENV: "authservice_session=abc"})
    KfpRunClient(host, auth=auth).submit(package)

    assert {r.headers.get("authorization") for r in fake.requests} == {"Bearer sa-token"}
    assert {r.headers.get("cookie") for r in fake.requests} == {"authservice_session=abc"}
    assert "sa-token" not in repr(auth) and "abc" not in repr(auth)


def test_refused_credentials_name_the_variables(fake: FakeKfp, host: str, package: Path) -> None:
    fake.required_auth = "Bearer right"

    client = KfpRunClient(host, auth=KfpAuth.from_env({TOKEN_ENV: "wrong"}))
    with pytest.raises(SubmitError, match=rf"HTTP 401.*bearer token from {TOKEN_ENV}.*{TOKEN_PATH_ENV}"):
        client.submit(package)
    assert not fake.calls("POST", f"{API}/runs")


def test_api_errors_carry_the_server_message(fake: FakeKfp, host: str, package: Path) -> None:
    fake.create_run_error = "Failed to create a run: resolver executors not implemented"

    with pytest.raises(
        SubmitError, match=r"answered HTTP 400 while creating the run: .*resolver executors not implemented"
    ):
        KfpRunClient(host).submit(package)


def test_token_and_token_path_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SubmitError, match=f"both {TOKEN_ENV} and {TOKEN_PATH_ENV} are set"):
        KfpAuth.from_env({TOKEN_ENV: "t", TOKEN_PATH_ENV: str(tmp_path)})
    with pytest.raises(SubmitError, match=f"{TOKEN_PATH_ENV}=.*missing is not a readable file"):
        KfpAuth.from_env({TOKEN_PATH_ENV: str(tmp_path / "missing")})


SECRET = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0"


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({TOKEN_ENV: SECRET + "\nX-Injected: 1"}, "a line break at position 30"),
        ({TOKEN_ENV: SECRET[:10] + " " + SECRET[10:]}, "a space at position 11"),
        ({TOKEN_ENV: SECRET + "\u00e9"}, "character U+00E9"),
        ({COOKIE_ENV: "session=" + SECRET + "\r\n"}, None),  # stripped at the ends: accepted
        ({COOKIE_ENV: "session=" + SECRET + "\x07x"}, "character U+0007"),
    ],
    ids=["newline", "space", "non-ascii", "cookie-crlf-at-end", "cookie-bell"],
)
def test_a_credential_http_cannot_carry_is_refused_without_showing_it(env: dict[str, str], kind: str | None) -> None:
    if kind is None:
        assert KfpAuth.from_env(env).headers()["Cookie"] == "session=" + SECRET
        return
    with pytest.raises(SubmitError, match=re.escape(kind)) as raised:
        KfpAuth.from_env(env)
    assert SECRET not in str(raised.value) and SECRET[10:] not in str(raised.value)
    assert "the value is not shown" in str(raised.value)


def test_a_token_file_is_read_only_when_it_is_a_small_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(SubmitError, match=f"{TOKEN_PATH_ENV}=.*fifo is not a regular file"):
        KfpAuth.from_env({TOKEN_PATH_ENV: str(fifo)})  # opening a FIFO nobody writes would block forever
    assert time.monotonic() - started < 5
    big = tmp_path / "big"
    big.write_bytes(b"a" * (65 * 1024))
    with pytest.raises(SubmitError, match=r"is larger than a token \(64 KiB at most\)"):
        KfpAuth.from_env({TOKEN_PATH_ENV: str(big)})
    bad = tmp_path / "bad"
    bad.write_text(SECRET + "\nsecond line\n")
    with pytest.raises(SubmitError, match="a line break") as raised:
        KfpAuth.from_env({TOKEN_PATH_ENV: str(bad)})
    assert SECRET not in str(raised.value)
    good = tmp_path / "token"
    good.write_text(SECRET + "\n")
    assert KfpAuth.from_env({TOKEN_PATH_ENV: str(good)}).headers() == {"Authorization": f"Bearer {SECRET}"}


def test_a_server_without_the_kfp_api_is_named(fake: FakeKfp, host: str, package: Path) -> None:
    with pytest.raises(SubmitError, match=r"HTTP 404 .*no KFP v2beta1 API there; check --host"):
        KfpRunClient(f"{host}/not-kfp").submit(package)


def test_wait_reports_progress_until_succeeded(fake: FakeKfp, host: str, package: Path) -> None:
    fake.states = ["PENDING", "RUNNING", "RUNNING", "SUCCEEDED"]
    fake.tasks = {"ImportExampleGen": "SUCCEEDED", "Trainer": "RUNNING", "Trainer-driver": "SUCCEEDED"}
    client = KfpRunClient(host)
    run = client.submit(package)
    seen: list[str] = []

    final = client.wait(run.run_id, timeout=10, poll_seconds=0.01, on_status=lambda s, _: seen.append(s.state))

    assert final.state == "SUCCEEDED"
    assert seen == ["PENDING", "RUNNING", "RUNNING", "SUCCEEDED"]
    assert len(fake.calls("GET", f"{API}/runs/{RUN_ID}")) == 4
    assert progress_line(final, 42, run.tasks) == "[    42s] SUCCEEDED  done 1/3  running: Trainer"


def test_wait_raises_on_failure_with_the_failed_tasks(fake: FakeKfp, host: str, package: Path) -> None:
    fake.states = ["RUNNING", "FAILED"]
    fake.tasks = {"Trainer": "FAILED", "ImportExampleGen": "SUCCEEDED"}
    fake.run_error = "Trainer: OOMKilled"
    client = KfpRunClient(host)

    with pytest.raises(RunFailedError, match=r"ended FAILED \(failed tasks: Trainer\): Trainer: OOMKilled") as info:
        client.wait(client.submit(package).run_id, timeout=10, poll_seconds=0.01)
    assert info.value.status.state == "FAILED"


def test_wait_times_out_while_the_run_keeps_running(fake: FakeKfp, host: str, package: Path) -> None:
    fake.states = ["RUNNING"]
    client = KfpRunClient(host)
    run = client.submit(package)

    started = time.monotonic()
    with pytest.raises(RunTimeoutError, match=r"did not finish within 0.5 s \(last state RUNNING\).*--timeout"):
        client.wait(run.run_id, timeout=0.5, poll_seconds=0.05)
    assert time.monotonic() - started < 3


def test_wait_polls_through_transient_errors_but_not_others() -> None:
    clock = [0.0]
    answers: list[Any] = [NoAnswerError("no answer"), RunStatus("RUNNING"), RunStatus("SUCCEEDED")]

    def poll(remaining: float) -> RunStatus:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    final = wait_for_run(poll, "r", timeout=100, poll_seconds=10, clock=lambda: clock[0], sleep=sleep)
    assert final.state == "SUCCEEDED"
    assert clock[0] == 20

    def refused(remaining: float) -> RunStatus:
        raise SubmitError("HTTP 401")

    with pytest.raises(SubmitError, match="HTTP 401"):
        wait_for_run(refused, "r", timeout=100, clock=lambda: clock[0], sleep=sleep)


def test_unreachable_host_is_a_clear_error(package: Path) -> None:
    started = time.monotonic()
    with pytest.raises(SubmitError, match=r"cannot reach Kubeflow Pipelines at http://127.0.0.1:\d+ .*--host"):
        KfpRunClient(f"http://127.0.0.1:{closed_port()}", request_timeout=5).submit(package)
    assert time.monotonic() - started < 5


def test_a_silent_host_fails_within_the_request_timeout(package: Path) -> None:
    # Accepts connections (the kernel's backlog) but never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        host = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(NoAnswerError, match=r"did not answer within 1 s"):
            KfpRunClient(host, request_timeout=1).submit(package)
        assert time.monotonic() - started < 4


def test_a_server_that_hangs_mid_submission_fails_within_the_request_timeout(
    fake: FakeKfp, host: str, package: Path
) -> None:
    fake.hang = ("POST", f"{API}/runs")

    started = time.monotonic()
    with pytest.raises(NoAnswerError, match=r"did not answer within 0.5 s while creating the run"):
        KfpRunClient(host, request_timeout=0.5).submit(package)
    assert time.monotonic() - started < 2.5


def test_bad_packages_are_refused_before_any_request(tmp_path: Path) -> None:
    client = KfpRunClient(f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(SubmitError, match="does not exist; make it with `tfxp compile"):
        client.submit(tmp_path / "missing.yaml")
    wrapper = tmp_path / "pipeline.json"
    wrapper.write_text(json.dumps({"pipelineSpec": spec_dict(["Trainer"])}))
    with pytest.raises(SubmitError, match=r"accepts .yaml/.yml"):
        client.submit(wrapper)
    wrapped_yaml = tmp_path / "wrapped.yaml"
    wrapped_yaml.write_text(yaml.safe_dump({"pipelineSpec": spec_dict(["Trainer"]), "displayName": "x"}))
    with pytest.raises(SubmitError, match="PipelineJob wrapper"):
        client.submit(wrapped_yaml)
    with pytest.raises(SubmitError, match="is not an http:// or https:// URL"):
        KfpRunClient("localhost:8080")


def _invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env)


def test_cli_submit_and_wait(fake: FakeKfp, host: str, package: Path) -> None:
    fake.states = ["RUNNING", "SUCCEEDED"]
    fake.tasks = {"Trainer": "RUNNING"}

    result = _invoke("submit", str(package), "--host", host, "--wait", "--poll", "0.05", env={TOKEN_ENV: "tok"})

    assert result.exit_code == 0, result.output
    assert "Experiment details" not in result.output  # kfp's own prints stay out of tfxp's output
    assert f"run id: {RUN_ID}" in result.output
    assert f"{host}/#/runs/details/{RUN_ID}" in result.output
    assert "RUNNING  done 0/3  running: Trainer" in result.output
    assert "SUCCEEDED" in result.output
    assert {r.headers.get("authorization") for r in fake.requests} == {"Bearer tok"}


@pytest.mark.parametrize(
    ("states", "timeout", "code", "message"),
    [(["RUNNING", "FAILED"], "30", 1, "ended FAILED"), (["RUNNING"], "1", 3, "did not finish within 1 s")],
)
def test_cli_wait_exit_codes(
    fake: FakeKfp, host: str, package: Path, states: list[str], timeout: str, code: int, message: str
) -> None:
    fake.states = states

    result = _invoke("submit", str(package), "--host", host, "--wait", "--poll", "0.05", "--timeout", timeout)

    assert result.exit_code == code, result.output
    assert message in result.output


def test_cli_submit_to_an_unreachable_host(package: Path) -> None:
    result = _invoke("submit", str(package), "--host", f"http://127.0.0.1:{closed_port()}", "--request-timeout", "5")

    assert result.exit_code == 2
    assert "cannot reach Kubeflow Pipelines" in result.output


def test_cli_host_from_the_environment(fake: FakeKfp, host: str, package: Path) -> None:
    result = _invoke("submit", str(package), env={"KF_PIPELINES_ENDPOINT": host})

    assert result.exit_code == 0, result.output
    assert len(fake.calls("POST", f"{API}/runs")) == 1


def test_the_spec_the_client_sends_parses_as_kfp_ir(fake: FakeKfp, host: str, package: Path) -> None:
    KfpRunClient(host).submit(package)

    sent = fake.calls("POST", f"{API}/runs")[0].body["pipeline_spec"]
    spec = json_format.ParseDict(sent, pipeline_spec_pb2.PipelineSpec())
    assert sorted(spec.root.dag.tasks) == ["ImportExampleGen", "Pusher", "Trainer"]


def test_cli_submit_to_a_silent_host_gives_up_after_the_request_timeout(package: Path) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        result = _invoke(
            "submit", str(package), "--host", f"http://127.0.0.1:{silent.getsockname()[1]}", "--request-timeout", "1"
        )
    assert result.exit_code == 2
    assert "did not answer within 1 s" in result.output
    assert time.monotonic() - started < 4


# --- the run's pipeline root and the server's version (pipeline.kubeflow.client.preflight) -------------------------


def _package(tmp_path: Path, name: str = "pipeline.yaml", **spec: Any) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec_dict(["ImportExampleGen", "Trainer"], **spec)))
    return path


def test_submit_sends_the_specs_root_as_the_runs_pipeline_root(fake: FakeKfp, host: str, tmp_path: Path) -> None:
    # KFP's driver reads the run's runtime config, never the spec's defaultPipelineRoot (root_dag.go:97).
    package = _package(tmp_path, pipeline_root="gs://bucket/tfxp/root/")

    run = KfpRunClient(host).submit(package)

    body = fake.calls("POST", f"{API}/runs")[0].body
    assert body["runtime_config"]["pipeline_root"] == "gs://bucket/tfxp/root"
    assert [config["pipeline_root"] for config in fake.runtime_configs] == ["gs://bucket/tfxp/root"]
    assert run.pipeline_root == "gs://bucket/tfxp/root"
    assert run.warnings == ()


def test_cli_pipeline_root_overrides_the_spec(fake: FakeKfp, host: str, tmp_path: Path) -> None:
    package = _package(tmp_path, pipeline_root="gs://bucket/compiled")

    result = _invoke("submit", str(package), "--host", host, "--pipeline-root", "s3://other/root")

    assert result.exit_code == 0, result.output
    assert fake.runtime_configs[0]["pipeline_root"] == "s3://other/root"
    assert "pipeline root: s3://other/root" in result.output
    # Compiled for gs://: the launcher's artifact volume is at /gcs, so the s3 copies would miss it.
    output = " ".join(result.output.split())
    assert "--pipeline-root s3://other/root is a s3:// root, but" in output
    assert "recompile with kubeflow.pipeline_root=s3://other/root" in output


def test_no_pipeline_root_is_sent_as_none_with_a_warning(fake: FakeKfp, host: str, package: Path) -> None:
    run = KfpRunClient(host).submit(package)

    assert "pipeline_root" not in fake.runtime_configs[0]
    assert run.pipeline_root == ""
    (warning,) = run.warnings
    assert warning.startswith(f"{package} has no defaultPipelineRoot and no --pipeline-root was given")
    assert "kfp-launcher ConfigMap in the run's namespace, else minio://mlpipeline/v2/artifacts" in warning
    assert "Beam on Dataflow cannot" in warning and "pass --pipeline-root gs://bucket/root" in warning
    result = _invoke("submit", str(package), "--host", host)
    assert result.exit_code == 0, result.output
    assert "warning: " in result.output and "no defaultPipelineRoot" in result.output
    assert "pipeline root: (none sent: the KFP server default)" in result.output


@pytest.mark.parametrize(
    ("spec_root", "override", "message"),
    [
        ("/data/tfxp/root", None, r"\(defaultPipelineRoot /data/tfxp/root of .*pipeline.yaml\) is a local path"),
        ("gs://bucket/root", "out/root", r"\(--pipeline-root out/root\) is a local path"),
    ],
)
def test_a_local_pipeline_root_is_refused_before_any_request(
    fake: FakeKfp, host: str, tmp_path: Path, spec_root: str, override: str | None, message: str
) -> None:
    package = _package(tmp_path, pipeline_root=spec_root)

    with pytest.raises(
        SubmitError,
        match=message + r", which the run's pods on Kubeflow cannot reach; pass --pipeline-root with a "
        r"bucket URL .* recompile with kubeflow.pipeline_root set to one \(it becomes the spec's defaultPipelineRoot\)",
    ):
        KfpRunClient(host).submit(package, pipeline_root=override)
    assert fake.requests == []


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("file:///tmp/root", r"it is a file:// URI; KFP keeps artifacts only under gs://, minio://, s3:// roots"),
        ("hdfs://namenode/tfxp", r"it is a hdfs:// URI"),
        ("mem://bucket/root", r"it is a mem:// URI"),
        ("gs://My_Bucket/root", r"the bucket name 'My_Bucket' is not one Cloud Storage allows"),
        ("s3://my_bucket/root", r"the bucket name 'my_bucket' is not one S3 or MinIO allows"),
        ("minio://mlpipeline/v2/../../etc", r"its path 'v2/\.\./\.\./etc' has an empty, \. or \.\. part"),
        ("gs:///bucket/root", r"it has a third / after gs://, so KFP finds no bucket name"),
    ],
)
def test_a_pipeline_root_kfp_cannot_use_is_refused_before_any_request(
    fake: FakeKfp, host: str, tmp_path: Path, override: str, problem: str
) -> None:
    # kubeflow/pipelines backend/src/v2/objectstore/config.go:118-139 and the stores' bucket-name rules.
    package = _package(tmp_path, pipeline_root="gs://bucket/root")

    with pytest.raises(
        SubmitError, match=rf"\(--pipeline-root .*\) is not one KFP can use: {problem}.*pass --pipeline"
    ):
        KfpRunClient(host).submit(package, pipeline_root=override)
    result = _invoke("submit", str(package), "--host", host, "--pipeline-root", override, env={TOKEN_ENV: "tok"})
    assert result.exit_code == 2, result.output
    assert "is not one KFP can use" in result.output and "Traceback" not in result.output
    assert fake.requests == []


def test_an_exit_handler_is_refused_on_a_server_older_than_2_14(fake: FakeKfp, host: str, tmp_path: Path) -> None:
    fake.tag_name = "2.5.0"
    package = _package(tmp_path, pipeline_root="gs://bucket/root", exit_handler="RunNotice")

    with pytest.raises(
        SubmitError,
        match=r"Kubeflow Pipelines at http://127.0.0.1:\d+ is version 2\.5\.0 \(healthz tag_name\), which cannot run "
        r"the pipeline's exit handler \(RunNotice, compiled from kubeflow.notify_url\): KFP 2\.5 and older refuse its "
        r"final-status input \(\"task final status not supported yet\"\) and tfxp needs KFP 2\.14 or newer for exit "
        r"handlers; upgrade KFP, or recompile without kubeflow.notify_url",
    ):
        KfpRunClient(host).submit(package)
    assert fake.api_calls() == []  # only the health check was asked
    result = _invoke("submit", str(package), "--host", host)
    assert result.exit_code == 2
    assert "recompile without kubeflow.notify_url" in result.output


@pytest.mark.parametrize("tag", ["2.14.0", "2.16.1", "v2.15.0-rc.1"])
def test_an_exit_handler_runs_on_a_server_from_2_14(fake: FakeKfp, host: str, tmp_path: Path, tag: str) -> None:
    fake.tag_name = tag
    package = _package(tmp_path, pipeline_root="gs://bucket/root", exit_handler="RunNotice")

    run = KfpRunClient(host).submit(package)

    assert run.warnings == ()
    assert "RunNotice" in run.tasks
    assert len(fake.calls("POST", f"{API}/runs")) == 1


@pytest.mark.parametrize(("tag", "reported"), [(None, "none"), ("", "none"), ("unknown", "'unknown'")])
def test_an_unknown_server_version_warns_and_goes_on(
    fake: FakeKfp, host: str, tmp_path: Path, tag: str | None, reported: str
) -> None:
    fake.tag_name = tag
    package = _package(tmp_path, pipeline_root="gs://bucket/root", exit_handler="RunNotice")

    run = KfpRunClient(host).submit(package)

    assert len(fake.calls("POST", f"{API}/runs")) == 1
    (warning,) = run.warnings
    assert warning.startswith(f"Kubeflow Pipelines at {host} did not say its version (healthz tag_name: {reported})")
    assert "exit handler (RunNotice, from kubeflow.notify_url); it needs KFP 2.14 or newer" in warning
    assert warning.endswith("going on")


def test_without_an_exit_handler_an_old_server_is_fine(fake: FakeKfp, host: str, tmp_path: Path) -> None:
    fake.tag_name = "2.5.0"

    run = KfpRunClient(host).submit(_package(tmp_path, pipeline_root="gs://bucket/root"))

    assert run.warnings == ()
    assert fake.runtime_configs[0]["pipeline_root"] == "gs://bucket/root"
    assert fake.requests[0].path == f"{API}/healthz"  # tfxp's check, before kfp.Client's own
