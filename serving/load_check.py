"""Before a version is published, the load check serves it in a real model server process and compares the answers.

`check_model_serving` copies the SavedModel to `<temp>/<model name>/1/`, starts a model server on that base path
in a child process (`serving.server_process`: TF Serving's `tensorflow_model_server` where it is installed, else
tfxp's TF Serving-compatible server), and waits until `GET /v1/models/<name>` reports version 1 AVAILABLE. The
server replays the SavedModel's warmup records (`assets.extra/tf_serving_warmup_requests`) while it loads, so a
warmup that fails leaves the version END (tfxp's server) or ends the process (TF Serving), and the check says so.
It then sends the sample of serialized tf.Examples to the `serving_tf_example` signature over REST and compares
each answer with the same signature run in-process (`tf.saved_model.load`): the same top class for every
example, and probabilities within `atol`. The process is always stopped and the temporary copy removed.

What TFX's InfraValidator does, on any orchestrator (it does not run on Kubeflow v2, tensorflow/tfx#5512), plus
the comparison with the in-process answers, which it does not make.

Example:
    result = check_model_serving("gs://bucket/Trainer/model/7/Format-Serving", records, "digits", 300)
    result.passed, result.reason  # (True, "version 1 loaded in tfxp local server in 4.1 s and answered ...")
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from foundation import paths
from foundation.bounded import parse_json
from foundation.contract import INPUT_EXAMPLES, OUTPUT_CLASSES, OUTPUT_PROBABILITIES, SIGNATURE_TF_EXAMPLE
from foundation.errors import TfxpError
from serving.server_process import ServerProcess, ServerProcessError, tf_serving_binary

VERSION = 1
DEFAULT_ATOL = 1e-4
BATCH = 32
Server = Literal["auto", "tensorflow_model_server", "local"]


class LoadCheckError(TfxpError, RuntimeError):
    """The model did not load, or did not answer, in the serving process; the message says which and why.

    Attributes:
        log: The tail of the server's log ("" when the server is not to blame).
    """

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class Answers:
    """What the `serving_tf_example` signature returned for a batch of examples: probabilities [N, C] and the top
    class of each [N]."""

    probabilities: np.ndarray
    classes: np.ndarray


@dataclass(frozen=True)
class Mismatch:
    """One example answered differently: its index in the sample, both top classes, the largest probability gap."""

    index: int
    expected_class: int
    served_class: int
    max_abs_difference: float


@dataclass(frozen=True)
class Comparison:
    """The served answers against the in-process ones: examples compared, the largest probability gap over all of
    them, and the examples whose top class differs or whose probabilities differ by more than `atol`."""

    examples: int
    max_abs_difference: float
    mismatches: tuple[Mismatch, ...]
    atol: float

    @property
    def agrees(self) -> bool:
        return not self.mismatches

    def describe(self) -> str:
        """One line naming the first few mismatches, e.g. `example 3: top class 7 served, 1 in-process, ...`."""
        shown = "; ".join(
            f"example {m.index}: top class {m.served_class} served, {m.expected_class} in-process, "
            f"max |Δp| {m.max_abs_difference:.3g}"
            for m in self.mismatches[:3]
        )
        more = f" (and {len(self.mismatches) - 3} more)" if len(self.mismatches) > 3 else ""
        count = f"{len(self.mismatches)} of {self.examples} examples"
        return f"{count} answered unlike in-process (atol {self.atol:g}): {shown}{more}"


def compare_answers(expected: Answers, served: Answers, atol: float = DEFAULT_ATOL) -> Comparison:
    """Compares the served answers with the in-process ones, example by example.

    Args:
        expected: The in-process answers.
        served: The serving process's answers to the same examples, in the same order.
        atol: Largest absolute probability difference that still agrees.

    Returns:
        The comparison; `agrees` when every example has the same top class and probabilities within `atol`.

    Raises:
        LoadCheckError: the answers have different shapes (another number of examples or classes).

    Example:
        compare_answers(Answers(np.array([[0.9, 0.1]]), np.array([0])), Answers(np.array([[0.1, 0.9]]), np.array([1])))
        # Comparison(examples=1, max_abs_difference=0.8, mismatches=(Mismatch(0, 0, 1, 0.8),), atol=0.0001)
    """
    if expected.probabilities.shape != served.probabilities.shape or expected.classes.shape != served.classes.shape:
        raise LoadCheckError(
            f"the served answers have the shape {served.probabilities.shape} (classes {served.classes.shape}), the "
            f"in-process ones {expected.probabilities.shape} (classes {expected.classes.shape}): the server ran "
            "another signature or another model"
        )
    gaps = np.abs(expected.probabilities.astype(np.float64) - served.probabilities.astype(np.float64))
    per_example = gaps.max(axis=1) if gaps.size else np.zeros(len(expected.classes))
    mismatches = tuple(
        Mismatch(index, int(expected.classes[index]), int(served.classes[index]), float(per_example[index]))
        for index in range(len(expected.classes))
        if expected.classes[index] != served.classes[index] or not per_example[index] <= atol
    )
    return Comparison(len(expected.classes), float(per_example.max(initial=0.0)), mismatches, atol)


@dataclass(frozen=True)
class LoadCheckResult:
    """The load check's outcome (`load_check.json` beside the InfraBlessing).

    Attributes:
        passed: The version became AVAILABLE and answered every example like in-process.
        reason: Why, in one line.
        server: `tensorflow_model_server` or `tfxp local server`.
        model_name: The name it was served under.
        version: The version it was served as.
        examples_compared: Examples whose answers were compared (0 when it did not load).
        max_abs_difference: The largest probability gap; None when nothing was compared.
        mismatches: The examples answered differently (at most 20 listed).
        load_seconds: From starting the process to AVAILABLE; None when it did not get there.
        atol: The tolerance used.
        server_log: The tail of the server's log when it did not load or answer ("" otherwise).
    """

    passed: bool
    reason: str
    server: str
    model_name: str
    version: int = VERSION
    examples_compared: int = 0
    max_abs_difference: float | None = None
    mismatches: tuple[Mismatch, ...] = ()
    load_seconds: float | None = None
    atol: float = DEFAULT_ATOL
    server_log: str = ""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> LoadCheckResult:
        data: dict[str, Any] = parse_json(text)
        data["mismatches"] = tuple(Mismatch(**mismatch) for mismatch in data.get("mismatches", ()))
        return cls(**data)


def check_model_serving(
    saved_model_dir: str,
    examples: Sequence[bytes],
    model_name: str,
    timeout_seconds: float,
    atol: float = DEFAULT_ATOL,
    server: Server = "auto",
    expected: Answers | None = None,
) -> LoadCheckResult:
    """Serves the SavedModel in a model server process and compares its answers with the in-process ones.

    Args:
        saved_model_dir: The SavedModel (a local path or a `tf.io.gfile` URI such as `gs://...`).
        examples: Serialized tf.Examples (the `serving_tf_example` signature's input), e.g. an eval-split sample.
        model_name: The name to serve it under.
        timeout_seconds: How long the server may take to start and load the version; each request's timeout too.
        atol: Largest probability difference that still agrees.
        server: `auto` (TF Serving where `tensorflow_model_server` is on PATH, else tfxp's server),
            `tensorflow_model_server` or `local`.
        expected: The answers the served ones must equal; None (the default) = the SavedModel's own, in-process
            (`in_process_answers`). Another model's answers make a reference that must be matched.

    Returns:
        The result; `passed` is False when the model did not load or answered differently (`reason` says why).

    Raises:
        ValueError: no examples, a timeout that is not positive, or `server` names TF Serving where it is absent.
    """
    binary = _check_arguments(examples, timeout_seconds, server)
    with tempfile.TemporaryDirectory(prefix="tfxp-load-check-", ignore_cleanup_errors=True) as temp:
        base = Path(temp) / model_name
        paths.copy_tree(saved_model_dir, str(base / str(VERSION)))
        process = ServerProcess(model_name, base, Path(temp) / "server.log", binary)
        result = LoadCheckResult(passed=False, reason="", server=process.name, model_name=model_name, atol=atol)
        with process:
            try:
                load_seconds = _wait_until_available(process, model_name, timeout_seconds)
                result = dataclasses.replace(result, load_seconds=round(load_seconds, 3))
                served = _served_answers(process.rest_url, model_name, examples, timeout_seconds)
                reference = expected if expected is not None else in_process_answers(str(base / str(VERSION)), examples)
                comparison = compare_answers(reference, served, atol)
            except (LoadCheckError, ServerProcessError) as error:
                return dataclasses.replace(result, reason=str(error), server_log=error.log)
    verdict = (
        f"answered all {comparison.examples} examples like in-process (max |Δp| {comparison.max_abs_difference:.3g})"
        if comparison.agrees
        else comparison.describe()
    )
    return dataclasses.replace(
        result,
        passed=comparison.agrees,
        reason=f"version {VERSION} loaded in {process.name} in {load_seconds:.1f} s and {verdict}",
        examples_compared=comparison.examples,
        max_abs_difference=comparison.max_abs_difference,
        mismatches=comparison.mismatches[:20],
    )


def _check_arguments(examples: Sequence[bytes], timeout_seconds: float, server: Server) -> str | None:
    """The TF Serving binary `server` asks for (None: tfxp's server), once the arguments of `check_model_serving`
    are checked.

    Raises:
        ValueError: no examples, a timeout that is not positive, or `server` names TF Serving where it is absent.
    """
    if not examples:
        raise ValueError("the load check needs at least one example to compare; pass a sample of the eval split")
    if timeout_seconds <= 0:
        raise ValueError(f"timeout_seconds must be positive, got {timeout_seconds}")
    binary = tf_serving_binary() if server in ("auto", "tensorflow_model_server") else None
    if server == "tensorflow_model_server" and binary is None:
        raise ValueError("server='tensorflow_model_server' but no tensorflow_model_server is on PATH")
    return binary


def _wait_until_available(process: ServerProcess, model_name: str, timeout_seconds: float) -> float:
    """Starts `process` and polls the version's status until AVAILABLE; returns the seconds it took.

    Raises:
        LoadCheckError: the version ended (its load or warmup failed), the process exited, or time ran out.
    """
    from serving.base_client import RetryPolicy
    from serving.errors import ServingError
    from serving.rest_client import RestClient

    started = time.monotonic()
    deadline = started + timeout_seconds
    process.start(timeout_seconds)
    where = f"{process.name} ({process.rest_url})"
    last = "no answer yet"
    with RestClient(process.rest_url, model_name, timeout=5.0, retry=RetryPolicy(max_attempts=1)) as client:
        while time.monotonic() < deadline:
            if process.exited() is not None:
                error = process.failure(f"the model did not load: {where} exited with status {process.exited()}")
                raise LoadCheckError(str(error), error.log)
            try:
                states = {status.version: status for status in client.status()}
            except ServingError as error:  # not listening yet (TF Serving listens after its first load)
                last = f"{error.code.name}: {error.message}"
            else:
                status = states.get(VERSION)
                if status is not None and status.state == "AVAILABLE":
                    return time.monotonic() - started
                if status is not None and status.state == "END":
                    raise LoadCheckError(
                        f"the model did not load: version {VERSION} of {model_name} in {where} ended "
                        f"({status.error_code}: {status.error_message or 'no message'}); a failing warmup record "
                        "(assets.extra/tf_serving_warmup_requests) or an unloadable SavedModel ends it",
                        process.log_tail(),
                    )
                last = f"version {VERSION} is {status.state if status else 'not listed'}"
            time.sleep(0.2)
    raise LoadCheckError(
        f"the model did not load: {where} did not report version {VERSION} AVAILABLE within {timeout_seconds:g} s "
        f"(last: {last}); a larger model needs a longer timeout",
        process.log_tail(),
    )


def in_process_answers(saved_model_dir: str, examples: Sequence[bytes]) -> Answers:
    """The `serving_tf_example` signature's answers to `examples`, run in this process (`tf.saved_model.load`).

    Raises:
        LoadCheckError: the SavedModel has no `serving_tf_example` signature.
    """
    import tensorflow as tf

    signatures = tf.saved_model.load(saved_model_dir).signatures
    if SIGNATURE_TF_EXAMPLE not in signatures:
        raise LoadCheckError(
            f"the SavedModel {saved_model_dir} has no `{SIGNATURE_TF_EXAMPLE}` signature (it has "
            f"{', '.join(sorted(signatures)) or 'none'}); export it with the Trainer's exporter "
            "(components.trainer.export), which writes the model contract's signatures"
        )
    signature = signatures[SIGNATURE_TF_EXAMPLE]
    probabilities, classes = [], []
    for start in range(0, len(examples), BATCH):
        batch = tf.constant(list(examples[start : start + BATCH]), dtype=tf.string)
        outputs = signature(**{INPUT_EXAMPLES: batch})
        probabilities.append(outputs[OUTPUT_PROBABILITIES].numpy())
        classes.append(outputs[OUTPUT_CLASSES].numpy())
    return Answers(np.concatenate(probabilities), np.concatenate(classes))


def _served_answers(rest_url: str, model_name: str, examples: Sequence[bytes], timeout_seconds: float) -> Answers:
    """The serving process's answers over REST (`:predict`, the `serving_tf_example` signature).

    Raises:
        LoadCheckError: a request failed.
    """
    from serving.errors import ServingError
    from serving.rest_client import RestClient

    probabilities, classes = [], []
    with RestClient(rest_url, model_name, timeout=timeout_seconds) as client:
        for start in range(0, len(examples), BATCH):
            batch = np.empty(len(examples[start : start + BATCH]), dtype=object)
            batch[:] = list(examples[start : start + BATCH])
            try:
                outputs = client.predict({INPUT_EXAMPLES: batch}, signature_name=SIGNATURE_TF_EXAMPLE, version=VERSION)
            except ServingError as error:
                raise LoadCheckError(
                    f"the model loaded but did not answer: predict on examples {start}-{start + len(batch) - 1} "
                    f"failed with {error.code.name}: {error.message}"
                ) from None
            probabilities.append(np.asarray(outputs[OUTPUT_PROBABILITIES], dtype=np.float32))
            classes.append(np.asarray(outputs[OUTPUT_CLASSES], dtype=np.int64))
    return Answers(np.concatenate(probabilities), np.concatenate(classes))
