"""What the worker entrypoint and whoever starts workers agree on (the local launcher, the TFJob's pod template):
the worker module and environment, and the FnArgs every worker reads. Importable without TensorFlow, Kubernetes or
pydantic."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from foundation import paths
from foundation.bounded import parse_json, read_document
from foundation.errors import TfxpError

WORKER_MODULE = "components.trainer.worker"
"""The worker entrypoint every worker process (and every TFJob pod) runs: `python -m WORKER_MODULE --fn-args URI`."""
WORKER_ENV = "TFXP_WORKER"
"""Set to 1 in every worker's environment (by `LocalWorkers` and in the TFJob's pod template): `run_fn` trains as a
worker only then, so a TF_CONFIG left in a user's shell never turns the Trainer itself into a worker."""
FN_ARGS_FILE = "fn_args.json"
"""The workers' FnArgs, written into the Trainer's model_run directory."""


class WorkersError(TfxpError, RuntimeError):
    """The workers could not train: names the worker, its exit status and the end of its log."""


@dataclass(frozen=True)
class WorkerFnArgs:
    """The part of TFX's `FnArgs` that `run_fn` reads, as plain data every worker can load.

    Attributes:
        custom_config: The Trainer's custom_config (`components.trainer.options.RunOptions` as JSON data).
        train_steps: TFX's train_args.num_steps (a Kubeflow run parameter may change it per run).
        train_files: File patterns of the train split.
        eval_files: File patterns of the eval split.
        serving_model_dir: Where the chief writes the SavedModel.
        model_run_dir: TensorBoard logs and `training_metrics.json`.
    """

    custom_config: Mapping[str, Any]
    train_steps: int | None
    train_files: Sequence[str]
    eval_files: Sequence[str]
    serving_model_dir: str
    model_run_dir: str

    @classmethod
    def from_fn_args(cls, fn_args: Any) -> WorkerFnArgs:
        """The fields of a TFX `FnArgs` (or anything with the same attributes)."""
        return cls(
            custom_config=dict(fn_args.custom_config or {}),
            train_steps=getattr(fn_args, "train_steps", None),
            train_files=list(fn_args.train_files),
            eval_files=list(fn_args.eval_files),
            serving_model_dir=fn_args.serving_model_dir,
            model_run_dir=fn_args.model_run_dir,
        )

    def to_json(self) -> str:
        """Sorted JSON; `from_json` reads it back."""
        data = asdict(self)
        data["custom_config"] = dict(self.custom_config)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> WorkerFnArgs:
        """Parses `to_json`'s output.

        Raises:
            WorkersError: not JSON, or keys missing or unknown (names `source`).
        """
        try:
            data = parse_json(text)
            return cls(**data)
        except (ValueError, TypeError) as error:  # ValueError: not JSON, or nested too deep
            raise WorkersError(
                f"{source}: not the workers' FnArgs ({error}); it is written by the Trainer task "
                f"(components.multinode.worker_args.write_fn_args) for the workers of the same run"
            ) from None


def write_fn_args(args: WorkerFnArgs, uri: str) -> str:
    """Writes the workers' FnArgs to `uri` (local or a bucket path the workers can read), creating its folder;
    returns `uri`."""
    paths.makedirs(paths.parent_of(uri))
    paths.write_text(uri, args.to_json())
    return uri


def read_fn_args(uri: str) -> WorkerFnArgs:
    """The workers' FnArgs at `uri`.

    Raises:
        WorkersError: the file is missing or malformed.
    """
    if not paths.exists(uri):
        raise WorkersError(
            f"--fn-args {uri}: no such file; the Trainer task writes it before it starts the workers, into its "
            "model_run output: the workers must see the same storage (gs:// or a shared volume)"
        )
    return WorkerFnArgs.from_json(read_document(uri, f"--fn-args {uri}"), uri)
