"""Submits a compiled pipeline to Kubeflow Pipelines and waits for the run: a small client around `kfp.Client`.

Credentials come only from the environment, never from flags (which land in shell history):

    TFXP_KFP_TOKEN              a bearer token (e.g. `gcloud auth print-identity-token`, a Dex ID token)
    KF_PIPELINES_SA_TOKEN_PATH  a file with a projected service-account token (kfp's own variable;
                                re-read before every request, so the kubelet's refreshes apply)
    TFXP_KFP_COOKIE             a session cookie for an auth proxy, e.g. `authservice_session=...`

`kfp.Client` sets no socket timeouts, so every call runs under a deadline here: an unreachable or silent
host becomes a clear error within the timeout instead of a hang.

Example:
    client = KfpRunClient("http://localhost:8080", auth=KfpAuth.from_env())
    run = client.submit(Path("pipeline.yaml"), experiment="tfxp")
    final = client.wait(run.run_id, timeout=6 * 3600)
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pipeline.kubeflow.spec import load_pipeline_doc

TOKEN_ENV = "TFXP_KFP_TOKEN"
COOKIE_ENV = "TFXP_KFP_COOKIE"
TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
UI_ENDPOINT_ENV = "KF_PIPELINES_UI_ENDPOINT"

SUCCEEDED = "SUCCEEDED"
# Terminal run states of the v2beta1 API (V2beta1RuntimeState); only SUCCEEDED is a success.
FINAL_STATES = frozenset({SUCCEEDED, "FAILED", "SKIPPED", "CANCELED"})
# HTTP statuses worth polling through: the API gateway or server is restarting.
_TRANSIENT_STATUSES = frozenset({0, 502, 503, 504})
_AUTH_HINT = f"set {TOKEN_ENV}, {TOKEN_PATH_ENV} or {COOKIE_ENV} in the environment"
_HOST_HINT = (
    "check --host; for a port-forward run `kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80` "
    "and pass --host http://localhost:8080"
)

T = TypeVar("T")


class SubmitError(RuntimeError):
    """Submitting or watching a run failed; the message says what, where and how to fix it."""


class NoAnswerError(SubmitError):
    """The API did not answer within the deadline."""


class RunFailedError(SubmitError):
    """The run ended in a state other than SUCCEEDED."""

    def __init__(self, message: str, status: RunStatus) -> None:
        super().__init__(message)
        self.status = status


class RunTimeoutError(SubmitError):
    """The run did not finish within the wait timeout (it keeps running on the cluster)."""

    def __init__(self, message: str, status: RunStatus | None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class KfpAuth:
    """Credentials for the KFP API; `repr` never shows the secrets.

    Attributes:
        token: Bearer token.
        token_path: File holding a service-account token.
        cookie: Cookie header value.
    """

    token: str | None = field(default=None, repr=False)
    token_path: Path | None = None
    cookie: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KfpAuth:
        """Reads the credentials from the environment (see the module docstring).

        Raises:
            SubmitError: both a token and a token path are set, or the token file cannot be read.
        """
        environ = os.environ if environ is None else environ
        token = environ.get(TOKEN_ENV, "").strip() or None
        path_value = environ.get(TOKEN_PATH_ENV, "").strip()
        cookie = environ.get(COOKIE_ENV, "").strip() or None
        if token and path_value:
            raise SubmitError(f"both {TOKEN_ENV} and {TOKEN_PATH_ENV} are set; unset one of them")
        token_path = Path(path_value) if path_value else None
        if token_path is not None and not os.access(token_path, os.R_OK):
            raise SubmitError(
                f"{TOKEN_PATH_ENV}={token_path} is not a readable file; point it at the projected "
                "service-account token (e.g. /var/run/secrets/kubeflow/pipelines/token) or unset it"
            )
        return cls(token=token, token_path=token_path, cookie=cookie)

    def describe(self) -> str:
        """Which credentials are in use, without their values."""
        sources = []
        if self.token:
            sources.append(f"a bearer token from {TOKEN_ENV}")
        if self.token_path:
            sources.append(f"the token file {self.token_path} ({TOKEN_PATH_ENV})")
        if self.cookie:
            sources.append(f"a cookie from {COOKIE_ENV}")
        return "sent " + " and ".join(sources) if sources else "sent no credentials"

    def headers(self) -> dict[str, str]:
        """HTTP headers carrying the credentials (the token file is read now).

        Raises:
            OSError: the token file cannot be read.
        """
        headers = {}
        token = self.token or (self.token_path.read_text().strip() if self.token_path else None)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if self.cookie:
            headers["Cookie"] = self.cookie
        return headers

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `kfp.Client`."""
        kwargs: dict[str, Any] = {}
        if self.token:
            kwargs["existing_token"] = self.token
        if self.token_path:
            from kfp.client.set_volume_credentials import ServiceAccountTokenVolumeCredentials

            kwargs["credentials"] = ServiceAccountTokenVolumeCredentials(str(self.token_path))
        if self.cookie:
            kwargs["cookies"] = self.cookie
        return kwargs


