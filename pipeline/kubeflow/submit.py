"""Submits a compiled pipeline to Kubeflow Pipelines and waits for the run: a small client around `kfp.Client`.

`kfp.Client` sets no socket timeouts, so every call runs under a deadline here: an unreachable or silent
host becomes a clear error within the timeout instead of a hang. Credentials and host checks are in
`pipeline.kubeflow.auth`; run states and the wait loop in `pipeline.kubeflow.runs`.

Example:
    client = KfpRunClient("http://localhost:8080", auth=KfpAuth.from_env())
    run = client.submit(Path("pipeline.yaml"), experiment="tfxp")
    final = client.wait(run.run_id, timeout=6 * 3600)
"""

from __future__ import annotations

import contextlib
import datetime
import io
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pipeline.kubeflow.auth import (
    KfpAuth,
    api_error,
    check_api,
    check_host,
    no_answer_error,
    run_url,
    unreachable_error,
)
from pipeline.kubeflow.runs import (
    RunStatus,
    StatusCallback,
    SubmitError,
    SubmittedRun,
    http_status,
    is_connection_error,
    wait_for_run,
)
from pipeline.kubeflow.spec import load_pipeline_doc

T = TypeVar("T")


def _with_deadline(call: Callable[[], T], seconds: float, on_timeout: SubmitError) -> T:
    # kfp.Client has no timeouts of its own; run the call on a daemon thread and stop waiting at the
    # deadline (the abandoned thread dies with the process).
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=target, name="tfxp-kfp-call", daemon=True)
    thread.start()
    thread.join(max(seconds, 0.0))
    if thread.is_alive():
        raise on_timeout
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


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

    def _call(self, doing: str, call: Callable[[], T], seconds: float | None = None) -> T:
        seconds = self.request_timeout if seconds is None else seconds
        on_timeout = no_answer_error(self.host, seconds, doing)
        try:
            # kfp prints its own "Run details: …" lines and warns about API versions; tfxp reports itself.
            # Both switches are process-wide, so they are made and undone here, in the waiting thread, never
            # in the worker (an abandoned worker would restore a stale sys.stdout when it finally ends).
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                return _with_deadline(call, seconds, on_timeout)
        except SubmitError:
            raise
        except Exception as error:
            raise self._explain(error, doing) from error

    def check_api(self) -> None:
        """Asks the API's health endpoint, with the credentials, before kfp.Client does (`auth.check_api`).

        Raises:
            SubmitError: the cause and the fix.
        """
        check_api(self.host, self.auth, self.request_timeout)

    def _kfp(self) -> Any:
        if self._client is None:
            import kfp

            self.check_api()
            kwargs = self.auth.client_kwargs()
            if self.namespace:
                kwargs["namespace"] = self.namespace
            self._client = self._call("connecting", lambda: kfp.Client(host=self.host, **kwargs))
        return self._client

    def submit(self, package: Path, *, experiment: str | None = None, run_name: str | None = None) -> SubmittedRun:
        """Creates a run from a compiled pipeline file (`create_run_from_pipeline_package`).

        Args:
            package: The `.yaml` pipeline from `tfxp compile`.
            experiment: Experiment name; default the pipeline's name. Created when missing.
            run_name: Run name; default `<pipeline>-<UTC time>`.

        Returns:
            The run's id, UI URL and experiment.

        Raises:
            SubmitError: the file is not a compiled pipeline, the host is unreachable or silent, the
                credentials are refused, or the API answers with an error.
        """
        if not package.is_file():
            raise SubmitError(f"pipeline file {package} does not exist; make it with `tfxp compile --out {package}`")
        if package.suffix not in (".yaml", ".yml"):
            raise SubmitError(
                f"{package}: kfp.Client accepts .yaml/.yml pipeline files; recompile with --out pipeline.yaml"
            )
        try:
            doc = load_pipeline_doc(package)
        except ValueError as error:
            raise SubmitError(str(error)) from None
        name = doc.pipeline_spec.pipeline_info.name
        experiment = experiment or name
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        run_name = run_name or f"{name}-{stamp}"
        client = self._kfp()
        result = self._call(
            "creating the run",
            lambda: client.create_run_from_pipeline_package(
                str(package), run_name=run_name, experiment_name=experiment, namespace=self.namespace
            ),
        )
        return SubmittedRun(
            run_id=result.run_id,
            url=run_url(self.host, result.run_id),
            experiment=experiment,
            tasks=tuple(sorted(doc.pipeline_spec.root.dag.tasks)),
        )

    def status(self, run_id: str, seconds: float | None = None) -> RunStatus:
        """Polls the run once (`GET /apis/v2beta1/runs/{run_id}`).

        Raises:
            SubmitError: as `submit`.
        """
        client = self._kfp()
        run = self._call(f"reading run {run_id}", lambda: client.get_run(run_id), seconds)
        details = getattr(run, "run_details", None)
        tasks = {
            str(task.display_name): str(task.state)
            for task in (getattr(details, "task_details", None) or [])
            if task.display_name
        }
        error = getattr(run, "error", None)
        return RunStatus(
            state=str(run.state or "RUNTIME_STATE_UNSPECIFIED"), tasks=tasks, error=getattr(error, "message", "") or ""
        )

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
