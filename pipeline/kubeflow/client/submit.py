"""Submits a compiled pipeline to Kubeflow Pipelines, waits for the run, and lists, terminates and retries runs:
a small client around `kfp.Client`, which `pipeline.kubeflow.client.pipelines` and `.schedules` use too.

`kfp.Client` sets no socket timeouts, so every call runs under a deadline here: an unreachable or silent
host becomes a clear error within the timeout instead of a hang. Credentials and host checks are in
`pipeline.kubeflow.client.auth`; run states and the wait loop in `pipeline.kubeflow.client.runs`.

Example:
    client = KfpRunClient("http://localhost:8080", auth=KfpAuth.from_env())
    run = client.submit(Path("pipeline.yaml"), experiment="tfxp")
    final = client.wait(run.run_id, timeout=6 * 3600)
"""

from __future__ import annotations

import contextlib
import datetime
import io
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kfp.pipeline_spec import pipeline_spec_pb2

from foundation.deadline import with_deadline
from pipeline.kubeflow.client.answers import check_kfp_answers, require_id
from pipeline.kubeflow.client.auth import (
    KfpAuth,
    api_error,
    check_api,
    check_host,
    no_answer_error,
    run_url,
    unreachable_error,
)
from pipeline.kubeflow.client.preflight import ServerInfo, check_exit_handler_support, run_pipeline_root
from pipeline.kubeflow.client.runs import (
    FINAL_STATES,
    RETRYABLE_STATES,
    RunStatus,
    RunSummary,
    StatusCallback,
    SubmitError,
    SubmittedRun,
    http_status,
    is_connection_error,
    run_status,
    run_summary,
    wait_for_run,
)
from pipeline.kubeflow.compiler.params import pipeline_parameters, typed_arguments
from pipeline.kubeflow.compiler.spec import PipelineDoc, load_pipeline_doc, pipeline_tasks, write_pipeline_doc

T = TypeVar("T")


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


