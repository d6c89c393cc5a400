"""What the worker entrypoint and whoever starts workers agree on (the local launcher, the TFJob's pod template):
plain constants, importable without TensorFlow, Kubernetes or pydantic."""

WORKER_MODULE = "components.trainer.worker"
"""The worker entrypoint every worker process (and every TFJob pod) runs: `python -m WORKER_MODULE --fn-args URI`."""
WORKER_ENV = "TFXP_WORKER"
"""Set to 1 in every worker's environment (by `LocalWorkers` and in the TFJob's pod template): `run_fn` trains as a
worker only then, so a TF_CONFIG left in a user's shell never turns the Trainer itself into a worker."""
