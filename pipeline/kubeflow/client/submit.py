"""Submits a compiled pipeline to Kubeflow Pipelines, waits for the run, and lists, terminates and retries runs:
`KfpRunClient`, a `pipeline.kubeflow.client.connection.KfpConnection` with the run operations (the client the CLI
hands to `.pipelines` and `.schedules` too).

The deadlines and errors of every call are the connection's; run states and the wait loop are in
`pipeline.kubeflow.client.runs`.

Example:
    client = KfpRunClient("http://localhost:8080", auth=KfpAuth.from_env())
    run = client.submit(Path("pipeline.yaml"), experiment="tfxp")
    final = client.wait(run.run_id, timeout=6 * 3600)
"""

from __future__ import annotations

import datetime
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.kubeflow.client.answers import require_id
from pipeline.kubeflow.client.auth import run_url
from pipeline.kubeflow.client.connection import KfpConnection
from pipeline.kubeflow.client.runs import (
    FINAL_STATES,
    RETRYABLE_STATES,
    RunStatus,
    RunSummary,
    StatusCallback,
    SubmitError,
    SubmittedRun,
    run_status,
    run_summary,
    wait_for_run,
)
from pipeline.kubeflow.compiler.params import pipeline_parameters, typed_arguments
from pipeline.kubeflow.compiler.spec import PipelineDoc, load_pipeline_doc, pipeline_tasks, write_pipeline_doc


def read_package(package: Path) -> PipelineDoc:
    """Reads a compiled pipeline file that kfp.Client can send.

    Raises:
        SubmitError: the file is missing, not `.yaml`/`.yml`, or not a KFP pipeline spec.
    """
    if not package.is_file():
        raise SubmitError(f"pipeline file {package} does not exist; make it with `tfxp compile --out {package}`")
    if package.suffix not in (".yaml", ".yml"):
        raise SubmitError(
            f"{package}: kfp.Client accepts .yaml/.yml pipeline files; recompile with --out pipeline.yaml"
        )
    try:
        return load_pipeline_doc(package)
    except ValueError as error:
        raise SubmitError(str(error)) from None


def disable_caching(doc: PipelineDoc) -> None:
    """Turns KFP caching off for every task, in the root DAG and in nested DAGs (an exit handler's pipeline)."""
    dags = [doc.pipeline_spec.root.dag, *(component.dag for component in doc.pipeline_spec.components.values())]
    for dag in dags:
        for task in dag.tasks.values():
            task.caching_options.enable_cache = False