@dataclass(frozen=True)
class SubmittedRun:
    """Attributes:
    run_id: The KFP run id.
    url: The run's page in the KFP UI.
    experiment: The experiment's name.
    tasks: The pipeline's task names, sorted.
    """

    run_id: str
    url: str
    experiment: str
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunStatus:
    """One poll of a run.

    Attributes:
        state: The run's state (`PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED`, ...).
        tasks: Task display name → state, as the API reports them.
        error: The run's error message, if any.
    """

    state: str
    tasks: Mapping[str, str] = field(default_factory=dict)
    error: str = ""

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES


StatusCallback = Callable[[RunStatus, float], None]
"""Called after each poll with the status and the seconds since waiting began."""


def run_url(host: str, run_id: str, environ: Mapping[str, str] | None = None) -> str:
    """The run's page; like kfp.Client, `KF_PIPELINES_UI_ENDPOINT` overrides the host."""
    environ = os.environ if environ is None else environ
    base = environ.get(UI_ENDPOINT_ENV) or host
    return f"{base.rstrip('/')}/#/runs/details/{run_id}"


def _with_deadline(call: Callable[[], T], seconds: float, on_timeout: str) -> T:
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
        raise NoAnswerError(on_timeout)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _http_status(error: BaseException) -> int | None:
    from kfp_server_api import ApiException

    return error.status if isinstance(error, ApiException) else None


def _is_connection_error(error: BaseException) -> bool:
    import urllib3

    return isinstance(error, urllib3.exceptions.HTTPError | ConnectionError)


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
        if not host.startswith(("http://", "https://")):
            raise SubmitError(f"--host {host!r} has no scheme; use http://… or https://…, e.g. http://localhost:8080")
        self.host = host.rstrip("/")
        self.namespace = namespace
        self.auth = auth or KfpAuth()
        self.request_timeout = request_timeout
        self._client: Any = None

    def _http_error(self, status: int, doing: str, detail: str = "") -> SubmitError:
        if status in (401, 403):
            return SubmitError(
                f"Kubeflow Pipelines at {self.host} refused the request (HTTP {status}) while {doing}; "
                f"tfxp {self.auth.describe()}; {_AUTH_HINT}"
            )
        if status == 404:
            return SubmitError(f"{self.host} answered HTTP 404 while {doing}: no KFP v2beta1 API there; {_HOST_HINT}")
        return SubmitError(f"Kubeflow Pipelines at {self.host} answered HTTP {status} while {doing}: {detail}")

    def _explain(self, error: BaseException, doing: str) -> SubmitError:
        status = _http_status(error)
        if status is not None:
            body = str(getattr(error, "body", "") or "").strip()[:300]
            return self._http_error(status, doing, body or str(error))
        if _is_connection_error(error):
            reason = getattr(error, "reason", None) or error
            return SubmitError(f"cannot reach Kubeflow Pipelines at {self.host} while {doing} ({reason}); {_HOST_HINT}")
        if isinstance(error, OSError) and self.auth.token_path:
            return SubmitError(f"cannot read the token file {self.auth.token_path} ({TOKEN_PATH_ENV}): {error}")
        return SubmitError(f"{doing} at {self.host} failed: {type(error).__name__}: {error}")

    def _call(self, doing: str, call: Callable[[], T], seconds: float | None = None) -> T:
        seconds = self.request_timeout if seconds is None else seconds
        on_timeout = (
            f"Kubeflow Pipelines at {self.host} did not answer within {seconds:g} s while {doing}; {_HOST_HINT}"
        )

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
        """Asks the API's health endpoint, with the credentials, before kfp.Client does.

        kfp.Client retries a failing health check for 25 s and then reports a bare timeout; this names
        the cause instead: connection refused, no KFP API at that address, refused credentials, or an
        auth proxy's login page.

        Raises:
            SubmitError: the cause and the fix.
        """
        url = f"{self.host}/apis/v2beta1/healthz"
        try:
            headers = self.auth.headers()
        except OSError as error:
            raise SubmitError(
                f"cannot read the token file {self.auth.token_path} ({TOKEN_PATH_ENV}): {error}"
            ) from None
        # Like kfp's own HTTP client, ignore *_proxy variables.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(urllib.request.Request(url, headers=headers), timeout=self.request_timeout) as response:
                body = response.read(1 << 16)
        except urllib.error.HTTPError as error:
            raise self._http_error(error.code, f"checking {url}", error.reason) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                raise NoAnswerError(
                    f"Kubeflow Pipelines at {self.host} did not answer within {self.request_timeout:g} s; {_HOST_HINT}"
                ) from None
            raise SubmitError(f"cannot reach Kubeflow Pipelines at {self.host} ({reason}); {_HOST_HINT}") from None
        try:
            json.loads(body)
        except ValueError:
            raise SubmitError(
                f"{url} did not answer with JSON, so {self.host} is not the KFP API (an auth proxy's login page?); "
                f"tfxp {self.auth.describe()}; {_AUTH_HINT}, or {_HOST_HINT}"
            ) from None

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


