"""The pure checks behind `tfxp schedule`, `tfxp submit --param` and `tfxp pipeline upload`: KFP's cron form,
intervals, time windows, run parameters read from a compiled spec, the spec's content digest, the server's version
and the spec's exit handler."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kfp_fake import spec_dict

from pipeline.kubeflow.client.cron import (
    ScheduleInputError,
    Trigger,
    format_seconds,
    parse_cron,
    parse_duration,
    parse_time,
    rfc3339,
)
from pipeline.kubeflow.client.pipelines import default_version_name, doc_from_api, spec_digest
from pipeline.kubeflow.client.preflight import ServerInfo, parse_version
from pipeline.kubeflow.compiler.params import ParamError, parse_param_entries, pipeline_parameters, typed_arguments
from pipeline.kubeflow.compiler.spec import exit_handler_tasks, load_pipeline_doc

PARAMETERS = {
    "train_steps": {"parameterType": "NUMBER_INTEGER", "defaultValue": 300},
    "min_accuracy": {"parameterType": "NUMBER_DOUBLE", "defaultValue": 0.8},
    "data_path": {"parameterType": "STRING", "defaultValue": "gs://bucket/digits"},
    "warm_start": {"parameterType": "BOOLEAN", "defaultValue": False},
}
NOW = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(spec_dict(["ImportExampleGen", "Trainer", "Pusher"], PARAMETERS)))
    return path


# --- cron, intervals, windows -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("0 0 2 * * *", "0 0 2 * * *"),
        ("30 2 * * 1", "0 30 2 * * 1"),  # a crontab line: second 0 prepended
        ("*/15 * * * *", "0 */15 * * * *"),
        ("0 0 9 ? * MON-FRI", "0 0 9 ? * MON-FRI"),
        ("0 0 0 1,15 jan-jun/2 *", "0 0 0 1,15 jan-jun/2 *"),
        ("5/15  0-30/5 1-3 * * 0,6", "5/15 0-30/5 1-3 * * 0,6"),
        ("@daily", "@daily"),
        ("0 0 */13 * *", "0 0 0 */13 * *"),  # a step of 13 in the day of month: legal (13 ≤ 31)
    ],
)
def test_cron_expressions_kfp_accepts(given: str, expected: str) -> None:
    parsed = parse_cron(given)

    assert parsed.expression == expected
    assert parsed.converted == (len(given.split()) == 5)


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("6h", 21600),
        ("1d", 86400),
        ("1w", 604800),
        ("1h30m", 5400),
        (" 2H ", 7200),
        ("366d", 31622400),
    ],
)
def test_intervals(given: str, seconds: int) -> None:
    assert parse_duration(given) == seconds


REFUSED_CRONS = [
    ("0 0 * *", "has 4 fields; KFP takes six"),
    ("0 0 0 * * * 2025", "has 7 fields"),
    ("60 * * * *", r"the minute field '60': 60 is outside 0-59"),
    ("0 24 * * *", r"the hour field '24': 24 is outside 0-23"),
    ("0 0 0 * *", r"the day of month field '0': 0 is outside 1-31"),
    ("0 0 1 13 *", r"the month field '13': 13 is outside 1-12"),
    ("0 0 * * 7", r"the day of week field '7': 7 is outside 0-6 \(Sunday is 0\)"),
    ("0 MON * * *", r"the hour field 'MON': 'MON' is not a number;"),
    ("0 0 * * FRI-MON", r"the range 'FRI-MON' runs backwards"),
    ("*/0 * * * *", r"the step in '\*/0' must be a positive number"),
    ("*/x * * * *", r"the step in '\*/x' must be a positive number"),
    ("1-2-3 * * * *", r"'1-2-3' has more than one -"),
    ("0 0 L * *", r"'L' is not a number; .*no L, W or #"),
    ("1,,2 * * * *", "has an empty list item"),
    ("@every 1h", "use --every"),
    ("@fortnightly", "not a descriptor KFP knows"),
    # numbers are ASCII digits and bounded (issue 24)
    ("*/99999999999999999999 * * * *", "has 20 digits"),
    ("0 */61 * * * *", "the step 61 in '\\*/61' is larger than the field's 60 values"),
    ("\u0665 * * * *", "only ASCII digits 0-9 count"),  # Arabic-Indic five
    ("0 \u00b2 * * *", "only ASCII digits 0-9 count"),  # superscript two
    ("0 0 1 1 \u0661", "only ASCII digits 0-9 count"),
    ("*/\u0665 * * * *", "must be a positive number of ASCII digits"),
    ("0 0 1-\u0663 * *", "only ASCII digits 0-9 count"),
]
"""Cron expressions KFP refuses (or would misread), with what the error says."""

REFUSED_INTERVALS = [
    ("30", "is not an interval; write a number and a unit"),
    ("", "is not an interval"),
    ("-5m", "is not an interval"),
    ("1.5h", "is not an interval"),
    ("5y", "unknown unit y"),
    ("30s", "is 30 s; .* use at least 60 s"),
    ("0m", "is 0 s"),
    # numbers are ASCII digits and bounded (issue 24)
    ("99999999999999999999w", "a number that long is no interval"),
    ("400d", "longer than the longest interval, 366d"),
    ("53w", "longer than the longest interval"),
    ("\u0661h", "is not an interval"),
    ("\u0661\u0662h", "is not an interval"),
    ("1\u00b2h", "is not an interval"),
]
"""Intervals KFP refuses, with what the error says."""


@pytest.mark.parametrize(
    ("parse", "given", "message"),
    [(parse_cron, *case) for case in REFUSED_CRONS] + [(parse_duration, *case) for case in REFUSED_INTERVALS],
)
def test_schedule_inputs_kfp_refuses_fail_saying_what_is_wrong(
    parse: Callable[[str], object], given: str, message: str
) -> None:
    with pytest.raises(ScheduleInputError, match=message):
        parse(given)


def test_format_seconds_is_the_inverse_of_parse_duration() -> None:
    assert [format_seconds(parse_duration(text)) for text in ("90s", "6h", "1d", "1h30m", "8d")] == [
        "1m30s",
        "6h",
        "1d",
        "1h30m",
        "1w1d",
    ]


def test_trigger_window_is_utc_rfc3339_and_checked() -> None:
    trigger = Trigger.make(every="6h", start="2025-02-01", end="2025-03-01T12:00:00+02:00", now=NOW)

    assert (trigger.interval_seconds, trigger.cron) == (21600, None)
    assert (trigger.start, trigger.end) == ("2025-02-01T00:00:00Z", "2025-03-01T10:00:00Z")
    assert trigger.describe() == "every 6h from 2025-02-01T00:00:00Z until 2025-03-01T10:00:00Z"
    with pytest.raises(ScheduleInputError, match=r"exactly one of --cron EXPR .* and --every DURATION"):
        Trigger.make(now=NOW)
    with pytest.raises(ScheduleInputError, match="exactly one of"):
        Trigger.make(cron="@daily", every="1d", now=NOW)
    with pytest.raises(ScheduleInputError, match="--end 2025-01-31 is not after --start 2025-02-01"):
        Trigger.make(every="1d", start="2025-02-01", end="2025-01-31", now=NOW)
    with pytest.raises(ScheduleInputError, match="--end 2024-12-31 is in the past"):
        Trigger.make(every="1d", end="2024-12-31", now=NOW)
    with pytest.raises(ScheduleInputError, match="--start 'tomorrow' is not a date or time; use ISO 8601"):
        Trigger.make(every="1d", start="tomorrow", now=NOW)


def test_times_in_the_form_the_messages_suggest_are_accepted() -> None:
    # The refusal's own example, and KFP's RFC 3339 form with `Z` (which datetime.fromisoformat reads from 3.11 on).
    with pytest.raises(ScheduleInputError) as refused:
        parse_time("yesterday")
    suggested = re.search(r"e\.g\. (\S+) or (\S+) ", str(refused.value))
    assert suggested is not None, str(refused.value)
    times = [rfc3339(parse_time(text)) for text in suggested.groups()]
    assert times == ["2025-01-31T00:00:00Z", "2025-01-31T02:00:00Z"]
    assert parse_time("2026-12-06T10:00:00Z") == datetime.datetime(2026, 12, 6, 10, tzinfo=datetime.UTC)
    assert parse_time("2026-12-06T12:00:00+02:00") == parse_time("2026-12-06T10:00:00Z")
    assert Trigger.make(every="1d", start="2026-12-06T10:00:00Z", now=NOW).start == "2026-12-06T10:00:00Z"


# --- run parameters -----------------------------------------------------------------------------------------


def test_pipeline_parameters_are_read_from_the_root_input_definitions() -> None:
    spec = spec_dict(["Trainer"], {**PARAMETERS, "span": {"type": "INT"}, "labels": {"parameterType": "LIST"}})
    spec["root"]["inputDefinitions"]["parameters"]["labels"]["isOptional"] = True

    parameters = pipeline_parameters(spec)

    assert {name: p.type for name, p in parameters.items()} == {
        "train_steps": "NUMBER_INTEGER",
        "min_accuracy": "NUMBER_DOUBLE",
        "data_path": "STRING",
        "warm_start": "BOOLEAN",
        "span": "NUMBER_INTEGER",  # the old `type` field
        "labels": "LIST",
    }
    assert parameters["train_steps"].describe() == "train_steps (NUMBER_INTEGER, default 300)"
    assert parameters["span"].required and not parameters["labels"].required
    # The API's form for a version with a platform document.
    assert pipeline_parameters({"pipeline_spec": spec, "platform_spec": {}}) == parameters
    assert pipeline_parameters(spec_dict(["Trainer"])) == {}


def test_params_are_typed_from_the_spec() -> None:
    parameters = pipeline_parameters(spec_dict(["Trainer"], PARAMETERS))
    raw = parse_param_entries(["train_steps=500", "min_accuracy=0.9", "warm_start=TRUE", "data_path=gs://b/x=1"])

    assert typed_arguments(raw, parameters) == {
        "train_steps": 500,
        "min_accuracy": 0.9,
        "warm_start": True,
        "data_path": "gs://b/x=1",
    }


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("train_steps=1.5", r"train_steps is NUMBER_INTEGER, so the value must be a whole number"),
        ("train_steps=", r"train_steps is NUMBER_INTEGER"),
        ("min_accuracy=high", r"min_accuracy is NUMBER_DOUBLE, so the value must be a number"),
        ("min_accuracy=nan", r"min_accuracy is NUMBER_DOUBLE"),
        ("warm_start=yes", r"warm_start is BOOLEAN, so the value must be true or false"),
        (
            "train_step=5",
            r"--param train_step: pipeline p has no such parameter; its parameters: data_path \(STRING, default "
            r"\"gs://bucket/digits\"\); min_accuracy \(NUMBER_DOUBLE, default 0.8\); train_steps \(NUMBER_INTEGER, "
            r"default 300\); warm_start \(BOOLEAN, default false\)",
        ),
    ],
)
def test_bad_params_name_the_expected_type_or_the_valid_names(entry: str, message: str) -> None:
    parameters = pipeline_parameters(spec_dict(["Trainer"], PARAMETERS))

    with pytest.raises(ParamError, match=message):
        typed_arguments(parse_param_entries([entry]), parameters, "pipeline p")


def test_param_entry_syntax_and_required_parameters() -> None:
    with pytest.raises(ParamError, match="'train_steps' is not NAME=VALUE"):
        parse_param_entries(["train_steps"])
    with pytest.raises(ParamError, match="train_steps is given twice"):
        parse_param_entries(["train_steps=1", "train_steps=2"])
    with pytest.raises(ParamError, match="declares no run parameters"):
        typed_arguments({"x": "1"}, {})
    required = pipeline_parameters(spec_dict(["Trainer"], {"span": {"parameterType": "NUMBER_INTEGER"}}))
    with pytest.raises(ParamError, match=r"needs a value for span \(NUMBER_INTEGER, required\); pass --param span="):
        typed_arguments({}, required)
    lists = pipeline_parameters(spec_dict(["T"], {"xs": {"parameterType": "LIST"}, "o": {"parameterType": "STRUCT"}}))
    assert typed_arguments({"xs": '["a", 1]', "o": '{"k": 2}'}, lists) == {"xs": ["a", 1], "o": {"k": 2}}
    with pytest.raises(ParamError, match="xs is LIST, so the value must be a JSON list"):
        typed_arguments({"xs": '{"k": 2}', "o": "{}"}, lists)


# --- spec digests -------------------------------------------------------------------------------------------


def test_the_spec_digest_follows_content_not_formatting(tmp_path: Path, package: Path) -> None:
    spec = spec_dict(["ImportExampleGen", "Trainer", "Pusher"], PARAMETERS)
    reordered = tmp_path / "reordered.yaml"
    reordered.write_text("# compiled by tfxp\n" + yaml.safe_dump(dict(reversed(spec.items())), sort_keys=False))
    spec["deploymentSpec"]["executors"]["Trainer_executor"]["container"]["image"] = "registry.example.com/tfxp:0.2.0"
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(spec))

    original = load_pipeline_doc(package)
    assert spec_digest(load_pipeline_doc(reordered)) == spec_digest(original)
    assert spec_digest(load_pipeline_doc(changed)) != spec_digest(original)
    assert default_version_name(original) == "sha-" + spec_digest(original)[:12]
    # What the API returns (a Struct: integers come back as doubles) has the same digest.
    from_api = yaml.safe_load(package.read_text())
    from_api["root"]["inputDefinitions"]["parameters"]["train_steps"]["defaultValue"] = 300.0
    restored = doc_from_api(from_api)
    assert restored is not None and spec_digest(restored) == spec_digest(original)
    assert doc_from_api(None) is None and doc_from_api({"nonsense": 1}) is None


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('train_args={"num_step": 40}', r'expected TFX TrainArgs as JSON, e.g. \{"num_steps": 500\}'),
        ("train_args=notjson", r"expected TFX TrainArgs as JSON"),
        ('train_args={"num_steps": -5}', r"num_steps must be at least 1"),
        ("spans=none", r"compiled for span folders: use latest, all or a number"),
        ("spans=newest", r"data.spans = 'newest': expected"),
        ("data_path= ", r"is empty"),
    ],
)
def test_tfxp_run_parameters_are_checked_beyond_their_kfp_type(entry: str, message: str) -> None:
    # The compiled spec's own run parameters (pipeline.kubeflow.compiler.component_setup.RUN_PARAMETERS): a typo in
    # train_args would otherwise be ignored by the Trainer and a bad span policy fail hours later in the pod.
    declared = {name: {"parameterType": "STRING", "defaultValue": ""} for name in ("train_args", "spans", "data_path")}
    parameters = pipeline_parameters(spec_dict(["Trainer"], declared))
    with pytest.raises(ParamError, match=message):
        typed_arguments(parse_param_entries([entry]), parameters, "pipeline p")
    assert typed_arguments({"train_args": '{"num_steps": 40}', "spans": "3"}, parameters) == {
        "train_args": '{"num_steps": 40}',
        "spans": "3",
    }


# --- the server's version, the spec's exit handler ----------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("2.5.0", (2, 5, 0)),
        ("2.14", (2, 14, 0)),
        ("v2.16.1", (2, 16, 1)),
        ("2.15.0-rc.1", (2, 15, 0)),
        (" 2.17.0\n", (2, 17, 0)),
        ("unknown", None),
        ("", None),
        ("master-55ec846", None),
        ("2", None),
    ],
)
def test_parse_version(tag: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(tag) == expected


def test_server_info_reads_what_healthz_answers() -> None:
    # backend/src/apiserver/main.go's healthzResponse: commit_sha, tag_name, multi_user, pipeline_store.
    info = ServerInfo.from_healthz({"commit_sha": "abc", "tag_name": "2.5.0", "multi_user": True, "pipeline_store": ""})
    assert info == ServerInfo(tag_name="2.5.0", commit_sha="abc", multi_user=True)
    assert info.version == (2, 5, 0)
    # The proto-only answer (multi_user alone) and odd types are an unknown version, not an error.
    assert ServerInfo.from_healthz({"multi_user": False}).version is None
    assert ServerInfo.from_healthz({"tag_name": 2.5, "multi_user": "yes"}) == ServerInfo()


def test_exit_handler_tasks_are_the_tasks_with_a_final_status_input(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(spec_dict(["Trainer", "Pusher"])))
    notify = tmp_path / "notify.yaml"
    notify.write_text(yaml.safe_dump(spec_dict(["Trainer", "Pusher"], exit_handler="RunNotice")))

    assert exit_handler_tasks(load_pipeline_doc(plain).pipeline_spec) == []
    assert exit_handler_tasks(load_pipeline_doc(notify).pipeline_spec) == ["RunNotice"]