class KfpRunClient(KfpConnection):
    """Creates runs from compiled pipeline files and polls them, with deadlines and clear errors.

    Takes the arguments of `KfpConnection` (host, namespace, auth, request_timeout) and raises what it raises.
    """

    def submit(
        self,
        package: Path,
        *,
        experiment: str | None = None,
        run_name: str | None = None,
        params: Mapping[str, str] | None = None,
        enable_caching: bool | None = None,
        pipeline_root: str | None = None,
    ) -> SubmittedRun:
        """Creates a run from a compiled pipeline file (`create_run_from_pipeline_package`).

        Args:
            package: The `.yaml` pipeline from `tfxp compile`.
            experiment: Experiment name; default the pipeline's name. Created when missing.
            run_name: Run name; default `<pipeline>-<UTC time>`.
            params: Run parameters as `name → text`, checked against the pipeline's declared parameters and
                typed before anything is sent.
            enable_caching: False runs every task afresh (tasks of nested DAGs too); None keeps the compiled
                caching options.
            pipeline_root: The run's pipeline root (a bucket URL); None = the spec's `defaultPipelineRoot`. KFP's
                driver reads only the run's root, not the spec's (see `pipeline.kubeflow.client.preflight`).

        Returns:
            The run's id, UI URL, experiment, pipeline root and warnings.

        Raises:
            SubmitError: the file is not a compiled pipeline, its root is a local path, the host is unreachable
                or silent, the credentials are refused, the server is too old for the spec's exit handler, or the
                API answers with an error.
            ParamError: a parameter the pipeline does not declare, or a value of the wrong type.
        """
        doc = read_package(package)
        name = doc.pipeline_spec.pipeline_info.name
        arguments = typed_arguments(params or {}, pipeline_parameters(doc.to_dicts()[0]), f"pipeline {name}")
        experiment = experiment or name
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        run_name = run_name or f"{name}-{stamp}"
        root, notes = self.preflight(doc.pipeline_spec, str(package), pipeline_root)
        options = {
            "arguments": arguments,
            "run_name": run_name,
            "experiment_name": experiment,
            "namespace": self.namespace,
            "pipeline_root": root,
            "enable_caching": enable_caching,
        }
        result = self._create_run(doc, package, options)
        run_id = require_id(result.run_id, "run_id", "POST /apis/v2beta1/runs", self.host)
        return SubmittedRun(
            run_id=run_id,
            url=run_url(self.host, run_id),
            experiment=experiment,
            tasks=tuple(sorted(pipeline_tasks(doc.pipeline_spec))),
            pipeline_root=root or "",
            warnings=tuple(notes),
        )

    def _create_run(self, doc: PipelineDoc, package: Path, options: Mapping[str, Any]) -> Any:
        """`create_run_from_pipeline_package` with `options`; with caching off, from a copy of `package` whose every
        task is uncached."""
        client = self.api()

        def create(path: Path) -> Any:
            return self.call("creating the run", lambda: client.create_run_from_pipeline_package(str(path), **options))

        if options["enable_caching"] is not False:
            return create(package)
        # kfp's own override reaches only the root DAG's tasks; an exit handler nests the pipeline in a sub-DAG.
        disable_caching(doc)
        with tempfile.TemporaryDirectory(prefix="tfxp-submit-") as folder:
            uncached = Path(folder) / package.name
            write_pipeline_doc(doc, uncached)
            return create(uncached)

    def _missing_run(self, run_id: str) -> str:
        return f"no run {run_id} at {self.host}; list the runs with `tfxp runs list --host {self.host}`"

    def _get_run(self, run_id: str, seconds: float | None = None) -> Any:
        client = self.api()
        return self.call(f"reading run {run_id}", lambda: client.get_run(run_id), seconds, self._missing_run(run_id))

    def status(self, run_id: str, seconds: float | None = None) -> RunStatus:
        """Polls the run once (`GET /apis/v2beta1/runs/{run_id}`).

        Raises:
            SubmitError: as `submit`, or no such run.
        """
        return run_status(self._get_run(run_id, seconds))

    def describe(self, run_id: str) -> tuple[RunSummary, RunStatus]:
        """The run's summary and status, from one request.

        Raises:
            SubmitError: as `status`.
        """
        run = self._get_run(run_id)
        return run_summary(run), run_status(run)

    def list_runs(self, *, experiment: str | None = None, limit: int = 20) -> list[RunSummary]:
        """The newest runs, newest first.

        Args:
            experiment: Only this experiment's runs; default all the namespace's runs.
            limit: At most this many.

        Raises:
            SubmitError: no such experiment, or as `call`.
        """
        response = self.list_newest("listing runs", self.api().list_runs, experiment=experiment, limit=limit)
        return [run_summary(run) for run in response.runs or []]

    def terminate(self, run_id: str) -> RunSummary:
        """Asks KFP to stop a run that has not ended (its pods are deleted; the state becomes CANCELED).

        Returns:
            The run as it was before the request.

        Raises:
            SubmitError: no such run, the run has already ended, or as `call`.
        """
        summary, _ = self.describe(run_id)
        if summary.state in FINAL_STATES:
            raise SubmitError(f"run {run_id} already ended {summary.state}; there is nothing to terminate")
        client = self.api()
        self.call(f"terminating run {run_id}", lambda: client.terminate_run(run_id), missing=self._missing_run(run_id))
        return summary

    def retry(self, run_id: str) -> RunSummary:
        """Asks KFP to rerun a failed or terminated run's unfinished tasks in place (same run id).

        Returns:
            The run as it was before the request.

        Raises:
            SubmitError: no such run, a run that is not FAILED or CANCELED, or as `call`.
        """
        summary, _ = self.describe(run_id)
        if summary.state not in RETRYABLE_STATES:
            raise SubmitError(
                f"run {run_id} is {summary.state}; only a run that ended {' or '.join(sorted(RETRYABLE_STATES))} "
                "can be retried (submit the pipeline again for a new run)"
            )
        client = self.api()
        # kfp.Client has no retry method; its generated RunService API (`client.runs`) does.
        self.call(
            f"retrying run {run_id}",
            lambda: client.runs.run_service_retry_run(run_id=run_id),
            missing=self._missing_run(run_id),
        )
        return summary

    def wait(
        self,
        run_id: str,
        *,
        timeout: float,
        poll_seconds: float = 10.0,
        on_status: StatusCallback | None = None,
    ) -> RunStatus:
        """Polls until the run finishes; see `wait_for_run`."""

        def poll(remaining: float) -> RunStatus:
            return self.status(run_id, seconds=min(self.request_timeout, max(remaining, 0.1)))

        return wait_for_run(poll, run_id, timeout=timeout, poll_seconds=poll_seconds, on_status=on_status)
