"""A model's rollout state: which version is `stable`, which is the `canary`, which were rolled back, and the
append-only record of every decision that moved them.

The state lives beside the versions (`serving.rollout.layout`): `tfxp_rollout/state.json` holds the labels and the
last decision; `tfxp_rollout/decisions/<sequence>.json` holds each decision, created once and never rewritten. A
decision is made inside one store transaction (`serving.rollout.store`): read the state, decide, write the state
under its precondition, then create the decision's file. A writer that crashes between the two leaves the
decision inside `state.json`; the next writer files it before its own (`_file_last_decision`).

What the rest of tfxp reads here:
- `stable_version`: what ServedBaseline, warm start, the KFP cache fingerprint and the drift checks take as "the
  served model" under `serving.rollout: canary` (`components.baseline.served.find_served_model`);
- `RolloutState.rolled_back`: versions never served, baselined, warm-started or promoted again.

Example:
    state = read_rollout("tfxp_output/serving/digits")
    state.stable, state.canary  # 1796083574, 1796090000
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from Python 3.12

from foundation import paths
from foundation.errors import TfxpError
from foundation.records import RecordError, parse_record, read_record
from serving.rollout.layout import DECISIONS_DIR, ROLLOUT_DIR, STATE_FILE, rollout_dir
from serving.rollout.store import ConcurrentRolloutError, RolloutStore, Transaction, open_store

SCHEMA = 1
# A decision that lost a race is retried from a fresh read this many times.
ATTEMPTS = 5


class RolloutStateError(TfxpError, ValueError):
    """The rollout state file cannot be read, or a change is not allowed; the message says how to go on."""


Version = Annotated[int, Field(strict=True, ge=0)]


class Labels(TypedDict):
    """A decision's `before` or `after`, as `RolloutState.labels` writes it: both keys, each a version or None
    (read back through pydantic, so a record without `canary` is one message, not a KeyError where it is shown)."""

    stable: Version | None
    canary: Version | None


@dataclass(frozen=True)
class Decision:  # read back through pydantic (`_DECISION`): field types checked
    """One decision, as recorded.

    Attributes:
        sequence: 1, 2, ... in the order decisions landed (the file name under `decisions/`).
        action: `publish` (a pushed version became stable or canary), `start`, `promote`, `rollback`, `hold`,
            `prune` (retention removed versions).
        by: Who or what decided: `run:<run id>`, `analysis`, or a person's `--by`.
        reason: One sentence.
        before: `{"stable": v, "canary": v}` before it.
        after: The same after it.
        evidence: What the analysis measured (empty for a person's decision).
        thresholds: The `serving.canary` bounds it was measured against.
        time: UTC, ISO 8601.
    """

    sequence: int
    action: str
    by: str
    reason: str
    before: Labels
    after: Labels
    evidence: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    time: str = ""

    __pydantic_config__ = ConfigDict(allow_inf_nan=False)


_DECISION = TypeAdapter(Decision)


class StateFile(BaseModel):
    """`state.json` as written: `RolloutState`'s fields and the schema number."""

    schema_: Literal[1] = Field(alias="schema")  # SCHEMA
    stable: Version | None = None
    canary: Version | None = None
    rolled_back: list[Version] = Field(default_factory=list)
    sequence: Version = 0
    last_decision: Decision | None = None


_STATE_FIX = (
    f"it is tfxp's own file under {ROLLOUT_DIR}/: restore it from the last decision under "
    f"{ROLLOUT_DIR}/{DECISIONS_DIR}/ (its `after`), or remove it to start the rollout afresh (the next push "
    "becomes stable)"
)


@dataclass(frozen=True)
class RolloutState:
    """The labels of one model's versions under `serving.rollout: canary`.

    Attributes:
        stable: The version every request goes to that the canary does not take; None before the first push.
        canary: The version under judgement; None when there is none (the canary servers then serve stable).
        rolled_back: Versions taken off as canaries, oldest first; never served or baselined again.
        sequence: The last decision's sequence (0 = none yet).
        last_decision: That decision, kept here too so a crash before its file is written loses nothing.
    """

    stable: int | None = None
    canary: int | None = None
    rolled_back: tuple[int, ...] = ()
    sequence: int = 0
    last_decision: Decision | None = None

    def labels(self) -> Labels:
        """`{"stable": …, "canary": …}`, as decisions record them."""
        return Labels(stable=self.stable, canary=self.canary)

    def decide(
        self,
        action: str,
        by: str,
        reason: str,
        evidence: Mapping[str, Any] | None = None,
        thresholds: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> RolloutState:
        """This state after one more decision: `changes` (stable, canary, rolled_back) applied, the decision
        recorded with its before and after."""
        after = replace(self, **changes)
        decision = Decision(
            sequence=self.sequence + 1,
            action=action,
            by=by,
            reason=reason,
            before=self.labels(),
            after=after.labels(),
            evidence=dict(evidence or {}),
            thresholds=dict(thresholds or {}),
            time=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        )
        return replace(after, sequence=decision.sequence, last_decision=decision)


def read_rollout(model_base: str) -> RolloutState:
    """The rollout state of the model at `model_base`; an empty state when none was written yet.

    A plain read (no lock, nothing created): the state file is replaced whole, by a rename locally and as one
    object on a bucket, so a reader sees the old state or the new one.
    """
    path = f"{rollout_dir(model_base)}/{STATE_FILE}"
    try:
        return _state(read_record(path, StateFile, "the rollout state", _STATE_FIX))
    except FileNotFoundError:
        return RolloutState()
    except RecordError as error:
        raise RolloutStateError(str(error)) from None


def rollout_summary(model_base: str) -> dict[str, Any]:
    """The rollout as the run summary and the run notice carry it: `stable`, `canary`, `rolled_back` and the last
    decision's `action`, `by` and `reason`; `{"error": ...}` when the state cannot be read (said, not raised: a
    run's record never fails on it)."""
    try:
        state = read_rollout(model_base)
    except RolloutStateError as error:
        return {"error": str(error)}
    last = state.last_decision
    return {
        "stable": state.stable,
        "canary": state.canary,
        "rolled_back": list(state.rolled_back),
        "last_decision": {"action": last.action, "by": last.by, "reason": last.reason} if last else None,
    }


def describe_rollout(summary: Mapping[str, Any]) -> str:
    """`rollout_summary` in words: `stable 5, canary 7; last decision: publish by run:x: <reason>`."""
    if summary.get("error"):
        return f"state not readable: {summary['error']}"
    words = f"stable {summary.get('stable')}, canary {summary.get('canary') or 'none'}"
    if summary.get("rolled_back"):
        words += f", rolled back {', '.join(map(str, summary['rolled_back']))}"
    last = summary.get("last_decision")
    return words + (f"; last decision: {last['action']} by {last['by']}: {last['reason']}" if last else "")


def stable_version(model_base: str) -> int | None:
    """The `stable` version of the model at `model_base` (None: no rollout state, or no stable yet)."""
    return read_rollout(model_base).stable


def refuse_direct_push_over_rollout(model_base: str) -> None:
    """Refuses a `serving.rollout: direct` push into a base whose servers follow a rollout state: they serve what
    the state says, so the push would never take traffic (`tfxp run` checks before it starts, the Pusher again).

    Raises:
        RolloutStateError: the base has a rollout state with a stable version.
    """
    state = read_rollout(model_base)
    if state.stable is not None:
        raise RolloutStateError(
            f"{model_base} holds a rollout state ({ROLLOUT_DIR}/: stable {state.stable}, canary {state.canary}) but "
            "serving.rollout is direct: its servers serve what the state says, so a push would never take "
            f"traffic; set serving.rollout: canary (and serving.version_policy: specific), or remove "
            f"{model_base}/{ROLLOUT_DIR} to serve the newest version again"
        )


def read_decisions(model_base: str) -> list[Decision]:
    """Every recorded decision, oldest first.

    Raises:
        RolloutStateError: a decision's file cannot be read as one (the message names it).
    """
    folder = f"{rollout_dir(model_base)}/{DECISIONS_DIR}"
    if not paths.is_dir(folder):
        return []
    names = sorted(name for name in paths.list_dir(folder) if name.endswith(".json"))
    return [_read_decision(f"{folder}/{name}") for name in names]


def _read_decision(path: str) -> Decision:
    fix = (
        f"it is tfxp's own record under {ROLLOUT_DIR}/{DECISIONS_DIR}/: restore it from a backup, or remove it (the "
        f"state in {STATE_FILE} does not depend on it; only the history loses that decision)"
    )
    try:
        return read_record(path, _DECISION, "the rollout decision", fix)
    except (RecordError, FileNotFoundError) as error:  # FileNotFoundError: removed since it was listed
        raise RolloutStateError(str(error)) from None


def update_rollout(
    model_base: str, change: Callable[[RolloutState], RolloutState | None], store: RolloutStore | None = None
) -> RolloutState:
    """Applies `change` to the current state and records its decision, retrying from a fresh read when another
    writer landed first.

    Args:
        model_base: The model's base path (local or `gs://`).
        change: The current state → the new one (made with `RolloutState.decide`), or None to change nothing.

    Returns:
        The state as written (the current one when `change` returned None).

    Raises:
        RolloutStateError: `change` refused, or the state cannot be read.
        ConcurrentRolloutError: still losing races after `ATTEMPTS` tries.
    """
    # Decided once on a plain read first: a refused change (no canary to promote) raises before anything is
    # created, and a change of nothing takes no lock. Under the lock it is decided again on the current state.
    if store is None:  # a store passed in (tests' bucket doubles) is read only through itself
        if change(read_rollout(model_base)) is None:
            return read_rollout(model_base)
        store = open_store(model_base)
    for attempt in range(ATTEMPTS):
        try:
            with store.transaction() as transaction:
                return _update_once(transaction, store.location, change)
        except ConcurrentRolloutError:
            if attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _update_once(
    transaction: Transaction, location: str, change: Callable[[RolloutState], RolloutState | None]
) -> RolloutState:
    text, token = transaction.read(STATE_FILE)
    current = _parse(text, f"{location}/{STATE_FILE}")
    _file_last_decision(transaction, current)
    new = change(current)
    if new is None or new == current:
        return current
    transaction.write(STATE_FILE, _render(new), token)
    _file_last_decision(transaction, new)
    return new


def _file_last_decision(transaction: Transaction, state: RolloutState) -> None:
    decision = state.last_decision
    if decision is None:
        return
    name = f"{DECISIONS_DIR}/{decision.sequence:08d}.json"
    present, _ = transaction.read(name)
    if present is None:
        transaction.write(name, json.dumps(asdict(decision), indent=2, sort_keys=True) + "\n", None)


def _render(state: RolloutState) -> str:
    body = {"schema": SCHEMA, **asdict(state)}
    body["rolled_back"] = list(state.rolled_back)
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


def _parse(text: str | None, where: str) -> RolloutState:
    if text is None:
        return RolloutState()
    try:
        return _state(parse_record(text, StateFile, f"the rollout state {where}", _STATE_FIX))
    except RecordError as error:
        raise RolloutStateError(str(error)) from None


def _state(body: StateFile) -> RolloutState:
    return RolloutState(
        stable=body.stable,
        canary=body.canary,
        rolled_back=tuple(body.rolled_back),
        sequence=body.sequence,
        last_decision=body.last_decision,
    )
