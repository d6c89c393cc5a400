"""A connection to the Kubeflow Pipelines API: a connected `kfp.Client` whose every call runs under a deadline and
whose failures become `SubmitError`s naming the cause and the fix; the health check, the run preflight and the
experiments, which runs (`pipeline.kubeflow.client.submit`), pipelines and schedules all use.

`kfp.Client` sets no socket timeouts, so every call runs under a deadline here: an unreachable or silent
host becomes a clear error within the timeout instead of a hang. Its urllib3 pool follows redirects within the
origin only (`foundation.redirects.guard_pool`): a 307 to another host would post the run's spec there again; and
reads at most `answers.MAX_ANSWER_BYTES` of one answer (`foundation.bounded.cap_pool`).
The guard goes in once the client is made; the one call kfp.Client makes while it is made (GET healthz, no body)
comes right after tfxp's own health check, which refuses such a redirect itself. No error shows a credential
(`KfpAuth.redact`; the kfp error is not chained when it held one). Credentials and host checks are in
`pipeline.kubeflow.client.auth`.

Example:
    connection = KfpConnection("http://localhost:8080", auth=KfpAuth.from_env())
    experiment_id = connection.experiment_id("tfxp", create=True)
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from kfp.pipeline_spec import pipeline_spec_pb2

from foundation import redirects
from foundation.bounded import cap_pool
from foundation.deadline import with_deadline
from pipeline.kubeflow.client.answers import (
    MAX_ANSWER_BYTES,
    answer_too_large,
    answers_received,
    check_kfp_answers,
    require_id,
)
from pipeline.kubeflow.client.auth import (
    KfpAuth,
    api_error,
    check_api,
    check_host,
    no_answer_error,
    redirect_refused,
    unreachable_error,
)
from pipeline.kubeflow.client.preflight import ServerInfo, check_exit_handler_support, run_pipeline_root
from pipeline.kubeflow.client.runs import NoAnswerError, SubmitError, http_status, is_connection_error

T = TypeVar("T")


class KfpConnection:
    """A connection to the KFP API: every `kfp.Client` call under a deadline, with clear errors.

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
            body = self.auth.redact(str(getattr(error, "body", "") or "").strip())[:300]
            return api_error(self.host, self.auth, status, doing, body or self.auth.redact(str(error)))
        if is_connection_error(error):
            reason = self.auth.redact(str(getattr(error, "reason", None) or error))
            return unreachable_error(self.host, reason, doing)
        return SubmitError(f"{doing} at {self.host} failed: {type(error).__name__}: {self.auth.redact(str(error))}")

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
        answered, _ = self._answers()
        try:
            # kfp prints its own "Run details: …" lines and warns about API versions; tfxp reports itself.
            # Both switches are process-wide, so they are made and undone here, in the waiting thread, never
            # in the worker (an abandoned worker would restore a stale sys.stdout when it finally ends).
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                return with_deadline(call, seconds, on_timeout)
        except NoAnswerError:
            received, waiting = self._answers()
            if waiting or received == answered:  # a request still waits: the server's silence
                raise
            raise NoAnswerError(
                f"Kubeflow Pipelines at {self.host} answered while {doing}, but tfxp had not finished reading the "
                f"answer when the {seconds:g} s of --request-timeout ran out; ask for fewer items (--limit) or give "
                "a larger --request-timeout"
            ) from None
        except SubmitError:
            raise
        except redirects.RedirectRefusedError as error:
            raise redirect_refused(error) from None
        except Exception as error:
            if missing and http_status(error) == 404:
                raise SubmitError(missing) from error
            said = f"{error} {getattr(error, 'body', '')}"
            raise self._explain(error, doing) from (error if self.auth.redact(said) == said else None)

    def _answers(self) -> tuple[int, bool]:
        return answers_received(self._client) if self._client is not None else (0, False)

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
            pool = redirects.guard_pool(client._run_api.api_client.rest_client.pool_manager)  # one ApiClient: all
            cap_pool(pool, MAX_ANSWER_BYTES, lambda method, url: answer_too_large(self.host, method, url))
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
