"""A rollout-state writer for a spawned process: this module imports the rollout state alone, so each process
`multiprocessing`'s spawn starts imports it in well under a second (a target defined in a test module would make
every process import that module's imports, TFX among them, for ~8 s each)."""

from __future__ import annotations

from serving.rollout.state import update_rollout


def record_many(base: str, writer: str, count: int) -> None:
    """Record `count` hold decisions by `writer`, each its own locked read-modify-write of the state."""
    for index in range(count):
        update_rollout(base, lambda state, i=index: state.decide("hold", f"{writer}", f"{writer} {i}"))
