"""Imports every command module so its commands register on the `tfxp` app."""

from pipeline.cli import data, doctor, kubeflow, run  # noqa: F401
