"""Shared fixtures: the embedded digits data set (written once per test session), the edge tests' model and data,
and the fake KFP API."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kfp_fake import FakeKfp

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One console width for every test process: Rich (COLUMNS) and Typer's error panels (TERMINAL_WIDTH) wrap at it,
# so a message naming a temporary path reads the same under pytest-xdist, whose paths are longer (popen-gwN/).
os.environ["COLUMNS"] = os.environ["TERMINAL_WIDTH"] = "160"


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scikit-learn's digits as tfxp TFRecords (train/, eval/, labels.txt)."""
    from components.data.digits import write_digits

    out = tmp_path_factory.mktemp("data") / "digits"
    write_digits(out)
    return out


@pytest.fixture(scope="session")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The edge tests' trained classifier, exported as the trainer exports it (built once,
    tests/edge/test_edge_data.py)."""
    from edge_fixtures import shared_model

    return shared_model(tmp_path_factory)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The edge tests' synthetic data directory (train/, eval/, labels.txt; tests/edge/test_edge_data.py)."""
    from edge_fixtures import shared_data

    return shared_data(tmp_path_factory)


@pytest.fixture
def fake() -> FakeKfp:
    """A fresh in-memory fake of the KFP v2beta1 REST API (tests/support/kfp_fake.py)."""
    from kfp_fake import FakeKfp

    return FakeKfp()


@pytest.fixture
def host(fake: FakeKfp) -> Iterator[str]:
    """The URL `fake` answers on, for `--host`; the server stops after the test."""
    from kfp_fake import serve

    with serve(fake) as url:
        yield url


@pytest.fixture
def no_kfp_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No token, cookie or `KF_PIPELINES_*` variable of the developer's environment reaches the test."""
    from kfp_fake import clear_kfp_environment

    clear_kfp_environment(monkeypatch)
