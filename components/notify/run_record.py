"""The run record: what one Kubeflow run decided, written by its last task and read by its exit handler.

KFP's exit handler takes no artifacts and no DAG outputs, and a task served from KFP's cache keeps an earlier
run's artifact URIs (kubeflow/pipelines `backend/src/v2/driver/container.go`, cache hit → the cached
execution's outputs), so the handler cannot find this run's blessing or push by looking under this run's
folder. The RunReport runs on every run (it takes the run id, which changes KFP's cache key), sees every
artifact the run used, cached or not, and writes `<record dir>/<run id>.json`; the handler reads it.

"Produced by this run" is read from the artifact URIs: every output of a run lies under the run's folder, which is
the parent of each task's folder — open-source KFP `<pipeline root>/<pipeline>/<run id>/<task>/<uuid>/<output>`
(`driver/driver.go:767-778`, `metadata/client.go:420`), Vertex AI `<root>/<project number>/<job>/<task>_<id>/
<output>` — and the entrypoint's local copies keep that path (`/minio/<bucket>/...`). The RunReport, which KFP
never serves from its cache, finds the run's folder from its own output (`run_dir_of`).

Example:
    record = RunRecord.of(run_dir="minio://…/tfxp-digits/7d0c…", run_id="7d0c…", examples_uri=..., model_uri=...,
                          blessed=True, pushed_uri=..., pushed_version="1796…", pushed_path=...)
    write_run_record("gs://bucket/serving/digits/runs", record)
    read_run_record("gs://bucket/serving/digits/runs", "7d0c…").decision  # 'pushed version 1796…'
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import asdict, dataclass

from pydantic import TypeAdapter

from foundation import paths
from foundation.records import read_record

RUN_RECORDS_DIR = "runs"
"""Beside the versions under the serving base path: `<serving base>/runs/<run id>.json` (not a version)."""
NO_NEW_DATA = "no new data"


def run_dir_of(own_uri: str, task: str) -> str:
    """The run's folder from an output URI of task `task` in that run: the part before the task's folder
    (`<task>` on KFP, `<task>_<id>` on Vertex AI); "" when `task` is not a folder of `own_uri`."""
    parts = own_uri.rstrip("/").split("/")
    for index in range(len(parts) - 1, 0, -1):
        if parts[index] == task or parts[index].startswith(f"{task}_"):
            return "/".join(parts[:index])
    return ""


def produced_by_run(uri: str | None, run_dir: str) -> bool:
    """Whether the artifact at `uri` lies in the run folder `run_dir` (see the module docstring)."""
    return bool(uri and run_dir) and str(uri).startswith(f"{run_dir.rstrip('/')}/")


@dataclass(frozen=True)
class RunRecord:
    """Attributes:
    run_id: The run.
    new_data: The Examples were made by this run (False: KFP served ImportExampleGen from its cache).
    trained: The model was trained by this run.
    blessed: The Evaluator's verdict on the model this run evaluated; None without an Evaluator.
    pushed_version: The version this run pushed; None when it pushed none.
    pushed_path: That version's directory.
    decision: The run's outcome in words: `no new data`, `pushed version N`, `not blessed`, ...
    stopped_at: The task that stopped the run on purpose and wrote this record itself (the ExampleValidator on a
        drift stop: the RunReport never runs then); None when the RunReport wrote it.
    """

    run_id: str
    new_data: bool
    trained: bool
    blessed: bool | None
    pushed_version: str | None
    pushed_path: str | None
    decision: str
    stopped_at: str | None = None

    @classmethod
    def stopped(cls, run_id: str, task: str, decision: str) -> RunRecord:
        """The record of a run that task `task` stopped before training (new data, nothing trained or pushed)."""
        return cls(run_id, new_data=True, trained=False, blessed=None, pushed_version=None, pushed_path=None,
                   decision=decision, stopped_at=task)  # fmt: skip

    @classmethod
    def of(
        cls,
        run_dir: str,
        run_id: str,
        examples_uri: str | None,
        model_uri: str | None,
        blessed: bool | None,
        pushed_uri: str | None,
        pushed_version: str | None,
        pushed_path: str | None,
        published_now: bool = True,
        load_check_refusal: str | None = None,
    ) -> RunRecord:
        """The record of run `run_id`, whose outputs lie in `run_dir` (`run_dir_of`), from the URIs of the artifacts
        it used and what they say; `published_now` is False when the Pusher found the version already published (a
        rerun over the same model); `load_check_refusal` is the LoadCheck's reason when it did not bless the model
        (`components.load_check`), None when it blessed it or did not run."""
        new_data = produced_by_run(examples_uri, run_dir)
        trained = produced_by_run(model_uri, run_dir)
        pushed_now = produced_by_run(pushed_uri, run_dir) and bool(pushed_version) and published_now
        if not new_data and not trained:
            decision = f"{NO_NEW_DATA}: nothing trained (the data is unchanged; KFP served the tasks from its cache)"
        elif pushed_now:
            decision = f"pushed version {pushed_version}"
        elif blessed is False:
            decision = "not blessed: nothing pushed"
        elif load_check_refusal is not None:
            decision = f"not pushed: the load check failed: {load_check_refusal}"
        elif blessed:
            decision = "blessed; not pushed (this model is already served)"
        else:
            decision = "not pushed"
        return cls(
            run_id=run_id,
            new_data=new_data,
            trained=trained,
            blessed=blessed,
            pushed_version=pushed_version if pushed_now else None,
            pushed_path=pushed_path if pushed_now else None,
            decision=decision,
        )


_RUN_RECORD = TypeAdapter(RunRecord)


def run_key_of(run_dir: str) -> str:
    """The name a task that knows only its run's folder (`run_dir_of`) files the run's record under: the folder's
    name, which is the run id on open-source KFP (`<root>/<pipeline>/<run id>`) and the job's name on Vertex AI
    (`<root>/<project number>/<job>`, KFP's `{{$.pipeline_job_name}}`); the exit handler looks up both."""
    return posixpath.basename(run_dir.rstrip("/"))


def record_path(record_dir: str, run_id: str) -> str:
    """`<record dir>/<run id>.json`."""
    return posixpath.join(record_dir.rstrip("/"), f"{run_id}.json")


def write_run_record(record_dir: str, record: RunRecord) -> str:
    """Writes `record` (local or bucket); returns its path."""
    paths.makedirs(record_dir)
    path = record_path(record_dir, record.run_id)
    paths.write_text(path, json.dumps(asdict(record), indent=2) + "\n")
    return path


def read_run_record(record_dir: str, run_id: str) -> RunRecord | None:
    """The record of run `run_id`; None when the run wrote none (it failed before its last task).

    Raises:
        RecordError: the record is not a run record's JSON (a FIFO, too large, not JSON, fields of other types).
    """
    path = record_path(record_dir, run_id)
    if not paths.exists(path):
        return None
    return read_record(path, _RUN_RECORD, "run record", "remove it; the notice then reads the run's outputs")
