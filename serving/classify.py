"""TF Serving's Classify API: tf.Examples in, (label, score) lists out.

A signature can serve Classify when it has exactly one input named `inputs` (serialized tf.Examples) and outputs
`classes` (string [batch, k]) and/or `scores` (float [batch, k]); TF Serving checks exactly that when its
signature method-name check is off (the default since TF 2 SavedModels all say `tensorflow/serving/predict`).
Messages follow `servables/tensorflow/classifier.cc` and `util/json_tensor.cc`.

Example:
    signature, inputs = classification_inputs(servable, request)
    result = classification_result(signature, servable.run(signature.name, inputs), len(inputs["inputs"]))
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import classification_pb2, input_pb2

from serving.errors import InvalidArgumentError
from serving.servable import DEFAULT_SIGNATURE, Servable, Signature

INPUTS, CLASSES, SCORES = "inputs", "classes", "scores"


def classification_signature(servable: Servable, name: str) -> Signature:
    """The signature a Classify request names ('' = serving_default), checked for Classify's shape.

    Raises:
        InvalidArgumentError: no such signature, or one without Classify's inputs/outputs.
    """
    key = name or DEFAULT_SIGNATURE
    if key not in servable.signatures:
        raise InvalidArgumentError(f"No signature was found with the name: {key}")
    signature = servable.signatures[key]
    if len(signature.inputs) != 1:
        raise InvalidArgumentError("Expected one input Tensor.")
    if len(signature.outputs) not in (1, 2):
        raise InvalidArgumentError(f"Expected one or two output Tensors, found {len(signature.outputs)}")
    if INPUTS not in signature.inputs:
        raise InvalidArgumentError(f"No classification inputs found in SignatureDef: {servable.signature_defs[key]}")
    if CLASSES not in signature.outputs and SCORES not in signature.outputs:
        raise InvalidArgumentError(
            f'Expected classification signature outputs to contain at least one of "{CLASSES}" or "{SCORES}". '
            f"Signature was: {servable.signature_defs[key]}"
        )
    return signature


def serialized_examples(request_input: input_pb2.Input) -> np.ndarray:
    """The examples of a Classify `Input` as a string array; a context is prepended to each example.

    Prepending works because concatenated serialized protos parse as their merge (TF Serving does the same).

    Raises:
        InvalidArgumentError: no examples.
    """
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        examples = [example.SerializeToString() for example in request_input.example_list.examples]
    elif kind == "example_list_with_context":
        with_context = request_input.example_list_with_context
        context = with_context.context.SerializeToString()
        examples = [context + example.SerializeToString() for example in with_context.examples]
    else:
        examples = []
    if not examples:
        raise InvalidArgumentError("Input is empty.")
    array = np.empty(len(examples), dtype=object)
    array[:] = examples
    return array


def bytes_values(request_input: input_pb2.Input) -> Iterator[bytes]:
    """Every bytes feature value of a Classify `Input`'s examples and context (where its images are)."""
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        examples = list(request_input.example_list.examples)
    elif kind == "example_list_with_context":
        with_context = request_input.example_list_with_context
        examples = [with_context.context, *with_context.examples]
    else:
        examples = []
    for example in examples:
        for feature in example.features.feature.values():
            yield from feature.bytes_list.value


def classification_inputs(
    servable: Servable, request: classification_pb2.ClassificationRequest
) -> tuple[Signature, dict[str, np.ndarray]]:
    """The signature and input arrays for a Classify request."""
    signature = classification_signature(servable, request.model_spec.signature_name)
    return signature, {INPUTS: serialized_examples(request.input)}


def classification_result(
    signature: Signature, outputs: Mapping[str, np.ndarray], num_examples: int
) -> classification_pb2.ClassificationResult:
    """Builds the ClassificationResult from the signature's outputs.

    Raises:
        InvalidArgumentError: outputs of the wrong rank, dtype or batch size (TF Serving's texts).
    """
    classes, scores = outputs.get(CLASSES), outputs.get(SCORES)
    for kind, array, dtype_name, is_dtype in (
        (CLASSES, classes, "DT_STRING", lambda a: a.dtype == object),
        (SCORES, scores, "DT_FLOAT", lambda a: a.dtype == np.float32),
    ):
        if array is None:
            continue
        if array.ndim != 2:
            raise InvalidArgumentError(f"Expected Tensor shape: [batch_size num_classes] but got {list(array.shape)}")
        if not is_dtype(array):
            raise InvalidArgumentError(f"Expected {kind} Tensor of {dtype_name}. Got: {array.dtype}")
        if array.shape[0] != num_examples:
            raise InvalidArgumentError(f"Expected {kind} output batch size of {num_examples}. Got: {array.shape[0]}")
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise InvalidArgumentError(
            f"Tensors class and score should match in dim_size(1). Got {classes.shape[1]} vs. {scores.shape[1]}"
        )
    num_classes = (classes if classes is not None else scores).shape[1]  # type: ignore[union-attr]
    result = classification_pb2.ClassificationResult()
    for row in range(num_examples):
        classifications = result.classifications.add()
        for column in range(num_classes):
            entry = classifications.classes.add()
            if classes is not None:
                entry.label = classes[row, column].decode("utf-8", "replace")
            if scores is not None:
                entry.score = float(scores[row, column])
    return result


