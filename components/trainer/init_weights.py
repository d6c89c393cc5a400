"""Pretrained weights (`trainer.init_weights`): the model starts from weights a file or folder holds.

Three formats, told apart by what is at the path (local, or on a bucket through tf.io.gfile; nothing is
downloaded at run time):
- a SavedModel directory (`saved_model.pb`), e.g. a version tfxp's Pusher wrote: loaded as a Keras model;
- a Keras HDF5 file (`.h5`, `model.save_weights("x.h5")` or a whole model): read with h5py, weight by weight;
- a TF2 checkpoint prefix (`<prefix>.index`), as `model.save_weights(prefix)` writes it: read with
  `tf.train.load_checkpoint`, its keys (`layer_with_weights-N/kernel/.ATTRIBUTES/VARIABLE_VALUE`) mapped onto
  the model's layers in order.

Weights are matched by name (by layer position for checkpoints) and shape. The classification head (`logits`)
stays new when its shape differs (other classes); every other weight must load, or nothing does: a file of
another architecture is an error naming the first mismatches, never a silent half-load.

Which public weights load: keras.applications' ResNet50 `.h5` files (v1, `…_notop.h5`) carry the layer names of
`resnet50_v1`'s backbone, which is that very model, so they match by name (not run here: nothing may be
downloaded; note they were trained on caffe-style BGR inputs, not tfxp's [-1, 1]). Model Garden's ResNet-50 v1.5
checkpoints do not load into `resnet50`: their variables follow Model Garden's own object graph
(`backbone/_block_group…`, official/vision/modeling/backbones/resnet.py), and tfxp has no name mapping for them.

Example:
    record = load_initial_weights(model, "gs://bucket/pretrained/resnet50.weights.h5")
    record.to_dict()  # {"source": ..., "format": "h5", "loaded": 318, "new_head": true, ...}
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras

from foundation.contract import SAVED_MODEL_FILE
from foundation.errors import TfxpError

HEAD_LAYER = "logits"


class InitWeightsError(TfxpError, ValueError):
    """`trainer.init_weights` names nothing loadable, or weights of another model."""


@dataclass(frozen=True)
class InitWeights:
    """What `trainer.init_weights` loaded.

    Attributes:
        source: The path it read ("" when init_weights is off).
        format: `saved_model`, `h5`, `checkpoint` or "".
        loaded: Weights set from the source.
        new_head: Whether the classification head kept its fresh weights (the classes differ).
        reason: One line for logs and the run summary.
    """

    source: str = ""
    format: str = ""
    loaded: int = 0
    new_head: bool = False
    reason: str = "trainer.init_weights is empty; random initial weights"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for `training_metrics.json`."""
        return asdict(self)


def detect_format(source: str) -> str:
    """`saved_model`, `h5` or `checkpoint`, from what is at `source`.

    Raises:
        InitWeightsError: nothing of these at the path.
    """
    path = source.rstrip("/")
    if tf.io.gfile.isdir(path) and tf.io.gfile.exists(f"{path}/{SAVED_MODEL_FILE}"):
        return "saved_model"
    if tf.io.gfile.exists(f"{path}.index"):
        return "checkpoint"
    if not tf.io.gfile.isdir(path) and tf.io.gfile.exists(path) and path.endswith((".h5", ".hdf5", ".keras")):
        return "h5"
    raise InitWeightsError(
        f"trainer.init_weights = {source!r}: no weights there; expected a SavedModel directory (with "
        f"{SAVED_MODEL_FILE}), a Keras .h5 weights file, or a TF2 checkpoint prefix (the path without .index)"
    )


