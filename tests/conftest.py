"""Shared fixtures: the embedded digits data set, written once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scikit-learn's digits as tfxp TFRecords (train/, eval/, labels.txt)."""
    from components.data.digits import write_digits

    out = tmp_path_factory.mktemp("data") / "digits"
    write_digits(out)
    return out