# --- REST JSON -------------------------------------------------------------------------------------------------

_KIND_NAMES = {"bytes_list": "bytes", "float_list": "float", "int64_list": "int64", None: "UNKNOWN"}


def _json_type(value: Any) -> str:
    return {dict: "Object", list: "Array", type(None): "Null"}.get(type(value), type(value).__name__)


def _add_value(value: Any, name: str, feature: feature_pb2.Feature) -> None:
    kind = feature.WhichOneof("kind")

    def require(wanted: str) -> None:
        if kind not in (None, wanted):
            raise InvalidArgumentError(
                f"Unexpected element type in feature: {name} expecting type: {_KIND_NAMES[kind]}"
            )

    if isinstance(value, bool):
        require("int64_list")
        feature.int64_list.value.append(int(value))
    elif isinstance(value, dict):
        if not (len(value) == 1 and isinstance(value.get("b64"), str)):
            raise InvalidArgumentError(f"Feature: {name} has element with unexpected JSON type: Object")
        require("bytes_list")
        try:
            feature.bytes_list.value.append(base64.b64decode(value["b64"], validate=True))
        except (binascii.Error, ValueError):
            raise InvalidArgumentError("Unable to base64 decode") from None
    elif isinstance(value, str):
        require("bytes_list")
        feature.bytes_list.value.append(value.encode())
    elif isinstance(value, float):
        require("float_list")
        feature.float_list.value.append(value)
    elif isinstance(value, int):
        require("int64_list")
        if not -(2**63) <= value < 2**63:
            raise InvalidArgumentError(f"Feature: {name} has uint64 element. Only int64 is supported.")
        feature.int64_list.value.append(value)
    else:
        raise InvalidArgumentError(f"Feature: {name} has element with unexpected JSON type: {_json_type(value)}")


def example_from_json(value: Any) -> example_pb2.Example:
    """A tf.Example from `{"feature": value or [values], ...}` ({"b64": ...} for bytes).

    Raises:
        InvalidArgumentError: not an object, nested lists, nulls, or mixed kinds in one feature.
    """
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"Example must be JSON object but got JSON {_json_type(value)}")
    example = example_pb2.Example()
    for name, content in value.items():
        feature = example.features.feature[name]
        for item in content if isinstance(content, list) else [content]:
            if isinstance(item, list):
                raise InvalidArgumentError(f"Feature: {name} has element with unexpected JSON type: Array")
            _add_value(item, name, feature)
    return example


def classification_request_from_json(document: Mapping[str, Any]) -> input_pb2.Input:
    """The `Input` of a REST classify body (`examples`, optional `context`).

    Raises:
        InvalidArgumentError: TF Serving's texts for a missing, non-list or empty `examples`.
    """
    request_input = input_pb2.Input()
    has_context = "context" in document
    if has_context:
        request_input.example_list_with_context.context.CopyFrom(example_from_json(document["context"]))
    examples = document.get("examples")
    if "examples" not in document:
        raise InvalidArgumentError("When method is classify, key 'examples' is expected and was not found")
    if not isinstance(examples, list):
        raise InvalidArgumentError("Expecting 'examples' value to be an list/array")
    if not examples:
        raise InvalidArgumentError("'examples' value is an empty array")
    target = request_input.example_list_with_context.examples if has_context else request_input.example_list.examples
    for item in examples:
        target.add().CopyFrom(example_from_json(item))
    return request_input


def classification_result_to_json(result: classification_pb2.ClassificationResult) -> dict[str, Any]:
    """`{"results": [[[label, score], ...], ...]}`, TF Serving's REST classify response."""
    if not result.classifications:
        raise InvalidArgumentError("Cannot convert empty ClassificationResults to JSON")
    return {
        "results": [
            [[entry.label, float(np.float32(entry.score))] for entry in classifications.classes]
            for classifications in result.classifications
        ]
    }
