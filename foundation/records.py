"""Files tfxp wrote and reads back (records), read bounded and checked against a typed model, with one message.

A run summary, a release record, a rollout state or decision, run-spec's `mlmd.json`, a push or run record: tfxp
wrote each, but a person, a crash or another tool may have changed it since, into a FIFO, a sparse 3 GB file, JSON
of another shape or a number that reads as infinity (`1e999`). Each is read here: through `foundation.bounded`
(a regular file only, at most MAX_DOCUMENT_BYTES), parsed with `parse_json`, and validated with the caller's
pydantic model (or `TypeAdapter`), so a damaged record is one `RecordError` naming the file, the field and the fix,
never a KeyError or a TypeError three calls later. Models of records forbid infinities and NaN (`FINITE`).

Example:
    summary = read_record(path, RunSummary, "run summary", "rerun `tfxp run` to write it again")
    state = parse_record(text, StateFile, f"rollout state {where}", "remove it to start afresh")
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from foundation.bounded import MAX_DOCUMENT_BYTES, parse_json, read_file
from foundation.errors import TfxpError

M = TypeVar("M")

# The config of every record model: a number that reads as infinity or NaN (`1e999` is valid JSON) is refused.
FINITE = ConfigDict(allow_inf_nan=False)


class RecordError(TfxpError, ValueError):
    """A record tfxp wrote cannot be read back: not readable, too large, not JSON, or not of its shape."""


def validation_reason(error: ValidationError) -> str:
    """The first problem pydantic found, as `field.path: what` (`next_id: Input should be a valid integer`)."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "value_error":  # a model's own check: its message says what and where
        what = str(first["ctx"]["error"])
        return f"{where}: {what}" if where else what
    return f"{where or 'the document'}: {first['msg']}"


def parse_record(data: str | bytes, model: type[M] | TypeAdapter[M], what: str, fix: str) -> M:
    """`data` (a record's text) parsed as JSON and validated as `model`.

    Args:
        data: the record's text or bytes.
        model: a pydantic model class, or a `TypeAdapter` (a dataclass, a list of models).
        what: how the message names it, with its path: `rollout state /srv/digits/tfxp_rollout/state.json`.
        fix: what to do about it: `restore it from a backup, or remove it`.

    Raises:
        RecordError: not UTF-8 JSON, or not of the model's shape (the message names the first field).
    """
    try:
        loaded = parse_json(data)
    except ValueError as error:  # not JSON or UTF-8, or nested too deep
        raise RecordError(f"{what} is not JSON ({error}); {fix}") from None
    adapter: TypeAdapter[M] = model if isinstance(model, TypeAdapter) else TypeAdapter(model)
    try:
        return adapter.validate_python(loaded)
    except ValidationError as error:
        raise RecordError(f"{what} is not a record as tfxp writes one ({validation_reason(error)}); {fix}") from None


def read_record(
    path: str | Path, model: type[M] | TypeAdapter[M], what: str, fix: str, *, limit: int = MAX_DOCUMENT_BYTES
) -> M:
    """The record at `path` (local or a bucket object), read bounded and validated as `model`.

    Args:
        path: the file.
        model: as `parse_record`.
        what: how the message names it, without its path (`run summary`); the path is added.
        fix: what to do about it.
        limit: the most bytes read.

    Raises:
        FileNotFoundError: there is no such file (callers decide what absence means).
        RecordError: not a regular file (a FIFO), unreadable, larger than `limit`, not JSON, or of another shape.
    """
    named = f"{what} {path}"
    try:
        data = read_file(path, limit, named, fix)
    except FileNotFoundError:
        raise
    except TfxpError as error:  # TooLargeError: its message names the file, the cap and the fix
        raise RecordError(str(error)) from None
    except OSError as error:
        raise RecordError(f"cannot read {named} ({error.strerror or error}); {fix}") from None
    return parse_record(data, model, named, fix)


class Record(BaseModel):
    """A base for record models: unknown keys kept (a record written by a newer tfxp still reads), numbers finite."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