def load_initial_weights(model: keras.Model, source: str) -> InitWeights:
    """Sets `model`'s weights from `source` (call before compiling, outside a distribution strategy's scope).

    Raises:
        InitWeightsError: an unknown format, or weights that do not fit this model (the first mismatches named).
    """
    if not source:
        return InitWeights()
    kind = detect_format(source)
    values = dict(_READERS[kind](source, model))
    head_names = {weight.name for weight in model.get_layer(HEAD_LAYER).weights}
    assignments, mismatches, new_head = [], [], False
    for weight in model.weights:
        value = values.get(weight.name)
        if value is not None and tuple(value.shape) == tuple(weight.shape):
            assignments.append((weight, value))
        elif weight.name in head_names:
            new_head = True
        else:
            found = "missing" if value is None else f"{tuple(value.shape)} there"
            mismatches.append(f"{weight.name} ({tuple(weight.shape)} here, {found})")
    if mismatches:
        raise InitWeightsError(
            f"trainer.init_weights = {source!r} ({kind}) does not hold this {model.name} model's weights: "
            f"{len(mismatches)} of {len(model.weights)} do not fit, e.g. {'; '.join(mismatches[:3])}. Point it at "
            f"weights of a {model.name} (trainer.model), or leave it empty"
        )
    if new_head:
        assignments = [(weight, value) for weight, value in assignments if weight.name not in head_names]
    for weight, value in assignments:
        weight.assign(value)
    head = "a new head (the classes differ)" if new_head else "its head"
    return InitWeights(source, kind, len(assignments), new_head, f"started from {source} ({kind}), with {head}")


def _saved_model(source: str, model: keras.Model) -> Iterator[tuple[str, np.ndarray]]:
    try:
        loaded = keras.models.load_model(source, compile=False)
    except Exception as error:  # not a Keras SavedModel, unknown layers, corrupt variables
        raise InitWeightsError(
            f"trainer.init_weights = {source!r}: the SavedModel cannot be loaded as a Keras model "
            f"({type(error).__name__}: {(str(error).splitlines() or [''])[0]})"
        ) from None
    for weight in loaded.weights:
        yield weight.name, weight.numpy()


def _h5(source: str, model: keras.Model) -> Iterator[tuple[str, np.ndarray]]:
    import h5py

    with tempfile.NamedTemporaryFile(suffix=".h5") as local:
        tf.io.gfile.copy(source, local.name, overwrite=True)  # h5py reads local files only
        with h5py.File(local.name, "r") as handle:
            root = handle.get("model_weights", handle)  # a whole model's file, or weights only
            found: list[tuple[str, np.ndarray]] = []

            def visit(name: str, node: Any) -> None:
                if isinstance(node, h5py.Dataset):
                    # Keras writes <layer>/<layer>/<weight>:0 (the layer group, then the weight's own name).
                    found.append((name.split("/", 1)[-1], np.asarray(node)))

            root.visititems(visit)
    yield from found


def _checkpoint(source: str, model: keras.Model) -> Iterator[tuple[str, np.ndarray]]:
    reader = tf.train.load_checkpoint(source)
    keys = reader.get_variable_to_shape_map()
    for key, weight in _checkpoint_keys(model, ""):
        if key in keys:
            yield weight.name, reader.get_tensor(key)


def _checkpoint_keys(model: keras.Model, prefix: str) -> Iterator[tuple[str, tf.Variable]]:
    # How `Model.save_weights` names a functional model's dependencies: layers with weights in order, then each
    # weight by its attribute (kernel, bias, gamma, ...); a nested model (keras.applications) nests the same way.
    layers = [layer for layer in model.layers if layer.weights]
    for index, layer in enumerate(layers):
        path = f"{prefix}layer_with_weights-{index}/"
        if isinstance(layer, keras.Model):
            yield from _checkpoint_keys(layer, path)
            continue
        for weight in layer.weights:
            attribute = weight.name.rsplit("/", 1)[-1].split(":", 1)[0]
            yield f"{path}{attribute}/.ATTRIBUTES/VARIABLE_VALUE", weight


_READERS = {"saved_model": _saved_model, "h5": _h5, "checkpoint": _checkpoint}
