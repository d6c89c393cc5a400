"""The rollout state: moves and their records, concurrent writers (local lock, bucket generations), two-phase
track writes and retention."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from google.api_core.exceptions import PreconditionFailed
from rollout_writers import record_many

from components.notify.component import notice_rollout
from components.notify.notice import notice_text, parse_final_status, run_outcome
from foundation.errors import TfxpError
from serving.rollout import actions
from serving.rollout.layout import rollout_dir
from serving.rollout.state import RolloutState, RolloutStateError, read_decisions, read_rollout, update_rollout
from serving.rollout.store import GcsStore, open_store
from serving.rollout.tracks import TrackServing, advance_tracks, read_track


def _versions(base: Path, *versions: int) -> None:
    for version in versions:
        (base / str(version)).mkdir(parents=True)
        (base / str(version) / "saved_model.pb").write_bytes(b"x")


def test_first_push_is_stable_later_ones_canary_and_promote_records_before_and_after(tmp_path: Path) -> None:
    base = str(tmp_path)
    assert actions.publish_version_state(base, 1, by="run:a").stable == 1
    state = actions.publish_version_state(base, 2, by="run:b")
    assert (state.stable, state.canary) == (1, 2)
    state = actions.judge_canary(base, "promote", by="person:ana", reason="good")
    assert (state.stable, state.canary) == (2, None)
    decisions = read_decisions(base)
    assert [d.action for d in decisions] == ["publish", "publish", "promote"]
    assert decisions[-1].before == {"stable": 1, "canary": 2}
    assert decisions[-1].after == {"stable": 2, "canary": None}
    assert decisions[-1].by == "person:ana"
    assert read_rollout(base) == state


def test_a_rolled_back_version_is_never_published_or_started_again(tmp_path: Path) -> None:
    base = str(tmp_path)
    _versions(tmp_path, 1, 2)
    actions.publish_version_state(base, 1, by="run:a")
    actions.publish_version_state(base, 2, by="run:b")
    state = actions.judge_canary(base, "rollback", by="analysis", reason="disagrees with stable")
    assert (state.stable, state.canary, state.rolled_back) == (1, None, (2,))
    assert actions.publish_version_state(base, 2, by="run:rerun").canary is None
    with pytest.raises(RolloutStateError, match=r"rolled back.*never served again"):
        actions.start(base, 2, by="person:ana")


def test_the_run_notice_says_the_rollout_after_the_run(tmp_path: Path) -> None:
    base = str(tmp_path / "digits")
    assert notice_rollout(base) is None  # no rollout state: serving.rollout direct, nothing said
    actions.publish_version_state(base, 1, by="run:a")
    actions.publish_version_state(base, 2, by="run:b")
    actions.judge_canary(base, "rollback", by="analysis", reason="agreement 0.40 < 0.90")
    words = notice_rollout(base)
    assert words == "stable 1, canary none, rolled back 2; last decision: rollback by analysis: agreement 0.40 < 0.90"
    outcome = run_outcome(parse_final_status({"state": "COMPLETE"}), run_id="r-7", rollout=words)
    assert notice_text("tfxp-digits", outcome).endswith(f"rollout: {words}")
    (tmp_path / "digits" / "tfxp_rollout" / "state.json").write_text("{not json")
    assert str(notice_rollout(base)).startswith("state not readable: ")


def test_moves_that_make_no_sense_are_refused_naming_the_state(tmp_path: Path) -> None:
    base = str(tmp_path)
    with pytest.raises(RolloutStateError, match="no canary to promote"):
        actions.judge_canary(base, "promote", by="x")
    _versions(tmp_path, 5)
    with pytest.raises(RolloutStateError, match="no stable version yet"):
        actions.start(base, 5, by="x")
    with pytest.raises(RolloutStateError, match=r"not a complete version.*it has: 5"):
        actions.start(base, 6, by="x")


def test_a_corrupt_state_file_is_refused_with_the_way_out(tmp_path: Path) -> None:
    Path(rollout_dir(str(tmp_path))).mkdir()
    (Path(rollout_dir(str(tmp_path))) / "state.json").write_text("{not json")
    with pytest.raises(RolloutStateError, match="restore it from the last decision"):
        read_rollout(str(tmp_path))


def test_concurrent_local_writers_lose_no_decision(tmp_path: Path) -> None:
    # Three OS processes, each taking the lock in turn; the target lives in a module of its own so that a spawned
    # process imports the rollout state alone, not this module's imports (TFX).
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=record_many, args=(str(tmp_path), f"w{n}", 15)) for n in range(3)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    decisions = read_decisions(str(tmp_path))
    assert [d.sequence for d in decisions] == list(range(1, 46))
    assert sorted(d.reason for d in decisions) == sorted(f"w{n} {i}" for n in range(3) for i in range(15))


class _Blob:
    """google-cloud-storage's Blob, as far as the store uses it: generation preconditions as Cloud Storage
    applies them (0 = must not exist; otherwise the live generation must match)."""

    def __init__(self, bucket: _Bucket, name: str) -> None:
        self.bucket, self.name = bucket, name

    @property
    def generation(self) -> int:
        return self.bucket.objects[self.name][1]

    def download_as_bytes(self, if_generation_match: int | None = None) -> bytes:
        data, generation = self.bucket.objects[self.name]
        if if_generation_match is not None and if_generation_match != generation:
            raise PreconditionFailed("generation")
        return data

    def upload_from_string(self, text: str, content_type: str = "", if_generation_match: int | None = None) -> None:
        live = self.bucket.objects.get(self.name, (b"", 0))[1]
        if self.bucket.before_write:
            self.bucket.before_write(self.name)
        live_now = self.bucket.objects.get(self.name, (b"", 0))[1]
        if if_generation_match is not None and if_generation_match != live_now:
            raise PreconditionFailed(f"{self.name}: generation {live_now}, expected {if_generation_match}")
        del live
        self.bucket.counter += 1
        self.bucket.objects[self.name] = (text.encode(), self.bucket.counter)


class _Bucket:
    def __init__(self) -> None:
        self.name = "bucket"
        self.objects: dict[str, tuple[bytes, int]] = {}
        self.counter = 0
        self.before_write: Any = None

    def blob(self, name: str) -> _Blob:
        return _Blob(self, name)

    def get_blob(self, name: str) -> _Blob | None:
        return _Blob(self, name) if name in self.objects else None

    def list_blobs(self, prefix: str) -> list[_Blob]:
        return [_Blob(self, name) for name in sorted(self.objects) if name.startswith(prefix)]


class _Client:
    def __init__(self) -> None:
        self.bucket_ = _Bucket()

    def bucket(self, name: str) -> _Bucket:
        return self.bucket_


def test_a_bucket_writer_that_loses_the_race_retries_from_a_fresh_read() -> None:
    client = _Client()
    store = GcsStore("gs://bucket/serving/digits/tfxp_rollout", client)
    update_rollout("gs://bucket/serving/digits", lambda s: s.decide("publish", "a", "first", stable=1), store)
    raced = []

    def another_writer_lands_first(name: str) -> None:
        if name.endswith("state.json") and not raced:
            raced.append(name)
            rival = GcsStore("gs://bucket/serving/digits/tfxp_rollout", client)
            update_rollout("gs://bucket/serving/digits", lambda s: s.decide("publish", "b", "rival", canary=2), rival)

    client.bucket_.before_write = another_writer_lands_first
    state = update_rollout("gs://bucket/serving/digits", lambda s: s.decide("hold", "a", "mine"), store)
    client.bucket_.before_write = None
    assert (state.stable, state.canary, state.sequence) == (1, 2, 3)  # the rival's canary kept, mine on top
    decisions = [
        json.loads(client.bucket_.objects[name][0]) for name in sorted(client.bucket_.objects) if "/decisions/" in name
    ]
    assert [(d["sequence"], d["reason"]) for d in decisions] == [(1, "first"), (2, "rival"), (3, "mine")]


def test_other_bucket_schemes_are_refused_naming_the_ones_that_work() -> None:
    with pytest.raises(TfxpError, match=r"s3:// has none tfxp uses.*gs://"):
        open_store("s3://bucket/serving/digits")


def test_a_crash_between_state_and_decision_file_loses_no_record(tmp_path: Path) -> None:
    base = str(tmp_path)
    actions.publish_version_state(base, 1, by="run:a")
    decisions_dir = Path(rollout_dir(base)) / "decisions"
    (decisions_dir / "00000001.json").unlink()  # as if the writer died after state.json
    actions.publish_version_state(base, 2, by="run:b")
    assert [d.sequence for d in read_decisions(base)] == [1, 2]


def test_a_promotion_reaches_a_track_in_two_phases(tmp_path: Path) -> None:
    base = str(tmp_path)
    state = RolloutState(stable=1)
    advance_tracks(base, "/models/digits", "digits", state, available={})
    assert read_track(base, "stable") == TrackServing((1,), {"stable": 1})
    promoted = RolloutState(stable=2)
    report = advance_tracks(base, "/models/digits", "digits", promoted, available={"stable": {1}})
    assert read_track(base, "stable") == TrackServing((1, 2), {"stable": 1}), report  # phase 1: load 2
    report = advance_tracks(base, "/models/digits", "digits", promoted, available={"stable": {1}})
    assert "waiting for version 2" in report["stable"]
    assert read_track(base, "stable") == TrackServing((1, 2), {"stable": 1})
    advance_tracks(base, "/models/digits", "digits", promoted, available={"stable": {1, 2}})
    assert read_track(base, "stable") == TrackServing((2,), {"stable": 2})  # phase 2: the label moves


def test_the_canary_servers_serve_stable_when_there_is_no_canary(tmp_path: Path) -> None:
    base = str(tmp_path)
    advance_tracks(base, "/m", "digits", RolloutState(stable=1, canary=2), available={})
    assert read_track(base, "canary") == TrackServing((2,), {"canary": 2})
    rolled = RolloutState(stable=1, rolled_back=(2,))
    advance_tracks(base, "/m", "digits", rolled, available={"canary": {2}})
    advance_tracks(base, "/m", "digits", rolled, available={"canary": {1, 2}})
    assert read_track(base, "canary") == TrackServing((1,), {"stable": 1})


def test_retention_keeps_labelled_and_in_flight_versions(tmp_path: Path) -> None:
    base = str(tmp_path)
    _versions(tmp_path, 1, 2, 3, 4, 5, 6)
    update_rollout(base, lambda s: s.decide("publish", "a", "x", stable=5, canary=6))
    advance_tracks(base, "/m", "digits", RolloutState(stable=1), available={})  # a track still names 1
    assert actions.prune(base, keep=1, by="run:a") == [2, 3]
    assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == [1, 4, 5, 6]
    assert json.loads((Path(rollout_dir(base)) / "decisions" / "00000002.json").read_text())["action"] == "prune"
