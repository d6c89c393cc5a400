"""Imports every command module so its commands register on the `tfxp` app."""

from pipeline.cli import data, doctor, edge, kubeflow, run, serving  # noqa: F401
