"""Hostile inputs an adversarial pass over the issue-24 hardening found still getting through: numbers beyond the
protobuf field they land in (KFP retries, TFX steps and hash buckets), numbers too long for Python's `int()`,
non-ASCII digits in a span policy, a REST version of thousands of digits, and a REST server that trickles its
answer past `tfxp predict --timeout`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from foundation.data.spans import SpanError, parse_policy
from pipeline.config import ConfigError, load_config
from pipeline.kubeflow.compiler.params import ParamError, PipelineParameter
from serving.base_client import RetryPolicy
from serving.errors import DeadlineExceededError, InvalidArgumentError
from serving.rest import _parse_ids
from serving.rest_client import RestClient

# found by the adversarial pass: each of these reached a protobuf field (KFP's RetryPolicy, TFX's TrainArgs and
# SplitConfig) and `tfxp compile`/`tfxp run` ended in "ValueError: Value out of range" with a traceback.
OUT_OF_FIELD = [
    "kubeflow.retries=3000000000",  # int32 max_retry_count
    "kubeflow.retry_backoff_seconds=99999999999999999999",  # Duration seconds
    "kubeflow.retry_backoff_max_seconds=99999999999999999999",
    "trainer.train_steps=9223372036854775808",  # uint32 num_steps
    "trainer.eval_steps=4294967296",
    "data.train_buckets=99999999999999999999",  # uint32 hash_buckets
    "data.eval_buckets=4294967296",
]


@pytest.mark.parametrize("override", OUT_OF_FIELD)
def test_numbers_beyond_their_protobuf_field_are_refused_naming_the_key(override: str) -> None:
    # found by the adversarial pass
    key = override.partition("=")[0]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, [override])


def test_the_largest_values_the_fields_hold_are_still_accepted() -> None:
    config = load_config(None, ["kubeflow.retries=2147483647", "trainer.train_steps=4294967295"])
    assert (config.kubeflow.retries, config.trainer.train_steps) == (2**31 - 1, 2**32 - 1)


@pytest.mark.parametrize("where", ["set", "file"])
def test_a_number_too_long_for_int_is_a_config_error_not_a_traceback(where: str, tmp_path: Path) -> None:
    # found by the adversarial pass: PyYAML's int() raised a bare ValueError ("Exceeds the limit (4300 digits)").
    digits = "9" * 5000
    if where == "set":
        with pytest.raises(ConfigError, match="4300 digits"):
            load_config(None, [f"trainer.train_steps={digits}"])
    else:
        path = tmp_path / "config.yaml"
        path.write_text(f"trainer:\n  train_steps: {digits}\n")
        with pytest.raises(ConfigError, match=r"config\.yaml"):
            load_config(path)


@pytest.mark.parametrize("value", ["٣", "²", "３"])
def test_a_span_policy_of_non_ascii_digits_is_refused(value: str) -> None:
    # found by the adversarial pass: `٣` was read as the window 3, `²` raised "invalid literal for int()".
    with pytest.raises(SpanError, match=r"data\.spans"):
        parse_policy(value)
    with pytest.raises(ConfigError, match=r"data\.spans"):
        load_config(None, [f"data.spans={value}"])


def test_a_rest_version_of_thousands_of_digits_is_invalid_argument() -> None:
    # found by the adversarial pass: int() raised ValueError and `tfxp serve` answered 500 with a traceback logged.
    with pytest.raises(InvalidArgumentError, match="Failed to convert version"):
        _parse_ids("m", "1" * 5000, None)
    assert _parse_ids("m", "9223372036854775807", None)[1] == 2**63 - 1


@pytest.fixture
def trickling_server() -> Iterator[str]:
    """An HTTP server that answers every request one header byte per 0.5 s, forever."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(connection: socket.socket) -> None:
        with connection:
            try:
                connection.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 10_000:
                    if stop.wait(0.5):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:
                return

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


def test_the_rest_client_gives_up_at_its_timeout_however_slowly_the_server_trickles(trickling_server: str) -> None:
    # found by the adversarial pass: `tfxp predict --rest URL --timeout 3` waited as long as the server trickled.
    client = RestClient(trickling_server, "m", timeout=1.0, retry=RetryPolicy(max_attempts=1))
    started = time.perf_counter()
    with pytest.raises(DeadlineExceededError, match=r"within 1\.0s"):
        client.status()
    assert time.perf_counter() - started < 3
    client.close()


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("NUMBER_INTEGER", "٣"),  # int() reads Arabic-Indic digits
        ("NUMBER_INTEGER", "99999999999999999999"),  # beyond KFP's int64
        ("NUMBER_DOUBLE", "٣"),
        ("NUMBER_DOUBLE", "1_0"),  # float() takes digit separators, JSON does not
        ("LIST", "[" * 100_000 + "]" * 100_000),  # json.loads raised RecursionError, a traceback
        ("STRUCT", '{"a":' * 50_000 + "1" + "}" * 50_000),
    ],
)
def test_run_parameters_that_kfp_would_not_read_are_refused(kind: str, text: str) -> None:
    # found by the adversarial pass
    with pytest.raises(ParamError, match=f"is {kind}"):
        PipelineParameter(name="p", type=kind).convert(text)


def test_ordinary_run_parameters_still_convert() -> None:
    assert PipelineParameter(name="p", type="NUMBER_INTEGER").convert("-9223372036854775808") == -(2**63)
    assert PipelineParameter(name="p", type="NUMBER_DOUBLE").convert("-1.5e-3") == -0.0015
