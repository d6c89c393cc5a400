"""`tfxp rollout ...`: the guarded rollout of one model: its status, and starting, promoting, rolling back and
analysing its canary (`serving.rollout`; the work happens there, these handlers parse options and print).

Each command reads the model's base path from the config (`output_layout(config).serving_base`) or
`--serving-base`, and records who decided: `--by NAME` for a person (`person:NAME`), the run id for a run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.table import Table
from rich.text import Text

from pipeline.cli.console import UserError, console
from pipeline.cli.options import command_group, config_command, rest_url
from pipeline.config import TfxpConfig

if TYPE_CHECKING:
    from serving.rollout.operate import RolloutTarget
    from serving.rollout.state import RolloutState

rollout_app = command_group(
    "rollout", "Guarded rollout (serving.rollout: canary): status, start, promote, rollback, analyze."
)

ServingBaseOption = Annotated[
    str | None,
    typer.Option(
        "--serving-base",
        metavar="PATH",
        help="The model's base path (<serving base>/<model>, local or gs://); default: the config's.",
    ),
]
ByOption = Annotated[str, typer.Option("--by", metavar="NAME", help="Who decides (recorded as person:NAME).")]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why, in one sentence (recorded).")]


def rollout_target(config: TfxpConfig, serving_base: str | None) -> RolloutTarget:
    """The model's rollout as the config (and `--serving-base`) name it.

    Raises:
        UserError: the config does not turn the rollout on.
    """
    from pipeline.layout import output_layout
    from serving.options import deployed_serving
    from serving.rollout.operate import RolloutTarget

    if config.serving.rollout != "canary":
        raise UserError(
            "serving.rollout is direct, so no canary is kept; set serving.rollout: canary (with "
            "serving.version_policy: specific) in the config or pass --set serving.rollout=canary "
            "--set serving.version_policy=specific"
        )
    base = serving_base or output_layout(config).serving_base
    container = deployed_serving(config.serving, base).container_base_path
    return RolloutTarget(base, container, config.serving.model_name, config.serving.canary)


def _person(by: str) -> str:
    if not by.strip():
        raise UserError("--by is empty; name who decides (recorded as person:NAME)")
    return f"person:{by.strip()}"


@rollout_app.command("status")
@config_command
def status(
    config: TfxpConfig,
    serving_base: ServingBaseOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as one JSON object.")] = False,
    last: Annotated[int, typer.Option("--last", min=0, help="Decisions shown, newest last.")] = 5,
) -> None:
    """Show the labels, the versions, the pending canary, the rolled-back versions and the last decisions."""
    from serving.rollout.actions import complete_versions
    from serving.rollout.state import read_decisions, read_rollout
    from serving.rollout.tracks import read_track

    target = rollout_target(config, serving_base)
    state = read_rollout(target.model_base)
    decisions = read_decisions(target.model_base)[-last:] if last else []
    tracks = {track: read_track(target.model_base, track) for track in ("stable", "canary")}
    body = {
        "model": target.model_name,
        "serving_base": target.model_base,
        "stable": state.stable,
        "canary": state.canary,
        "rolled_back": list(state.rolled_back),
        "versions": complete_versions(target.model_base),
        "tracks": {name: asdict(serving) if serving else None for name, serving in tracks.items()},
        "decisions": [asdict(decision) for decision in decisions],
        "edge_held": _held_edge_releases(config),
    }
    if as_json:
        print(json.dumps(body, indent=2, sort_keys=True))
        return
    _print_status(body)


def _held_edge_releases(config: TfxpConfig) -> list[str]:
    """The SavedModels whose device release waits for their promotion (`edge.held`); [] without `edge.enabled`."""
    from edge.held import held_releases
    from pipeline.layout import output_layout

    return sorted(held_releases(output_layout(config).edge_base)) if config.edge.enabled else []


def _print_status(body: dict[str, Any]) -> None:
    console.print(
        f"{body['model']} at {body['serving_base']}: stable {body['stable']}, canary {body['canary'] or 'none'}, "
        f"rolled back {', '.join(map(str, body['rolled_back'])) or 'none'}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    console.print(f"versions: {', '.join(map(str, body['versions'])) or 'none'}", highlight=False, markup=False)
    for track, serving in body["tracks"].items():
        served = f"versions {serving['versions']}, labels {serving['labels']}" if serving else "not written yet"
        console.print(f"{track} servers: {served}", highlight=False, markup=False)
    for saved_model in body["edge_held"]:
        console.print(f"edge release held until promoted: {saved_model}", highlight=False, markup=False, soft_wrap=True)
    print_decisions(body["decisions"])


def print_decisions(decisions: list[dict[str, Any]]) -> None:
    """The decisions as a table: sequence, time, action, by, before → after, reason."""
    table = Table(title="decisions", title_justify="left")
    for column in ("#", "time", "action", "by", "stable/canary", "reason"):
        table.add_column(column)
    for decision in decisions:
        before, after = decision["before"], decision["after"]
        labels = f"{before['stable']}/{before['canary']} → {after['stable']}/{after['canary']}"
        row = (decision["sequence"], decision["time"], decision["action"], decision["by"], labels, decision["reason"])
        table.add_row(*(Text(str(value)) for value in row))  # outside text: never read as markup
    console.print(table)


def _done(config: TfxpConfig, target: RolloutTarget, state: RolloutState, moves: Mapping[Any, str]) -> None:
    console.print(f"stable {state.stable}, canary {state.canary or 'none'}", highlight=False, markup=False)
    for track, line in moves.items():
        console.print(f"{track} servers: {line}", highlight=False, markup=False, soft_wrap=True)
    for line in settle_edge_releases(config, target, state):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def settle_edge_releases(config: TfxpConfig, target: RolloutTarget, state: RolloutState) -> list[str]:
    """With `edge.enabled`, publishes the held device release of the stable version and drops those of
    rolled-back ones (`edge.held`); what was done, one line each."""
    from edge.held import settle_held
    from pipeline.layout import output_layout

    if not config.edge.enabled:
        return []
    edge_base = output_layout(config).edge_base
    return [done.describe() for done in settle_held(edge_base, target.model_base, state.stable, state.rolled_back)]


@rollout_app.command("start")
@config_command
def start(
    config: TfxpConfig,
    version: Annotated[int, typer.Option("--version", min=0, help="An existing version to serve as the canary.")],
    by: ByOption,
    serving_base: ServingBaseOption = None,
    reason: ReasonOption = "",
) -> None:
    """Put an existing version onto the canary."""
    from serving.rollout import actions
    from serving.rollout.operate import sync_tracks

    target = rollout_target(config, serving_base)
    state = actions.start(target.model_base, version, _person(by), reason)
    _done(config, target, state, sync_tracks(target, state))


def _judgement_command(action: Literal["promote", "rollback"], summary: str) -> None:
    """Registers `tfxp rollout <action>`: a person promotes or rolls back the canary (`judge_canary`)."""

    @rollout_app.command(action, help=summary)
    @config_command
    def judge_by_hand(
        config: TfxpConfig,
        by: ByOption,
        serving_base: ServingBaseOption = None,
        reason: ReasonOption = "",
    ) -> None:
        from serving.rollout.actions import judge_canary
        from serving.rollout.operate import sync_tracks

        target = rollout_target(config, serving_base)
        state = judge_canary(target.model_base, action, _person(by), reason)
        _done(config, target, state, sync_tracks(target, state))


_judgement_command("promote", "Make the canary stable (the stable servers load it, then the label moves).")
_judgement_command(
    "rollback", "Take the canary off and mark it rolled back (never served, baselined or warm-started again)."
)


@rollout_app.command("sync")
@config_command
def sync(config: TfxpConfig, serving_base: ServingBaseOption = None) -> None:
    """Move each track's models.config one phase on (a label moves once its version is AVAILABLE there)."""
    from serving.rollout.operate import sync_tracks
    from serving.rollout.state import read_rollout

    target = rollout_target(config, serving_base)
    _done(config, target, read_rollout(target.model_base), sync_tracks(target))