class KfpRunClient:
    """Creates runs from compiled pipeline files and polls them, with deadlines and clear errors.

    Args:
        host: KFP API or UI address with scheme, e.g. `http://localhost:8080`.
        namespace: Kubernetes namespace (multi-user KFP); None = the client's default.
        auth: Credentials; default none.
        request_timeout: Deadline of each API call in seconds.

    Raises:
        SubmitError: `host` has no http(s) scheme.
    """

    def __init__(
        self,
        host: str,
        *,
        namespace: str | None = None,
        auth: KfpAuth | None = None,
        request_timeout: float = 60.0,
    ) -> None:
        self.host = check_host(host)
        self.namespace = namespace
        self.auth = auth or KfpAuth()
        self.request_timeout = request_timeout
        self._client: Any = None
        self._server: ServerInfo | None = None

    def _explain(self, error: BaseException, doing: str) -> SubmitError:
        status = http_status(error)
        if status is not None:
            body = str(getattr(error, "body", "") or "").strip()[:300]
            return api_error(self.host, self.auth, status, doing, body or str(error))
        if is_connection_error(error):
            return unreachable_error(self.host, getattr(error, "reason", None) or error, doing)
        if isinstance(error, OSError) and self.auth.token_path:
            return self.auth.token_file_error(error)
        return SubmitError(f"{doing} at {self.host} failed: {type(error).__name__}: {error}")

    def call(self, doing: str, call: Callable[[], T], seconds: float | None = None, missing: str = "") -> T:
        """Runs one kfp.Client call under the deadline and turns its failures into `SubmitError`s.

        Args:
            doing: What the call does, for messages (`creating the run`).
            call: The kfp.Client call.
            seconds: Its deadline; default `request_timeout`.
            missing: The message for HTTP 404 (a run or recurring run that does not exist); default: the host
                has no KFP API.

        Raises:
            SubmitError: no answer within the deadline (`NoAnswerError`), unreachable, refused, or an API error.
        """
        seconds = self.request_timeout if seconds is None else seconds
        on_timeout = no_answer_error(self.host, seconds, doing)
        try:
            # kfp prints its own "Run details: …" lines and warns about API versions; tfxp reports itself.
            # Both switches are process-wide, so they are made and undone here, in the waiting thread, never
            # in the worker (an abandoned worker would restore a stale sys.stdout when it finally ends).
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                return with_deadline(call, seconds, on_timeout)
        except SubmitError:
            raise
        except Exception as error:
            if missing and http_status(error) == 404:
                raise SubmitError(missing) from error
            raise self._explain(error, doing) from error

    def check_api(self) -> ServerInfo:
        """Asks the API's health endpoint, with the credentials, before kfp.Client does (`auth.check_api`).

        Returns:
            What it says about the server (kept for `server`).

        Raises:
            SubmitError: the cause and the fix.
        """
        self._server = ServerInfo.from_healthz(check_api(self.host, self.auth, self.request_timeout))
        return self._server

    def server(self) -> ServerInfo:
        """What the server's health endpoint said (its version); asks it when it has not been asked yet.

        Raises:
            SubmitError: as `check_api`.
        """
        return self._server if self._server is not None else self.check_api()

    def preflight(
        self, spec: pipeline_spec_pb2.PipelineSpec | None, source: str, pipeline_root: str | None
    ) -> tuple[str | None, list[str]]:
        """The run's pipeline root (`preflight.run_pipeline_root`) and whether the server can run the spec's exit
        handler (`preflight.check_exit_handler_support`); the root is checked before any request.

        Args:
            spec: The run's `PipelineSpec`; None when the API returned none (nothing to check against).
            source: Where the spec comes from, for messages.
            pipeline_root: `--pipeline-root`; None = the spec's `defaultPipelineRoot`.

        Returns:
            The root to send (None: none) and warnings.

        Raises:
            SubmitError: a local root, a server too old for the exit handler, or as `check_api`.
        """
        root, notes = run_pipeline_root(spec, pipeline_root, source)
        if spec is not None:
            notes += check_exit_handler_support(spec, self.server(), self.host)
        return root, notes

    def api(self) -> Any:
        """The connected `kfp.Client` (the health check runs first, once), whose answers are checked
        (`pipeline.kubeflow.client.answers.check_kfp_answers`)."""
        if self._client is None:
            import kfp

            self.server()  # the health check, once
            kwargs = self.auth.client_kwargs()
            if self.namespace:
                kwargs["namespace"] = self.namespace
            client = self.call("connecting", lambda: kfp.Client(host=self.host, **kwargs))
            check_kfp_answers(client, self.host, self.request_timeout)
            self._client = client
        return self._client

    def list_newest(self, doing: str, list_call: Callable[..., T], *, experiment: str | None, limit: int) -> T:
        """The answer of a kfp.Client list call (`list_runs`, `list_recurring_runs`) for the newest `limit` items
        of the namespace, newest first; only `experiment`'s when given.

        Raises:
            SubmitError: no such experiment, or as `call`.
        """
        experiment_id = self.experiment_id(experiment, create=False) if experiment else None
        return self.call(
            doing,
            lambda: list_call(
                page_size=limit, sort_by="created_at desc", experiment_id=experiment_id, namespace=self.namespace
            ),
        )

    def experiment_id(self, name: str, *, create: bool) -> str:
        """The id of the experiment called `name`.

        Args:
            name: The experiment's display name.
            create: Create it when missing; otherwise a missing experiment is an error.

        Raises:
            SubmitError: no such experiment (`create=False`), or as `call`.
        """
        client = self.api()
        if create:
            experiment = self.call(
                f"finding or creating experiment {name}",
                lambda: client.create_experiment(name=name, namespace=self.namespace),
            )
            return require_id(experiment.experiment_id, "experiment_id", "POST /apis/v2beta1/experiments", self.host)

        def find() -> Any:
            try:
                return client.get_experiment(experiment_name=name, namespace=self.namespace)
            except ValueError:  # kfp's "No experiment is found with name ..."
                return None

        experiment = self.call(f"finding experiment {name}", find)
        if experiment is None:
            raise SubmitError(f"no experiment named {name!r} at {self.host}; check --experiment (names are exact)")
        return require_id(experiment.experiment_id, "experiment_id", "GET /apis/v2beta1/experiments", self.host)

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
        client = self.api()

        def create(path: Path) -> Any:
            return self.call(
                "creating the run",
                lambda: client.create_run_from_pipeline_package(
                    str(path),
                    arguments=arguments,
                    run_name=run_name,
                    experiment_name=experiment,
                    namespace=self.namespace,
                    pipeline_root=root,
                    enable_caching=enable_caching,
                ),
            )

        if enable_caching is False:
            # kfp's own override reaches only the root DAG's tasks; an exit handler nests the pipeline in a sub-DAG.
            disable_caching(doc)
            with tempfile.TemporaryDirectory(prefix="tfxp-submit-") as folder:
                uncached = Path(folder) / package.name
                write_pipeline_doc(doc, uncached)
                result = create(uncached)
        else:
            result = create(package)
        run_id = require_id(result.run_id, "run_id", "POST /apis/v2beta1/runs", self.host)
        return SubmittedRun(
            run_id=run_id,
            url=run_url(self.host, run_id),
            experiment=experiment,
            tasks=tuple(sorted(pipeline_tasks(doc.pipeline_spec))),
            pipeline_root=root or "",
            warnings=tuple(notes),
        )

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
