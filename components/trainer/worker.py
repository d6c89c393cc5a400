"""The worker entrypoint: one worker of a multi-worker training, as a local process or a TFJob pod.

    python -m components.trainer.worker --fn-args <model_run>/fn_args.json

The Trainer task writes the FnArgs (`components.multinode.worker_args.write_fn_args`); whoever starts the workers
(the local launcher, or the Training Operator) sets `TF_CONFIG`. The worker runs the Trainer's `run_fn`, which
trains under MultiWorkerMirroredStrategy; the chief (worker 0) writes the model, metrics and logs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from types import SimpleNamespace

from components.multinode.local_workers import die_with_launcher
from components.multinode.worker_args import WORKER_ENV, read_fn_args
from foundation.errors import TfxpError


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one worker; returns its exit status (2: bad arguments or environment, 1: training failed)."""
    parser = argparse.ArgumentParser(prog="python -m components.trainer.worker", description=__doc__)
    parser.add_argument("--fn-args", required=True, help="the workers' FnArgs JSON written by the Trainer task")
    options = parser.parse_args(argv)
    die_with_launcher()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not os.environ.get("TF_CONFIG"):
        print(
            "components.trainer.worker: TF_CONFIG is not set; the Training Operator (TFJob) or tfxp's local "
            "launcher sets it for each worker. Run the pipeline (`tfxp run --set trainer.workers=N`) instead.",
            file=sys.stderr,
        )
        return 2
    os.environ[WORKER_ENV] = "1"  # this process is a worker whoever started it: run_fn trains, it starts none
    from components.trainer.run_fn import run_fn  # TensorFlow starts here, after TF_CONFIG is known

    try:
        args = read_fn_args(options.fn_args)
        run_fn(SimpleNamespace(**vars(args)))
    except TfxpError as error:
        print(f"components.trainer.worker: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
