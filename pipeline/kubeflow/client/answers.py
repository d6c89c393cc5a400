"""What the KFP API answers, checked before tfxp uses it: every 2xx answer is a JSON object, and every id tfxp
goes on with is there.

kfp_server_api turns a body that is not JSON into a model whose fields are all None
(`kfp_server_api/api_client.py`, `deserialize`: `json.loads` fails, the text is kept, and `__deserialize_model`
reads no field from it), so without these checks a proxy's HTML page answered with 200 became "run id: None",
`pipelineid=None` in the next request, or `experiment_id "None"` in a recurring run. `check_kfp_answers` wraps the
client's transport, so the check covers the requests kfp makes inside one call too (`create_run_from_pipeline_package`
asks for the experiment first); `require_id` checks a field of an answer that was JSON but lacks it.

Example:
    check_kfp_answers(kfp_client, "http://localhost:8080", timeout=60)
    run_id = require_id(result.run_id, "run_id", "POST /apis/v2beta1/runs", host)
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from foundation.bounded import parse_json, size_text
from pipeline.kubeflow.client.auth import PORT_FORWARD_HINT
from pipeline.kubeflow.client.runs import UnreadableAnswerError

# The ids each creating endpoint must answer with, because kfp or tfxp sends them on in the next request (kfp's
# `create_run_from_pipeline_package` posts the run with the experiment id it got, unchecked).
_REQUIRED_IDS = (
    ("POST", re.compile(r".*/apis/v2beta1/experiments"), ("experiment_id",)),
    ("POST", re.compile(r".*/apis/v2beta1/runs"), ("run_id",)),
    ("POST", re.compile(r".*/apis/v2beta1/pipelines"), ("pipeline_id",)),
    ("POST", re.compile(r".*/apis/v2beta1/pipelines/upload_version"), ("pipeline_id", "pipeline_version_id")),
    ("POST", re.compile(r".*/apis/v2beta1/pipelines/upload"), ("pipeline_id",)),
    ("POST", re.compile(r".*/apis/v2beta1/recurringruns"), ("recurring_run_id",)),
)


# The most tfxp reads of one KFP answer (`foundation.bounded.cap_pool`): a run with its pipeline spec is a few MB,
# a page of runs at `--limit` 200 tens of MB at most. The API server's own gRPC gateway does not bound what it
# sends, and kfp_server_api holds a body three times over while it decodes it (bytes, text, objects).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class UnexpectedAnswerError(UnreadableAnswerError):
    """The API answered with success but not with what its endpoint returns (a wait polls through it:
    `runs.is_transient`)."""


def answer_too_large(host: str, method: str, url: str) -> UnexpectedAnswerError:
    """The one message for an answer over MAX_ANSWER_BYTES."""
    return UnexpectedAnswerError(
        f"Kubeflow Pipelines at {host} answered {_endpoint(method, url)} with more than "
        f"{size_text(MAX_ANSWER_BYTES)}, the most tfxp reads of one answer; tfxp stopped reading there. Ask for "
        f"fewer items (--limit), or check that --host is the KFP API and not a proxy; {PORT_FORWARD_HINT}"
    )


def _shown(body: bytes | str, limit: int = 120) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    text = " ".join(text.split())
    if not text:
        return "an empty body"
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


def unexpected_answer(host: str, endpoint: str, came_back: str, needed: str) -> UnexpectedAnswerError:
    """The one message for an answer that is not what `endpoint` returns."""
    return UnexpectedAnswerError(
        f"Kubeflow Pipelines at {host} answered {endpoint} with {came_back}, not {needed}; tfxp stopped before "
        f"using it. Is --host the KFP API, and not a proxy's or the UI's page? {PORT_FORWARD_HINT}"
    )


def require_id(value: Any, field: str, endpoint: str, host: str) -> str:
    """`value` as text when it is a non-empty id.

    Raises:
        UnexpectedAnswerError: the answer had no `field` (None, empty, not text).
    """
    if isinstance(value, str) and value.strip() and value != "None":
        return value
    shown = "no value" if value is None else repr(value)
    raise unexpected_answer(host, endpoint, f"{field} = {shown}", f"an answer with its {field}")


def _endpoint(method: str, url: str) -> str:
    return f"{method} {urllib.parse.urlsplit(url).path}"


def check_kfp_answers(client: Any, host: str, timeout: float) -> None:
    """Makes every request of a `kfp.Client` check its answer, and gives each a socket timeout.

    A 2xx answer whose body is not a JSON object, or an answer of a creating endpoint without the id it creates,
    raises `UnexpectedAnswerError` (naming the endpoint and what came back) before kfp reads fields from it.
    Requests without a timeout of their own (kfp sets none) get `timeout` seconds for connecting and for each read,
    so a request abandoned at the whole-call deadline (`foundation.deadline`) ends when the server goes
    silent.

    Args:
        client: A `kfp.Client`.
        host: The API address, for messages.
        timeout: Seconds for each connect and each read.
    """
    api_client = client._run_api.api_client  # one ApiClient serves every API of the kfp.Client
    rest = api_client.rest_client
    if getattr(rest, "_tfxp_checked", False):
        return
    send = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = (timeout, timeout)
        rest.tfxp_waiting += 1
        try:
            response = send(method, url, *args, **kwargs)
        finally:
            rest.tfxp_waiting -= 1
        rest.tfxp_answers += 1  # the body is in (kfp preloads it): a deadline from here on is not the server's
        if 200 <= response.status < 300 and kwargs.get("_preload_content", True):
            try:
                answer = parse_json(response.data)
            except ValueError:
                answer = None
            endpoint = _endpoint(method, url)
            if not isinstance(answer, dict):
                content_type = response.getheader("content-type") or "no content type"
                came_back = f"HTTP {response.status} ({content_type}) {_shown(response.data)}"
                raise unexpected_answer(host, endpoint, came_back, "a JSON object")
            _check_page(answer, method, url, kwargs.get("query_params"), host)
            path = urllib.parse.urlsplit(url).path
            for wanted_method, pattern, fields in _REQUIRED_IDS:
                if method == wanted_method and pattern.fullmatch(path):
                    for field in fields:
                        require_id(answer.get(field), field, endpoint, host)
        return response

    rest.request = request
    rest.tfxp_answers = rest.tfxp_waiting = 0
    rest._tfxp_checked = True


def answers_received(client: Any) -> tuple[int, bool]:
    """How many answers the `kfp.Client` checked by `check_kfp_answers` has received (read, perhaps not parsed
    yet), and whether a request of it is waiting for one now."""
    rest = client._run_api.api_client.rest_client
    return int(getattr(rest, "tfxp_answers", 0)), bool(getattr(rest, "tfxp_waiting", 0))


def _check_page(answer: dict[str, Any], method: str, url: str, query: Any, host: str) -> None:
    """Refuses a list answer with more items than the request's `page_size`, before kfp turns each one into a
    model (300,000 runs for `runs list --limit 5` took 26 s of CPU and 660 MB there).

    Raises:
        UnexpectedAnswerError: a list in the answer is longer than the page asked for.
    """
    pairs = [*urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query), *(query or [])]  # kfp passes them apart
    asked = str(dict(pairs).get("page_size", ""))
    if method != "GET" or not asked.isdigit():
        return
    for field, items in answer.items():
        if isinstance(items, list) and len(items) > int(asked):
            came_back = f"{len(items)} items in {field!r}"
            raise unexpected_answer(host, _endpoint(method, url), came_back, f"at most the {asked} asked for")
