"""The served model: the newest complete version under a TF Serving base path, checked as an Evaluator baseline.

What TF Serving serves is the highest version directory that holds a model (`foundation.publish` owns the rule
of what a version is and writes them; a local publish appears in one rename, a bucket publish writes
`SAVED_MODEL_FILE` last). Under a guarded rollout (`serving.rollout`), what is served to every request the
canary does not take is the `stable` version of the base's rollout state, whichever version is newest: the state
wins whenever the base holds one. Hidden staging directories, names that are no version (`5.tmp`, `²`, a number beyond
int64) and versions still being copied are not served, so they are not the baseline either. `find_served_model`
is the one answer to "what is served" for ServedBaseline, warm start and the run summary.

A baseline must load and carry the signatures the Evaluator runs (`SIGNATURE_TF_EXAMPLE` for predictions and
`SIGNATURE_EVAL_LABELS` for the labels); otherwise `check_served_model` raises `ServedModelError` naming the
version, its path, what is wrong and the two ways out (fix or remove the version, or `evaluator.baseline: none`).

Paths may be local or buckets (`foundation.paths`); TensorFlow is imported only to load or stat the model.

Example:
    served = find_served_model("tfxp_output/serving/digits")
    if served is not None:
        check_served_model(served)  # raises ServedModelError
        copy_model(served.path, f"{artifact_uri}/Format-Serving")
"""

from __future__ import annotations

from dataclasses import dataclass

from components.baseline.comparable import label_map_mismatch
from foundation import paths
from foundation.contract import (
    LABELS_ASSET,
    SAVED_MODEL_FILE,
    SIGNATURE_EVAL_LABELS,
    SIGNATURE_TF_EXAMPLE,
    LabelMapError,
    read_label_map,
)
from foundation.errors import TfxpError
from foundation.publish import (
    list_versions,
    newest_version,
    push_identity,
    read_push_record,
    trained_spans,
    version_number,
)
from serving.rollout.state import read_rollout

# What the Evaluator runs on a baseline (pipeline.component_settings.eval_config): predictions, then TFMA's labels.
EVAL_SIGNATURES = (SIGNATURE_TF_EXAMPLE, SIGNATURE_EVAL_LABELS)
BASELINE_NONE_HINT = "set evaluator.baseline: none to evaluate without comparing with the served model"


class ServedModelError(TfxpError, RuntimeError):
    """The served version cannot be the Evaluator's baseline; the message names it and the way out."""


@dataclass(frozen=True)
class ServedModel:
    """One served version.

    Attributes:
        version: The version directory's name, e.g. `1796083574`.
        path: `<base>/<version>`.
        identity: What `foundation.publish` recorded as its identity (`foundation.model_identity`; the pushed
            SavedModel's path in records written before it); "" for a version another tool wrote.
        trained_spans: The spans its model was trained on, from its push record (`publish.trained_spans`); None
            when the record does not say.
    """

    version: str
    path: str
    identity: str = ""
    trained_spans: tuple[int, ...] | None = None


def find_served_model(base: str) -> ServedModel | None:
    """The served version under the serving base path: the rollout's `stable` when the base has a rollout state,
    else the newest complete version; None when nothing is served yet.

    Args:
        base: The TF Serving model base path (`<serving base>/<model>`), local or a bucket.

    Returns:
        The version TF Serving serves (to every request outside the canary's share); None when `base` does not
        exist or holds no complete version.

    Raises:
        ServedModelError: the rollout's stable version is not a complete version under `base`.
    """
    if not base:
        return None
    stable = read_rollout(base).stable
    path = newest_version(base, required_file=SAVED_MODEL_FILE) if stable is None else _stable_path(base, stable)
    if path is None:
        return None
    record = read_push_record(path)
    return ServedModel(
        version=paths.name_of(path), path=path, identity=push_identity(record), trained_spans=trained_spans(record)
    )


def _stable_path(base: str, stable: int) -> str:
    for path in list_versions(base, required_file=SAVED_MODEL_FILE):
        if version_number(paths.name_of(path)) == stable:
            return path
    raise ServedModelError(
        f"the rollout state of {base} names version {stable} as stable, but {base} holds no complete version "
        f"{stable} (a {SAVED_MODEL_FILE} in {base}/{stable}); restore that version, or move stable with "
        "`tfxp rollout start`/`promote`, or remove the rollout state to serve the newest version"
    )


def served_fingerprint(base: str) -> str:
    """A short string that changes whenever the served version changes: `<version>:<identity>:<size>:<mtime>`.

    "none" when nothing is served. Versions are never rewritten in place, but a version removed and written
    again under the same name has a new `SAVED_MODEL_FILE`, hence the size and modification time.
    """
    import tensorflow as tf

    served = find_served_model(base)
    if served is None:
        return "none"
    stat = tf.io.gfile.stat(f"{served.path}/{SAVED_MODEL_FILE}")
    return f"{served.version}:{served.identity}:{stat.length}:{stat.mtime_nsec}"


def check_served_model(served: ServedModel) -> None:
    """Checks that `served` loads and has the Evaluator's signatures.

    Raises:
        ServedModelError: the SavedModel cannot be loaded (the error says why) or lacks signatures (it lists
            the missing ones and those it has); the message names the version, its path and the ways out.
    """
    import tensorflow as tf

    way_out = (
        f"remove or fix {served.path} (TF Serving then serves the previous version, which becomes the baseline), "
        f"or {BASELINE_NONE_HINT}"
    )
    try:
        loaded = tf.saved_model.load(served.path)
    except Exception as error:  # any load failure: corrupt proto, missing variables, unknown ops
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ServedModelError(
            f"the served version {served.version} ({served.path}) cannot be loaded as the Evaluator's baseline: "
            f"{type(error).__name__}: {first_line}; {way_out}"
        ) from error
    signatures = sorted(loaded.signatures)
    missing = [name for name in EVAL_SIGNATURES if name not in signatures]
    if missing:
        raise ServedModelError(
            f"the served version {served.version} ({served.path}) lacks the signature(s) {', '.join(missing)} "
            f"that the Evaluator runs on a baseline (it has: {', '.join(signatures) or 'none'}; tfxp's Trainer "
            f"exports them); {way_out}"
        )


def not_comparable(served: ServedModel, labels_path: str) -> str:
    """Why `served` cannot be compared with a model trained on the label map `labels_path`; "" when it can.

    The served version's label map is the one its Trainer exported (`assets/labels.txt`). A version without one
    (written by another tool), or a run without a label map path, is compared as before: nothing says it differs.

    Raises:
        LabelMapError: the run's own label map cannot be read (the pre-flight checks it first).
    """
    if not labels_path:
        return ""
    asset = paths.join(served.path, LABELS_ASSET)
    try:
        if not paths.exists(asset):
            return ""
        served_labels = read_label_map(asset, missing_hint="")
    except (LabelMapError, OSError) as error:
        return f"its label map {asset} cannot be read ({error})"
    mismatch = label_map_mismatch(served_labels, read_label_map(labels_path))
    return mismatch or ""


def copy_model(source: str, target: str) -> None:
    """Copies the SavedModel directory `source` to `target` (created); local paths or buckets.

    A copy, not a link: the artifact keeps what was compared even if the served version is later removed or
    (against the rules) edited in place. The local runner copies once per served version (the component is
    cached while the served version stays the same).
    """
    paths.copy_tree(source, target)