@rollout_app.command("analyze")
@config_command
def analyze(
    config: TfxpConfig,
    serving_base: ServingBaseOption = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            "--prometheus",
            parser=rest_url,
            metavar="URL",
            help="Read the signals from this Prometheus (default: serving.canary.prometheus_url).",
        ),
    ] = None,
    window: Annotated[
        int | None, typer.Option("--window", min=10, metavar="SECONDS", help="Default: serving.canary.window_seconds.")
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option("--replay", metavar="DIR", help="Replay serving.canary.replay_samples images from this data."),
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Act on the verdict (promote, roll back, or record hold).")
    ] = False,
    by: Annotated[str, typer.Option("--by", help="Recorded as who decided.")] = "analysis",
) -> None:
    """Judge the canary against stable and decide promote, rollback or hold; --apply acts on it."""
    from serving.rollout.operate import analyze as judge_canary
    from serving.rollout.operate import apply_verdict

    target = rollout_target(config, serving_base)
    images = replay_images(replay, target.settings.replay_samples, config) if replay else []
    verdict = judge_canary(target, prometheus or target.settings.prometheus_url or None, window, images)
    console.print(f"verdict: {verdict.action}: {verdict.reason}", highlight=False, markup=False, soft_wrap=True)
    console.print_json(json.dumps(verdict.evidence))
    if apply:
        state = apply_verdict(target, verdict, by)
        console.print(f"applied: stable {state.stable}, canary {state.canary or 'none'}", highlight=False, markup=False)
        for line in settle_edge_releases(config, target, state):
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def replay_images(directory: Path, count: int, config: TfxpConfig) -> list[bytes]:
    """`count` encoded images of DIR's eval split, read as `tfxp predict --examples` reads them."""
    from pipeline.cli.predict import read_examples

    if count == 0:
        return []
    _, images, _ = read_examples(directory, count, config, None)
    return images
