"""TF Serving's REST JSON form of tensors: request bodies to numpy inputs, outputs to response bodies.

Follows `tensorflow_serving/util/json_tensor.cc`: the row (`instances`) and columnar (`inputs`) request
formats, `{"b64": ...}` for binary strings, and the same error texts. A body is refused (400, never a 500)
when it nests deeper than `serving.limits.MAX_JSON_DEPTH` levels or holds a lone UTF-16 surrogate
(`"\\ud800"`), which Python's parser accepts but no tensor or proto string can hold.

Example:
    document = parse_json_body(b'{"instances": [[0.5, 0.25]]}')
    inputs, fmt = predict_inputs_from_json(document, {"x": dtype_of(types_pb2.DT_FLOAT)})
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from tensorflow.core.framework import types_pb2

from foundation.bounded import JsonTooDeepError, parse_json
from serving.errors import InvalidArgumentError
from serving.limits import MAX_JSON_DEPTH
from serving.tensors import DType, shape_string

# --- requests --------------------------------------------------------------------------------------------------

ROW = "row"
COLUMNAR = "columnar"
_MAX_VALUE_CHARS = 256  # TF Serving echoes whole JSON values in errors; we cut them for large bodies.


def _json_text(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS] + "..."


def _json_type(value: Any) -> str:
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


# A `\\uD800`-`\\uDFFF` escape: the only way a lone surrogate gets into a parsed body (raw bytes would not be UTF-8).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def parse_json_body(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any]:
    """Parses a request body that must be a JSON object.

    Args:
        body: The raw (decompressed) body.
        max_depth: Most levels of nested arrays and objects; the body's own object is level 1.

    Raises:
        InvalidArgumentError: empty body, invalid JSON, not an object (TF Serving's texts), nesting deeper
            than `max_depth`, or a lone surrogate in a string.
    """
    if not body.strip():
        raise InvalidArgumentError("JSON Parse error: The document is empty")
    try:
        document = parse_json(body)
    except JsonTooDeepError:  # far deeper than max_depth: the C parser gave up
        raise InvalidArgumentError(_too_deep(max_depth)) from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, an integer of over 4300 digits
        message = getattr(error, "msg", None) or getattr(error, "reason", None) or str(error)
        offset = getattr(error, "pos", getattr(error, "start", 0))
        raise InvalidArgumentError(f"JSON Parse error: {message} at offset: {offset}") from None
    if not isinstance(document, dict):
        raise InvalidArgumentError(f"JSON Value: {_json_text(document)} Is not object")
    _check_document(document, max_depth, check_text=_SURROGATE_ESCAPE.search(body) is not None)
    return document


def _too_deep(max_depth: int) -> str:
    return (
        f"JSON Parse error: the document nests arrays and objects deeper than {max_depth} levels, this server's limit"
    )


def _check_document(document: dict[str, Any], max_depth: int, check_text: bool) -> None:
    # Level by level, without recursion: every later step (and json.dumps in messages) recurses per level.
    level: list[Any] = [document]
    depth = 1
    while level:
        if depth > max_depth:
            raise InvalidArgumentError(_too_deep(max_depth))
        deeper: list[Any] = []
        for node in level:
            children = list(node.values()) if isinstance(node, dict) else node
            if check_text:
                texts = [*node.keys(), *children] if isinstance(node, dict) else children
                _check_texts(texts)
            deeper.extend(child for child in children if isinstance(child, list | dict))
        level = deeper
        depth += 1


def _check_texts(values: list[Any]) -> None:
    for value in values:
        if isinstance(value, str):
            try:
                value.encode()
            except UnicodeEncodeError:
                raise InvalidArgumentError("JSON Parse error: The surrogate pair in string is invalid.") from None


def signature_name_of(document: Mapping[str, Any]) -> str:
    """The optional `signature_name` of a request body ('' when absent).

    Raises:
        InvalidArgumentError: `signature_name` is not a string.
    """
    name = document.get("signature_name", "")
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"JSON Value: {_json_text(document)} not formatted correctly. 'signature_name' key must be a string value."
        )
    return name


def _is_b64(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _is_named_object(value: Any) -> bool:
    return isinstance(value, dict) and not _is_b64(value)


def _convert_leaf(value: Any, dtype: DType) -> Any:
    def type_error() -> InvalidArgumentError:
        return InvalidArgumentError(
            f"JSON Value: {_json_text(value)} Type: {_json_type(value)} is not of expected type: {dtype.name}"
        )

    if isinstance(value, dict):
        if dtype.enum != types_pb2.DT_STRING:
            raise type_error()
        if not _is_b64(value):
            raise InvalidArgumentError(f"JSON Value: {_json_text(value)} not formatted correctly for base64 data")
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgumentError("Unable to base64 decode") from None
    if dtype.enum == types_pb2.DT_STRING:
        if not isinstance(value, str):
            raise type_error()
        return value.encode()
    if dtype.enum == types_pb2.DT_BOOL:
        if not isinstance(value, bool):
            raise type_error()
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise type_error()
    if dtype.numpy in (np.float32, np.float64):
        try:
            return float(value)
        except OverflowError:  # an integer beyond any double, e.g. 400 nines
            raise InvalidArgumentError(
                f"JSON Value: {_json_text(value)} is out of range for type: {dtype.name}"
            ) from None
    if not isinstance(value, int):
        raise type_error()
    info = np.iinfo(dtype.numpy)
    if not info.min <= value <= info.max:
        raise type_error()
    return value


def _dense_shape(value: Any) -> tuple[int, ...]:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape)


def _fill(value: Any, level: int, shape: tuple[int, ...], dtype: DType, out: list[Any]) -> None:
    rank = len(shape)
    if not isinstance(value, list):
        if level != rank:
            raise InvalidArgumentError(
                f"JSON Value: {_json_text(value)} found at incorrect level: {level + 1} in the JSON DOM. "
                f"Expected at level: {rank}"
            )
        out.append(_convert_leaf(value, dtype))
        return
    if level >= rank:
        raise InvalidArgumentError(f"Encountered list at unexpected level: {level} expected < {rank}")
    if len(value) != shape[level]:
        raise InvalidArgumentError(
            f"Encountered list at unexpected size: {len(value)} at level: {level} expected size: {shape[level]}"
        )
    for item in value:
        _fill(item, level + 1, shape, dtype, out)


def json_to_ndarray(value: Any, dtype: DType) -> np.ndarray:
    """A dense tensor from a (nested) JSON list or scalar, validated level by level as TF Serving does."""
    shape = _dense_shape(value)
    values: list[Any] = []
    _fill(value, 0, shape, dtype, values)
    array = np.empty(len(values), dtype=object) if dtype.enum == types_pb2.DT_STRING else None
    if array is not None:
        array[:] = values
    else:
        array = np.asarray(values, dtype=dtype.numpy)
    return array.reshape(shape)


def _status_text(error: InvalidArgumentError) -> str:
    return f"INVALID_ARGUMENT: {error.message}"


def _instances_to_inputs(instances: list[Any], input_types: Mapping[str, DType]) -> dict[str, np.ndarray]:
    if not _is_named_object(instances[0]) and len(input_types) > 1:
        raise InvalidArgumentError(
            "instances is a plain list, but expecting list of objects as multiple input tensors required as per "
            "tensorinfo_map"
        )
    objects = _is_named_object(instances[0])
    names = sorted(input_types)
    rows: dict[str, list[np.ndarray]] = {name: [] for name in names}

    def add(index: int, name: str, value: Any, keyed: bool) -> None:
        try:
            if name not in input_types:
                raise InvalidArgumentError(f"JSON object: does not have named input: {name}")
            row = json_to_ndarray(value, input_types[name])
            if rows[name]:
                first = rows[name][0]
                if first.size != row.size:
                    raise InvalidArgumentError(f"Expecting tensor size: {first.size} but got: {row.size}")
                if first.shape != row.shape:
                    raise InvalidArgumentError(
                        f"Expecting shape {shape_string(first.shape)} but got: {shape_string(row.shape)}"
                    )
            rows[name].append(row)
        except InvalidArgumentError as error:
            where = f"{index} key: {name}" if keyed else f"{index}"
            raise InvalidArgumentError(
                f"Failed to process element: {where} of 'instances' list. Error: {_status_text(error)}"
            ) from None

    for index, element in enumerate(instances):
        if objects:
            if not _is_named_object(element):
                raise InvalidArgumentError(f"Expecting object but got list at item {index} of input list")
            for name, value in element.items():
                add(index, name, value, keyed=True)
            if sorted(element) != names:
                raise InvalidArgumentError(
                    f"Failed to process element: {index} of 'instances' list. JSON object: {_json_text(element)} "
                    f"keys must be equal to: {','.join(names)}"
                )
        else:
            if _is_named_object(element):
                raise InvalidArgumentError(f"Expecting value/list but got object at item {index} of input list")
            add(index, names[0], element, keyed=False)
    return {name: _stack(values, input_types[name]) for name, values in rows.items()}


def _stack(rows: list[np.ndarray], dtype: DType) -> np.ndarray:
    if dtype.enum != types_pb2.DT_STRING:
        return np.stack(rows)
    stacked = np.empty((len(rows), *rows[0].shape), dtype=object)
    for index, row in enumerate(rows):
        stacked[index, ...] = row
    return stacked


def _inputs_to_arrays(inputs: Any, input_types: Mapping[str, DType]) -> dict[str, np.ndarray]:
    if not isinstance(inputs, dict) or _is_b64(inputs):
        if len(input_types) > 1:
            raise InvalidArgumentError(
                "inputs is a plain value/list, but expecting an object as multiple input tensors required as per "
                "tensorinfo_map"
            )
        name = next(iter(input_types))
        return {name: json_to_ndarray(inputs, input_types[name])}
    arrays = {}
    for name, dtype in input_types.items():
        if name not in inputs:
            raise InvalidArgumentError(f"Missing named input: {name} in 'inputs' object.")
        arrays[name] = json_to_ndarray(inputs[name], dtype)
    return arrays


def predict_inputs_from_json(
    document: Mapping[str, Any], input_types: Mapping[str, DType]
) -> tuple[dict[str, np.ndarray], str]:
    """The input arrays of a REST predict body and its format (`ROW` or `COLUMNAR`).

    Args:
        document: The parsed body.
        input_types: The signature's inputs (alias → dtype).

    Raises:
        InvalidArgumentError: with TF Serving's message for each malformed case.
    """
    if not input_types:
        raise InvalidArgumentError("Failed to get input map for signature")
    has_instances, has_inputs = "instances" in document, "inputs" in document
    if has_instances and has_inputs:
        raise InvalidArgumentError(
            f"JSON Value: {_json_text(document)} Not formatted correctly expecting only one of 'inputs' or "
            "'instances' keys to exist "
        )
    if has_instances:
        instances = document["instances"]
        if not isinstance(instances, list):
            raise InvalidArgumentError(f"JSON Value: {_json_text(document)} Excepting 'instances' to be an list/array")
        if not instances:
            raise InvalidArgumentError(f"JSON Value: {_json_text(document)} No values in 'instances' array")
        return _instances_to_inputs(instances, input_types), ROW
    if has_inputs:
        return _inputs_to_arrays(document["inputs"], input_types), COLUMNAR
    raise InvalidArgumentError("Missing 'inputs' or 'instances' key")


# --- responses -------------------------------------------------------------------------------------------------


def _jsonable(name: str, array: np.ndarray) -> Any:
    if array.dtype == object or array.dtype.kind in "SU":
        # TF Serving base64-encodes string outputs whose alias ends in `_bytes`; others go out as text.
        if name.endswith("_bytes"):
            encode = np.vectorize(lambda value: {"b64": base64.b64encode(value).decode()}, otypes=[object])
        else:
            encode = np.vectorize(
                lambda value: value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value),
                otypes=[object],
            )
        return encode(array).tolist() if array.size else array.tolist()
    return array.tolist()


def outputs_to_json(outputs: Mapping[str, np.ndarray], fmt: str) -> dict[str, Any]:
    """The response body for predict outputs in the request's format.

    Raises:
        InvalidArgumentError: row format with an output that has no batch dimension, or inconsistent batch sizes.
    """
    if not outputs:
        raise InvalidArgumentError("Cannot convert empty tensor map to JSON")
    if fmt == COLUMNAR:
        if len(outputs) == 1:
            ((name, array),) = outputs.items()
            return {"outputs": _jsonable(name, array)}
        return {"outputs": {name: _jsonable(name, array) for name, array in outputs.items()}}
    batch = -1
    for name, array in outputs.items():
        if array.ndim == 0:
            raise InvalidArgumentError(f"Tensor name: {name} has no shape information ")
        if batch >= 0 and array.shape[0] != batch:
            raise InvalidArgumentError(
                f"Tensor name: {name} has inconsistent batch size: {array.shape[0]} expecting: {batch}"
            )
        batch = array.shape[0]
    columns = {name: _jsonable(name, array) for name, array in outputs.items()}
    if len(columns) == 1:
        return {"predictions": next(iter(columns.values()))}
    return {"predictions": [{name: column[row] for name, column in columns.items()} for row in range(batch)]}
