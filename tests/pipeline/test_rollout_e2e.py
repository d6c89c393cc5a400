"""`tfxp run` under `serving.rollout: canary` (LocalDagRunner): the first push becomes stable, the next one the
canary without moving stable, each after the LoadCheck served it in a real server process and blessed it; the
ServedBaseline keeps comparing with stable; the RolloutJudge runs first and,
with no evidence source reachable, records a hold; `tfxp rollout rollback` takes the canary off and records it;
a `direct` push into the base afterwards is refused, leaving the versions untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.cli import app

pytestmark = pytest.mark.e2e

CANARY = ("serving.rollout=canary", "serving.version_policy=specific")
SETTINGS = ("evaluator.min_accuracy=0", "data.drift.enabled=false")
# Device export on, kept cheap: the held release is what these tests look at, not the device model's accuracy.
EDGE = ("edge.app_client=none", "edge.max_accuracy_drop=1", "edge.representative_samples=20")


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _sets(*overrides: str) -> list[str]:
    return [part for override in overrides for part in ("--set", override)]


def _run_args(data: Path, out: Path, *overrides: str) -> list[str]:
    config = ["--config", "configs/default.yaml", "--output", str(out), "--set", f"data.path={data}"]
    return ["run", *config, *_sets(*SETTINGS, *EDGE, *overrides)]


def _edge_versions(out: Path) -> list[dict[str, Any]]:
    """The published device versions' release records (what an OTA service would see)."""
    base = out / "edge" / "digits"
    return [json.loads((path / "release.json").read_text()) for path in sorted(base.glob("[0-9]*"))]


def _run(data: Path, out: Path, *overrides: str) -> dict[str, Any]:
    _invoke(*_run_args(data, out, *overrides))
    summary: dict[str, Any] = json.loads((out / "run-summary.json").read_text())
    return summary


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("rollout")
    data, out = root / "stream", root / "out"
    for span in (1, 2):
        _invoke("data", "digits", "--out", str(data), "--spans", "2", "--span", str(span))
    # The second model trains longer on more data, so it beats the first against the baseline gate.
    first = _run(data, out, *CANARY, "data.spans=1", "trainer.train_steps=20")
    second = _run(data, out, *CANARY, "data.spans=all", "trainer.train_steps=200")
    assert second["decision"] == "pushed", second["blessing_reason"]
    return {"out": out, "data": data, "first": first, "second": second}


def _pushed(summary: dict[str, Any]) -> int:
    return int(Path(summary["pushed_model_dir"]).name)


def _status(out: Path) -> dict[str, Any]:
    text = _invoke("rollout", "status", "--json", "--set", f"pipeline.output={out}", *_sets(*CANARY, *EDGE))
    body: dict[str, Any] = json.loads(text)
    return body


def test_the_second_push_is_the_canary_and_stable_stays(two_runs: dict[str, Any]) -> None:
    first, second = two_runs["first"], two_runs["second"]
    v1, v2 = _pushed(first), _pushed(second)
    assert first["decision"] == second["decision"] == "pushed"
    assert second["served_version"] == str(v1)  # what is served outside the canary's share: stable
    assert second["rollout"]["stable"] == v1 and second["rollout"]["canary"] == v2
    assert second["rollout"]["last_decision"]["action"] == "publish"
    assert second["baseline"]["version"] == str(v1)  # compared with stable, v1
    status = _status(two_runs["out"])
    assert (status["stable"], status["canary"]) == (v1, v2)
    assert status["tracks"]["stable"] == {"versions": [v1], "labels": {"stable": v1}}
    # The canary servers load v2 first; its label waits until they report it AVAILABLE (no servers here).
    assert status["tracks"]["canary"]["labels"] == {"stable": v1}
    # The first model, stable at once, went out to devices in its own run; the canary's waits for its promotion.
    (released,) = _edge_versions(two_runs["out"])
    assert first["edge"]["status"] == "pushed"
    assert Path(first["edge_model_path"]).parent.name == first["edge"]["version"]
    assert (second["edge"]["status"], second["edge_model_path"]) == ("held", None), second["edge"]
    (held,) = status["edge_held"]
    assert held != released["saved_model"]["path"] and held.endswith("Format-Serving")
    # The second run's judge found no canary yet (the first run pushed stable): nothing to judge, nothing recorded.
    assert [(d["action"], d["by"].split(":")[0]) for d in status["decisions"]] == [("publish", "run")] * 2


def test_each_version_was_load_checked_before_it_was_published(two_runs: dict[str, Any]) -> None:
    for run in ("first", "second"):
        check = two_runs[run]["load_check"]
        assert check["passed"] is True, check["reason"]
        assert check["examples_compared"] == 64 and check["max_abs_difference"] <= 1e-4
        assert check["reason"].startswith(f"version 1 loaded in {check['server']} in ")
    # The InfraBlessing, as TFX's InfraValidator writes it, beside the result, for each run's model.
    blessings = two_runs["out"] / "tfxp-digits" / "root" / "LoadCheck" / "blessing"
    assert len(list(blessings.glob("*/INFRA_BLESSED"))) == 2
    assert not list(blessings.glob("*/INFRA_NOT_BLESSED"))
    results = [json.loads(path.read_text()) for path in sorted(blessings.glob("*/load_check.json"))]
    assert [result["passed"] for result in results] == [True, True]


def test_rollback_takes_the_canary_off_for_good(two_runs: dict[str, Any]) -> None:
    out = two_runs["out"]
    v1, v2 = _pushed(two_runs["first"]), _pushed(two_runs["second"])
    _invoke(
        "rollout",
        "rollback",
        "--by",
        "ana",
        "--reason",
        "p99 doubled",
        "--set",
        f"pipeline.output={out}",
        *_sets(*CANARY, *EDGE),
    )
    status = _status(out)
    assert (status["stable"], status["canary"], status["rolled_back"]) == (v1, None, [v2])
    # The canary's device release is dropped with it: devices never got it.
    assert status["edge_held"] == []
    assert len(_edge_versions(out)) == 1
    last = status["decisions"][-1]
    assert (last["action"], last["by"], last["reason"]) == ("rollback", "person:ana", "p99 doubled")
    assert last["before"] == {"stable": v1, "canary": v2} and last["after"] == {"stable": v1, "canary": None}


def test_a_direct_push_into_a_rollout_base_is_refused(two_runs: dict[str, Any]) -> None:
    out, serving = two_runs["out"], two_runs["out"] / "serving" / "digits"
    before = sorted(p.name for p in serving.iterdir() if p.name.isdigit())
    result = CliRunner().invoke(app, _run_args(two_runs["data"], out, "data.spans=all", "trainer.train_steps=61"))
    assert result.exit_code != 0
    assert "serving.rollout is direct" in " ".join(result.output.split()), result.output
    assert sorted(p.name for p in serving.iterdir() if p.name.isdigit()) == before
