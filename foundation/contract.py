"""The model and data contract (docs/architecture.md), each name written once, and the one label-map reader/writer.

Every package that builds, reads or serves a tfxp model imports its names from here: the Trainer's export
(`components.trainer.export`), TFMA's eval config (`pipeline.pipeline`), the serving client and server
(`serving/`) and the TFLite conversion (`edge/`). The module imports nothing beyond the standard library, so
the CLI, TFX glue and pure modules can all use it without pulling in TensorFlow or Keras.

Model contract (SavedModel signatures; all three serving signatures return the same outputs):

- `SIGNATURE_DEFAULT`: `INPUT_IMAGE_BYTES` string [None] → `OUTPUT_PROBABILITIES` float32 [None, C],
  `OUTPUT_CLASSES` int64 [None]
- `SIGNATURE_TF_EXAMPLE`: `INPUT_EXAMPLES` string [None] (serialized tf.Examples) → the same outputs
- `SIGNATURE_PREPROCESSED`: `INPUT_IMAGES` float32 [None, H, W, C] → the same outputs
- `SIGNATURE_EVAL_LABELS` (TFMA only): `INPUT_EXAMPLES` → `EVAL_LABEL_KEY` int64 [None]

Label map: one class a line, line i = label i-1 (`read_label_map`, `write_label_map`): a class name, or a WordNet
synset optionally followed by its description (ImageNet's `n01440764` or `n01440764 tench, Tinca tinca`), whose
class name is the synset.

Example:
    labels = read_label_map("data/digits/labels.txt")  # ["0", "1", ..., "9"]
    outputs = servable.run(SIGNATURE_DEFAULT, {INPUT_IMAGE_BYTES: images})[OUTPUT_PROBABILITIES]
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

from foundation.bounded import MAX_DOCUMENT_BYTES, TooLargeError, read_file
from foundation.errors import TfxpError
from foundation.paths import write_text
from foundation.shown_text import escape_controls, has_controls

SAVED_MODEL_FILE = "saved_model.pb"
"""The file that makes a version directory a complete, servable SavedModel (published last on a bucket)."""

# Signature keys of the exported SavedModel.

SIGNATURE_DEFAULT = "serving_default"
SIGNATURE_TF_EXAMPLE = "serving_tf_example"
SIGNATURE_PREPROCESSED = "serving_preprocessed"
# TFMA runs it as a preprocessing function: the example's label minus `data.label_offset`, a 0-based class id.
SIGNATURE_EVAL_LABELS = "tfxp_eval_labels"
EVAL_LABEL_KEY = "label_index"

# Signature inputs and outputs.
INPUT_IMAGE_BYTES = "image_bytes"
INPUT_EXAMPLES = "examples"
INPUT_IMAGES = "images"
OUTPUT_PROBABILITIES = "probabilities"
OUTPUT_CLASSES = "classes"

# tf.Example features of the data contract.
IMAGE_KEY = "image/encoded"
LABEL_KEY = "image/class/label"
TEXT_KEY = "image/class/text"
# Written by TensorFlow's ImageNet build scripts beside the label; `tfxp run` matches it against the label map to
# tell 0-based from 1-based labels (`data.label_offset: auto`).
SYNSET_KEY = "image/class/synset"

# The accuracy metric, as Keras and TFMA name it (`SparseCategoricalAccuracy`).
ACCURACY_METRIC = "sparse_categorical_accuracy"

# Files that travel with the data and the model; the `*_ASSET` paths are relative to the SavedModel directory.
LABELS_FILE = "labels.txt"
PREPROCESSING_FILE = "preprocessing.json"
LABELS_ASSET = f"assets/{LABELS_FILE}"
PREPROCESSING_ASSET = f"assets/{PREPROCESSING_FILE}"
WARMUP_ASSET = "assets.extra/tf_serving_warmup_requests"

# The EdgeModel directory (`<edge base>/<model>/<version>/`).
EDGE_MODEL_FILE = "model.tflite"
EDGE_METADATA_FILE = "edge_metadata.json"
EDGE_HELD_KEY = "held"
"""`edge_metadata.json` key, true in the EdgeModel artifact of a release held until its SavedModel is promoted
(`serving.rollout: canary`, `edge.held`)."""
# The Trainer writes its metrics beside the SavedModel (Model artifact dir) and in its run dir.
TRAINING_METRICS_FILE = "training_metrics.json"

# A WordNet id then whitespace: the rest of the line describes the synset and is not part of the class name.
_SYNSET_LINE = re.compile(r"^(n\d{8})\s")

MISSING_LABELS_HINT = (
    f"set data.labels to the label map, or put a {LABELS_FILE} (one class name a line, as `tfxp data` writes) "
    "in data.path"
)


class LabelMapError(TfxpError, ValueError):
    """A label map that cannot be read, or names that cannot be written as one; says which file and line."""


def parse_label_map(text: str, source: str) -> list[str]:
    """The class names of a label map's text: one class a line, line i = label i-1.

    The one rule every reader shares: lines end in `\\n` and names are stripped of surrounding whitespace (so
    `\\r\\n` files work), blank lines at the end are ignored, and anything else that would shift or merge class ids
    is an error, as is a name holding a control character (`class_name_problem`). A line
    that starts with a WordNet synset and whitespace (`n01440764 tench, Tinca tinca`, ImageNet's metadata files)
    names the class by its synset; the description after it is not part of the name (ImageNet's descriptions
    repeat: two synsets are "crane").

    Args:
        text: The file's contents.
        source: The file's path, named in errors.

    Returns:
        The class names, index = class id.

    Raises:
        LabelMapError: a blank line before the last name (its line), a name listed twice (both lines), a name
            with a control character (its line), or fewer than two names.

    Example:
        parse_label_map("cat\\r\\ndog \\n\\n", "labels.txt")  # ["cat", "dog"]
        parse_label_map("n01440764 tench, Tinca tinca\\nn01443537\\tgoldfish\\n", "synsets.txt")  # synsets
    """
    # Split on \n alone: str.splitlines also breaks at \r, \x0b, \x1c-\x1e, \x85 and \u2028, which would shift ids.
    names = [_class_name(line.strip()) for line in text.split("\n")]
    while names and not names[-1]:
        names.pop()
    first_line: dict[str, int] = {}
    for number, name in enumerate(names, start=1):
        if not name:
            raise LabelMapError(
                f"label map {source} has a blank line at line {number}; every line names the class of that "
                "index, so remove the blank line (or name the class)"
            )
        problem = class_name_problem(name)
        if problem:
            raise LabelMapError(
                f"label map {source} line {number}: the class name {problem}; remove it from the name (one class "
                "name a line, each line ending in \\n)"
            )
        if name in first_line:
            raise LabelMapError(
                f"label map {source} names {name!r} twice, at lines {first_line[name]} and {number}; "
                "each class needs its own name"
            )
        first_line[name] = number
    if len(names) < 2:
        raise LabelMapError(
            f"label map {source} lists {len(names)} class(es); a classifier needs at least two "
            "(one class name a line, line i = label i-1)"
        )
    return names


# Characters a class name may not hold beside the controls of `foundation.shown_text`: the Unicode line and
# paragraph separators, which line-based readers of labels.txt (an app's, str.splitlines) take as line breaks.
_SEPARATORS = re.compile("[\u2028\u2029]")


def class_name_problem(name: str) -> str | None:
    """Why `name` cannot be a class name, or None: a control character (ESC, CR, DEL, C1, a bidirectional
    override) or a line separator would reach terminals, reports, the served model's answers and apps raw.

    Example:
        class_name_problem("cat\x1b[31m")  # "'cat\\x1b[31m' holds the control character \\x1b"
    """
    if not has_controls(name) and _SEPARATORS.search(name) is None:
        return None

    def shown(text: str) -> str:
        return _SEPARATORS.sub(lambda match: f"\\u{ord(match.group()):04x}", escape_controls(text))

    first = next(character for character in name if shown(character) != character)
    return f"'{shown(name)}' holds the control character {shown(first)}"


def _class_name(line: str) -> str:
    synset = _SYNSET_LINE.match(line)
    return synset.group(1) if synset else line


def read_label_map(path: str | Path, missing_hint: str = MISSING_LABELS_HINT) -> list[str]:
    """Reads a label map from a local path, or a bucket path (`gs://...`) through `tf.io.gfile`.

    Args:
        path: The label map file.
        missing_hint: What to do when the file does not exist: where the caller took the path from.
            Defaults to the config keys that set it (`data.labels`, or labels.txt in `data.path`).

    Returns:
        The class names, index = class id (see `parse_label_map` for the rule).

    Raises:
        LabelMapError: the file is missing or unreadable (naming it and `missing_hint`), is not UTF-8 text,
            or breaks the rule of `parse_label_map`.

    Example:
        labels = read_label_map(config.data.labels_path)
    """
    source = str(path)
    try:
        data = read_file(source, MAX_DOCUMENT_BYTES, f"label map {source}", "a label map holds one class name a line")
    except TooLargeError as error:
        raise LabelMapError(str(error)) from None
    except FileNotFoundError:
        raise LabelMapError(f"label map {source} does not exist; {missing_hint}") from None
    except OSError as error:
        raise LabelMapError(f"cannot read label map {source}: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark from Windows editors is not part of the first name
    except UnicodeDecodeError as error:
        raise LabelMapError(
            f"label map {source} is not UTF-8 text (byte {error.start} is {data[error.start : error.start + 1]!r}); "
            "it must hold one class name a line"
        ) from None
    return parse_label_map(text, source)


def write_label_map(path: str | Path, labels: Sequence[str]) -> None:
    """Writes a label map that `read_label_map` reads back as `labels` (local path or bucket).

    Args:
        path: The file to write (its directory must exist for local paths).
        labels: Class names, index = class id.

    Raises:
        LabelMapError: a name is empty, spans lines, holds a control character, has surrounding whitespace or
            starts with a WordNet id and whitespace (it would not read back the same), a name is repeated, or
            there are fewer than two.
    """
    target = str(path)
    for name in labels:
        problem = class_name_problem(name)
        if problem:
            raise LabelMapError(f"the class name {problem}, so it cannot go into {target}; remove it from the name")
        if not name.strip() or "\n" in name or name != name.strip():
            raise LabelMapError(
                f"class name {name!r} cannot go into {target}: names must be non-empty single lines without "
                "surrounding whitespace"
            )
    text = "".join(f"{name}\n" for name in labels)
    read_back = parse_label_map(text, target)  # the same rule as the reader: no duplicates, at least two names
    for name, read in zip(labels, read_back, strict=True):
        if name != read:
            raise LabelMapError(
                f"class name {name!r} cannot go into {target}: it would read back as the synset {read!r} (a line "
                "that starts with a WordNet id and whitespace names that synset)"
            )
    write_text(target, text)


def label_map_digest(path: str | None) -> str:
    """16 hex digits of the SHA-256 of a label map file's bytes, which keys a cache on its content (a renamed class
    changes it); `none` without a path, `unreadable` when it cannot be read (its reader then fails, naming it)."""
    if not path:
        return "none"
    try:
        data = read_file(path, MAX_DOCUMENT_BYTES, f"label map {path}", "give data.labels a label map file")
    except (OSError, TooLargeError):
        return "unreadable"
    return hashlib.sha256(data).hexdigest()[:16]