def wait_for_run(
    poll: Callable[[float], RunStatus],
    run_id: str,
    *,
    timeout: float,
    poll_seconds: float = 10.0,
    on_status: StatusCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> RunStatus:
    """The wait state machine: poll, report, stop on a final state or at the deadline.

    Transient API failures (unreachable, HTTP 502/503/504, no answer) are polled through until the
    deadline; anything else (e.g. HTTP 401) stops the wait at once.

    Args:
        poll: Returns the run's status; gets the seconds left before the deadline.
        run_id: For messages.
        timeout: Seconds to wait in total.
        poll_seconds: Seconds between polls.
        on_status: Progress callback.
        clock: Monotonic clock (tests pass a fake one).
        sleep: Sleep function (tests pass a fake one).

    Returns:
        The final status, when it is SUCCEEDED.

    Raises:
        RunFailedError: the run ended FAILED, CANCELED or SKIPPED.
        RunTimeoutError: no final state within `timeout`.
        SubmitError: a non-transient API error.
    """
    started = clock()
    last: RunStatus | None = None
    last_problem = ""
    while True:
        remaining = timeout - (clock() - started)
        if remaining <= 0:
            seen = f"last state {last.state}" if last else f"no answer ({last_problem})"
            raise RunTimeoutError(
                f"run {run_id} did not finish within {timeout:g} s ({seen}); it keeps running on the cluster — "
                "wait longer with a larger --timeout or watch it in the KFP UI",
                last,
            )
        try:
            status = poll(remaining)
        except SubmitError as error:
            if not _is_transient(error):
                raise
            last_problem = str(error)
        else:
            last = status
            if on_status is not None:
                on_status(status, clock() - started)
            if status.finished:
                if status.state != SUCCEEDED:
                    reason = f": {status.error}" if status.error else ""
                    failed = sorted(name for name, state in status.tasks.items() if state == "FAILED")
                    where = f" (failed tasks: {', '.join(failed)})" if failed else ""
                    raise RunFailedError(f"run {run_id} ended {status.state}{where}{reason}", status)
                return status
        sleep(max(0.0, min(poll_seconds, timeout - (clock() - started))))


def _is_transient(error: SubmitError) -> bool:
    if isinstance(error, NoAnswerError):
        return True
    cause = error.__cause__
    if cause is None:
        return False
    status = _http_status(cause)
    return status in _TRANSIENT_STATUSES if status is not None else _is_connection_error(cause)


def progress_line(status: RunStatus, elapsed: float, task_names: Sequence[str] = ()) -> str:
    """`[  42s] RUNNING  done 3/7  running: Trainer` — the tasks of the pipeline only (KFP also reports
    driver and DAG tasks)."""
    wanted = {name.lower(): name for name in task_names}
    tasks = {wanted[name.lower()]: state for name, state in status.tasks.items() if name.lower() in wanted}
    line = f"[{elapsed:6.0f}s] {status.state}"
    if task_names:
        done = sum(state in FINAL_STATES for state in tasks.values())
        running = [name for name in task_names if tasks.get(name) == "RUNNING"]
        line += f"  done {done}/{len(task_names)}"
        if running:
            line += f"  running: {', '.join(running)}"
    return line
