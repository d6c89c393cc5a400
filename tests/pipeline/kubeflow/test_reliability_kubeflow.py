"""The Kubeflow side against hostile or careless peers and files (issue 24), one block per class:

- credentials go to the --host given only: a redirect to another origin is refused (tfxp's own health check);
- every KFP call has a whole-call deadline: a server that trickles its answer fails within --request-timeout;
- YAML aliases and nesting are bounded in every user file tfxp reads (config, compiled spec, manifests);
- a 2xx answer that is not what the endpoint returns stops the command, naming the endpoint and what came back;
- cron triggers KFP would accept but never fire as meant are refused or warned;
- run-spec checks the whole spec before its first task.

Servers are local (tests/support/kfp_fake.py, and small socket servers here).
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from http_double import json_answer, moved, recording, redirect_to
from kfp_fake import API, FakeKfp, spec_dict
from trickling_server import trickling_server
from typer.testing import CliRunner

from components.notify.notice import post_notice
from foundation.yaml_files import MAX_ALIASES, YamlLimitError, load_yaml, load_yaml_all
from pipeline.cli import app
from pipeline.config import ConfigError, load_config
from pipeline.kubeflow.client.auth import TOKEN_ENV, KfpAuth, RedirectRefusedError, check_api
from pipeline.kubeflow.client.cron import ScheduleInputError, Trigger, parse_cron
from pipeline.kubeflow.compiler.spec import SpecPatchError, load_pipeline_doc
from pipeline.kubeflow.emulator.local_run import run_spec
from pipeline.kubeflow.emulator.spec_check import find_cycles
from pipeline.kubeflow.emulator.spec_run import RunSpecError
from serving.k8s_check import load_manifests

pytestmark = pytest.mark.usefixtures("no_kfp_credentials")


def _invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250", **(env or {})})
    return result.exit_code, " ".join(result.output.split())


def _package(tmp_path: Path, text: str | None = None) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(spec_dict(["Trainer", "Pusher"])))
    return path


# --- credentials only to the host given -------------------------------------------------------------------------


HEALTHZ = b'{"commit_sha": "abc", "tag_name": "2.16.0", "multi_user": false}'


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("target", ["other port", "other host name", "https on the same port"])
def test_a_redirect_to_another_origin_gets_no_credentials(status: int, target: str) -> None:
    location: dict[str, str] = {}
    with (
        recording(json_answer(HEALTHZ)) as (other, other_seen),
        recording(lambda request: (status, {"Location": location["to"]}, b"")) as (kfp, _),
    ):
        kfp_port, other_port = kfp.rsplit(":", 1)[1], other.rsplit(":", 1)[1]
        location["to"] = {
            "other port": f"{other}{API}/healthz",
            "other host name": f"http://localhost:{other_port}{API}/healthz",
            "https on the same port": f"https://127.0.0.1:{kfp_port}{API}/healthz",
        }[target]
        auth = KfpAuth(token="secret-token", cookie="authservice_session=secret")
        with pytest.raises(RedirectRefusedError, match="another origin; tfxp sends the KFP credentials only"):
            check_api(kfp, auth, timeout=5)
    assert other_seen == []  # refused before any request to the other origin


def test_a_redirect_within_the_origin_is_followed_with_the_credentials() -> None:
    healthz_moved = moved(
        f"{API}/healthz", "/moved/healthz", 302, then=(200, {"Content-Type": "application/json"}, HEALTHZ)
    )
    with recording(healthz_moved) as (kfp, seen):
        answer = check_api(kfp, KfpAuth(token="secret-token"), timeout=5)
    assert answer["tag_name"] == "2.16.0"
    assert [(request.path, request.headers.get("authorization")) for request in seen] == [
        (f"{API}/healthz", "Bearer secret-token"),
        ("/moved/healthz", "Bearer secret-token"),
    ]


@pytest.mark.parametrize("command", [["runs", "list"], ["pipeline", "list"], ["schedule", "list"]])
def test_commands_refuse_a_redirect_elsewhere_and_say_so(command: list[str]) -> None:
    with (
        recording(json_answer(HEALTHZ)) as (other, other_seen),
        recording(redirect_to(f"{other}/login", 302)) as (kfp, _),
    ):
        code, output = _invoke(*command, "--host", kfp, env={TOKEN_ENV: "secret-token"})
    assert code == 2
    assert f"a redirect to {other}/login, another origin" in output and "--host" in output
    assert other_seen == []


# --- whole-call deadlines -----------------------------------------------------------------------------------------


def _kfp_body(path: str) -> bytes:
    return HEALTHZ if path.endswith("/healthz") else b"{}"


@pytest.mark.parametrize("part", ["header", "body"])
@pytest.mark.parametrize(
    ("slow_path", "command"),
    [
        (f"{API}/healthz", ["runs", "list"]),
        (f"{API}/healthz", ["schedule", "list"]),
        (f"{API}/runs", ["runs", "list"]),
        (f"{API}/pipelines", ["pipeline", "list"]),
    ],
)
def test_a_trickling_server_fails_within_the_request_timeout(part: str, slow_path: str, command: list[str]) -> None:
    with trickling_server(slow_path, part, _kfp_body) as url:
        started = time.monotonic()
        code, output = _invoke(*command, "--host", url, "--request-timeout", "1.5")
        elapsed = time.monotonic() - started
    assert code == 2
    assert f"Kubeflow Pipelines at {url} did not answer within 1.5 s" in output
    assert "--request-timeout" in output
    assert elapsed < 1.5 + 1.5


def test_a_trickling_notice_receiver_fails_within_the_timeout() -> None:
    # The status line and headers trickle (the body is never read: the status is all the notice needs).
    with trickling_server("/hook", "header", _kfp_body) as url:
        started = time.monotonic()
        result = post_notice(f"{url}/hook", {"text": "run failed"}, timeout=1.0)
        elapsed = time.monotonic() - started
    assert not result.delivered and "no answer within 1 s" in result.error
    assert elapsed < 2.0


# --- YAML aliases and nesting ---------------------------------------------------------------------------------


def _bomb(levels: int = 5) -> str:
    """A flow list of anchored lists, each aliasing the one before nine times: 9**levels leaves once expanded."""
    items = ["&l0 [x, x, x, x, x, x, x, x, x]"]
    items += [f"&l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "[" + ", ".join(items) + "]"


def test_an_alias_bomb_in_a_config_names_the_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "bomb.yaml"
    config.write_text(f"trainer:\n  train_steps: 10\nkubeflow:\n  image: {_bomb()}\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match=rf"config file {config}, line 4: YAML aliases .* expand to more than"):
        load_config(config)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &a [1, *a]\n", r"line 1: the alias \*a is inside its own anchor &a"),
        ("a: &a {b: *a}\n", r"line 1: the alias \*a is inside its own anchor &a"),
        ("a: " + "[" * 300 + "]" * 300 + "\n", r"line 1: lists and mappings nest deeper than 200 levels"),
        ("a: &x 1\nb: [" + ", ".join(["*x"] * (MAX_ALIASES + 1)) + "]\n", r"line 2: more than 100 YAML aliases"),
        ("x: " + _bomb(3) + "\ny: " + _bomb(3).replace("&l", "&m").replace("*l", "*m"), "expand to more than"),
        ("a: &a " + "x" * 100_000 + "\nb: [" + ", ".join(["*a"] * 20) + "]\n", "line 2: YAML aliases .* expand"),
        (
            "a: &a {k: ["
            + ", ".join(["x"] * 50)
            + "]}\nb: &b {<<: *a, j: ["
            + ", ".join(["*a"] * 60)
            + "]}\nc: [*b, *b, *b, *b]\n",
            "expand to more than",
        ),
    ],
)
def test_recursive_deep_and_many_aliases_are_refused(text: str, message: str) -> None:
    with pytest.raises(YamlLimitError, match=message):
        load_yaml(text, "f.yaml")


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path: Path) -> None:
    text = "base: &base {train_steps: 5, batch_size: 8}\ntrainer:\n  <<: *base\n  train_steps: 7\n"
    assert load_yaml(text, "c.yaml")["trainer"] == {"train_steps": 7, "batch_size": 8}
    assert load_yaml_all("a: &a [1, 2]\nb: *a\n---\nc: 3\n", "c.yaml") == [{"a": [1, 2], "b": [1, 2]}, {"c": 3}]
    config = tmp_path / "anchors.yaml"
    config.write_text("trainer: &t {train_steps: 5}\nedge: {}\n")
    assert load_config(config).trainer.train_steps == 5


def _bomb_spec(tmp_path: Path) -> Path:
    parameters = {"steps": {"parameterType": "LIST", "defaultValue": "BOMB"}}
    text = yaml.safe_dump(spec_dict(["Trainer", "Pusher"], parameters)).replace(
        "defaultValue: BOMB", "defaultValue: " + _bomb()
    )
    return _package(tmp_path, text)


def test_a_spec_with_an_alias_bomb_is_refused_by_every_reader(tmp_path: Path) -> None:
    package = _bomb_spec(tmp_path)
    with pytest.raises(SpecPatchError, match=rf"{package}, line \d+: YAML aliases"):
        load_pipeline_doc(package)
    with pytest.raises(SpecPatchError, match="YAML aliases"):
        run_spec(package, state_dir=tmp_path / "state")
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["submit", "{package}"],
        ["pipeline", "upload", "{package}"],
        ["schedule", "create", "{package}", "--every", "1h"],
    ],
)
def test_nothing_is_sent_for_a_spec_with_an_alias_bomb(
    fake: FakeKfp, host: str, tmp_path: Path, command: list[str]
) -> None:
    package = _bomb_spec(tmp_path)
    code, output = _invoke(*[part.replace("{package}", str(package)) for part in command], "--host", host)
    assert code == 2
    assert "YAML aliases" in output and str(package) in output
    assert fake.api_calls() == []


def test_run_spec_cli_refuses_the_bomb_in_one_message(tmp_path: Path) -> None:
    package = _bomb_spec(tmp_path)
    code, output = _invoke("run-spec", str(package), "--state", str(tmp_path / "state"))
    assert code != 0 and "YAML aliases" in output and "Traceback" not in output


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("trainer:\n  train_steps: 5\ndata:\n  path: x\ntrainer:\n  batch_size: 8\n", 5, "'trainer'"),
        ("trainer:\n  train_steps: 5\n  train_steps: 50\n", 3, "'train_steps'"),
        ("serving: {grpc_port: 1, grpc_port: 2}\n", 1, "'grpc_port'"),
    ],
    ids=["section", "key", "flow"],
)
def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path: Path, text: str, line: int, key: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"config file .*config.yaml, line {line}: the key {key} is written twice"):
        load_config(path)


def test_merged_keys_may_be_overridden_and_equal_looking_keys_of_other_types_are_distinct() -> None:
    assert load_yaml("d: &d {x: 1, y: 2}\ne:\n  <<: *d\n  x: 3\n", "t")["e"] == {"x": 3, "y": 2}
    assert load_yaml("1: a\n'1': b\n", "t") == {1: "a", "1": "b"}


def test_manifests_with_an_alias_bomb_are_refused(tmp_path: Path) -> None:
    (tmp_path / "kubernetes").mkdir()
    (tmp_path / "kubernetes" / "deployment.yaml").write_text(f"kind: Deployment\nspec: {_bomb()}\n")
    with pytest.raises(YamlLimitError, match=r"deployment.yaml, line 2"):
        load_manifests(tmp_path)


# --- answers that are not what the endpoint returns -------------------------------------------------------------

HTML = (200, "text/html", b"<html><body>Sign in to continue</body></html>")


@pytest.mark.parametrize(
    ("endpoint", "command"),
    [
        (("POST", f"{API}/runs"), ["submit", "{package}"]),
        (("GET", f"{API}/experiments"), ["submit", "{package}"]),
        (("POST", f"{API}/experiments"), ["schedule", "create", "{package}", "--every", "1h"]),
        (("POST", f"{API}/recurringruns"), ["schedule", "create", "{package}", "--every", "1h"]),
        (("GET", f"{API}/pipelines"), ["pipeline", "upload", "{package}"]),
        (("POST", f"{API}/pipelines"), ["pipeline", "upload", "{package}"]),
        (("POST", f"{API}/pipelines/upload_version"), ["pipeline", "upload", "{package}"]),
        (("GET", f"{API}/runs"), ["runs", "list"]),
        (("GET", f"{API}/recurringruns"), ["schedule", "list"]),
    ],
)
def test_a_page_instead_of_json_stops_the_command_naming_the_endpoint(
    fake: FakeKfp, host: str, tmp_path: Path, endpoint: tuple[str, str], command: list[str]
) -> None:
    fake.raw_answers[endpoint] = HTML
    package = _package(tmp_path)
    code, output = _invoke(*[part.replace("{package}", str(package)) for part in command], "--host", host)
    assert code == 2
    assert f"answered {endpoint[0]} {endpoint[1]} with HTTP 200 (text/html) '<html><body>Sign in" in output
    assert "None" not in output
    index = next(i for i, r in enumerate(fake.requests) if (r.method, r.path) == endpoint)
    assert fake.requests[index + 1 :] == []  # nothing sent after the bad answer (no pipelineid=None, no "None")


@pytest.mark.parametrize(
    ("endpoint", "command", "field"),
    [
        (("POST", f"{API}/runs"), ["submit", "{package}"], "run_id"),
        (("POST", f"{API}/experiments"), ["submit", "{package}"], "experiment_id"),
        (("POST", f"{API}/pipelines"), ["pipeline", "upload", "{package}"], "pipeline_id"),
        (("POST", f"{API}/pipelines/upload_version"), ["pipeline", "upload", "{package}"], "pipeline_id"),
        (("POST", f"{API}/recurringruns"), ["schedule", "create", "{package}", "--every", "1h"], "recurring_run_id"),
    ],
)
def test_an_answer_without_the_id_tfxp_needs_stops_the_command(
    fake: FakeKfp, host: str, tmp_path: Path, endpoint: tuple[str, str], command: list[str], field: str
) -> None:
    fake.raw_answers[endpoint] = (200, "application/json", b"{}")
    package = _package(tmp_path)
    code, output = _invoke(*[part.replace("{package}", str(package)) for part in command], "--host", host)
    assert code == 2
    assert f"answered {endpoint[0]} {endpoint[1]} with {field} = no value" in output
    assert "run id: None" not in output and "pipelineid=None" not in str(fake.requests)


# --- cron triggers ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 0 30 2 *", "day 30 does not exist in Feb"),
        ("0 0 0 31 2 ?", "day 31 does not exist in Feb"),
        ("0 0 31 4 *", "day 31 does not exist in Apr"),
        ("0 0 31 4,6,9,11 *", "day 31 does not exist in Apr, Jun, Sep, Nov"),
        ("0 0 30,31 FEB *", "day 30, 31 does not exist in Feb"),
        ("0 0 31 2-4/2 *", "day 31 does not exist in Feb, Apr"),
        ("0 0 31 9 */2", "day 31 does not exist in Sep"),  # a stepped * still ANDs (robfig's star bit)
    ],
)
def test_dates_that_do_not_exist_are_refused(cron: str, message: str) -> None:
    with pytest.raises(ScheduleInputError, match=f"names no real date: {message}"):
        parse_cron(cron)


@pytest.mark.parametrize("cron", ["0 0 31 1,4 *", "0 0 30 2 1", "0 0 31 * *", "0 0 28 2 *", "@monthly"])
def test_dates_that_exist_in_some_chosen_month_are_accepted(cron: str) -> None:
    assert parse_cron(cron).warnings == ()


def test_february_29_is_warned() -> None:
    assert parse_cron("0 0 29 2 *").warnings == (
        "--cron '0 0 29 2 *' fires only on February 29, so once every four years",
    )


def test_a_past_start_with_catch_up_is_warned() -> None:
    now = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
    trigger = Trigger.make(every="1d", start="2026-01-01", now=now)
    (warning,) = trigger.warnings(catchup=True, now=now)
    assert "--start 2026-01-01T00:00:00Z is in the past and catch-up is on" in warning
    assert "about 59 runs" in warning and "--no-catchup" in warning
    assert trigger.warnings(catchup=False, now=now) == []
    assert Trigger.make(cron="0 2 * * *", start="2026-01-01", now=now).warnings(catchup=True, now=now)
    assert Trigger.make(every="1d", start="2099-01-01", now=now).warnings(catchup=True, now=now) == []


def test_schedule_create_prints_the_past_start_warning(fake: FakeKfp, host: str, tmp_path: Path) -> None:
    package = _package(tmp_path)
    code, output = _invoke("schedule", "create", str(package), "--host", host, "--every", "6h", "--start", "2020-01-01")
    assert code == 0, output
    assert "is in the past and catch-up is on" in output
    code, output = _invoke(
        "schedule", "create", str(package), "--host", host, "--every", "6h", "--start", "2020-01-01", "--no-catchup"
    )
    assert code == 0 and "is in the past" not in output


# --- run-spec checks the whole spec first ---------------------------------------------------------------------


def _failing_spec(tasks: list[str], **changes: Any) -> dict[str, Any]:
    spec = spec_dict(tasks, changes.pop("parameters", None))
    for executor in spec["deploymentSpec"]["executors"].values():
        executor["container"]["command"] = ["python", "-c", "import sys; sys.exit(1)"]
    return spec


def _run_and_refuse(tmp_path: Path, spec: dict[str, Any], *messages: str) -> str:
    ran: list[str] = []
    with pytest.raises(RunSpecError) as raised:
        run_spec(_package(tmp_path, yaml.safe_dump(spec)), on_task=lambda task: ran.append(task.name),
                 state_dir=tmp_path / "state")  # fmt: skip
    assert ran == []  # refused before the first task
    for message in messages:
        assert message in str(raised.value)
    return str(raised.value)


def test_an_unknown_dependency_is_named_before_any_task(tmp_path: Path) -> None:
    spec = _failing_spec(["Alpha", "Beta"])
    spec["root"]["dag"]["tasks"]["Alpha"]["dependentTasks"] = ["Gamma"]
    _run_and_refuse(
        tmp_path, spec, "task Alpha depends on Gamma, which is not a task of the root DAG (its tasks: Alpha, Beta)"
    )


def test_an_unknown_producer_component_and_executor_are_all_named(tmp_path: Path) -> None:
    spec = _failing_spec(["Alpha", "Beta", "Gamma"])
    tasks = spec["root"]["dag"]["tasks"]
    tasks["Beta"]["inputs"] = {
        "artifacts": {"data": {"taskOutputArtifact": {"producerTask": "Nope", "outputArtifactKey": "x"}}}
    }
    tasks["Gamma"]["componentRef"] = {"name": "Missing"}
    spec["components"]["Alpha"]["executorLabel"] = "exec-missing"
    message = _run_and_refuse(
        tmp_path,
        spec,
        "(3 problems)",
        "task Beta: input artifact data comes from task Nope, which is not a task of the root DAG",
        "task Gamma runs component Missing, which the spec does not have",
        "task Alpha runs a missing executor (exec-missing)",
    )
    assert "Traceback" not in message


@pytest.mark.parametrize(
    ("tasks", "dependencies", "cycle", "innocent"),
    [
        (["A", "B", "C"], {"A": ["B"], "B": ["A"], "C": ["B"]}, "A → B → A", ["C"]),
        (["A", "B", "C", "D"], {"B": ["A", "D"], "C": ["B"], "D": ["C"]}, "B → D → C → B", ["A"]),
        (["A", "B"], {"A": ["A"]}, "A → A", ["B"]),
    ],
)
def test_a_cycle_names_only_its_tasks(
    tmp_path: Path, tasks: list[str], dependencies: dict[str, list[str]], cycle: str, innocent: list[str]
) -> None:
    spec = _failing_spec(tasks)
    for name, task in spec["root"]["dag"]["tasks"].items():
        task["dependentTasks"] = dependencies.get(name, [])
    message = _run_and_refuse(tmp_path, spec, f"the tasks {cycle} depend on each other in a cycle (each waits")
    cycle_text = message.split("the tasks ", 1)[1].split(" depend", 1)[0]
    assert not set(innocent) & set(cycle_text.split(" → "))


def test_two_cycles_are_named_apart() -> None:
    cycles = find_cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}, "e": {"a", "c"}})
    assert cycles == [["a", "b", "a"], ["c", "d", "c"]]


@pytest.mark.parametrize(
    ("kind", "default", "message"),
    [
        (
            "NUMBER_INTEGER",
            "many",
            'the default of pipeline parameter steps is "many", but it is declared NUMBER_INTEGER',
        ),
        ("NUMBER_INTEGER", 2.5, "is 2.5, but it is declared NUMBER_INTEGER, so it must be a whole number"),
        ("BOOLEAN", "yes", "declared BOOLEAN, so it must be true or false"),
        ("LIST", {"a": 1}, "declared LIST, so it must be a list"),
        ("NUMBER_DOUBLE", "0.5", "declared NUMBER_DOUBLE"),
    ],
)
def test_a_default_of_the_wrong_type_is_refused(tmp_path: Path, kind: str, default: Any, message: str) -> None:
    spec = _failing_spec(["Alpha"], parameters={"steps": {"parameterType": kind, "defaultValue": default}})
    _run_and_refuse(tmp_path, spec, message)


def test_a_constant_input_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    spec = _failing_spec(["Alpha"])
    spec["components"]["Alpha"]["inputDefinitions"] = {"parameters": {"count": {"parameterType": "NUMBER_INTEGER"}}}
    spec["root"]["dag"]["tasks"]["Alpha"]["inputs"] = {"parameters": {"count": {"runtimeValue": {"constant": "ten"}}}}
    _run_and_refuse(
        tmp_path, spec, 'task Alpha: the constant of input count is "ten", but it is declared NUMBER_INTEGER'
    )


def test_an_input_its_dag_does_not_declare_is_refused(tmp_path: Path) -> None:
    spec = _failing_spec(["Alpha"])
    spec["root"]["dag"]["tasks"]["Alpha"]["inputs"] = {"parameters": {"count": {"componentInputParameter": "cuont"}}}
    _run_and_refuse(tmp_path, spec, "task Alpha: input parameter count takes cuont, which its DAG does not declare")


def test_a_dag_that_runs_itself_is_refused(tmp_path: Path) -> None:
    spec = _failing_spec(["Alpha"])
    inner = {"Inner": {"componentRef": {"name": "loop"}, "taskInfo": {"name": "Inner"}}}
    spec["components"]["loop"] = {"dag": {"tasks": inner}}
    spec["root"]["dag"]["tasks"]["Alpha"]["componentRef"] = {"name": "loop"}
    _run_and_refuse(tmp_path, spec, "task Inner (in DAG loop) runs DAG loop inside itself")
