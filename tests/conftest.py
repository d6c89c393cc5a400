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


# Rough seconds per test on the 2-core machine, by marker: what orders the files below. A test that takes much
# longer says so on its mark, e.g. `@pytest.mark.e2e(seconds=300)`.
SECONDS_BY_MARKER = {"e2e": 60.0, "slow": 20.0}
SECONDS_OTHERWISE = 0.3


@pytest.hookimpl(trylast=True)  # after `-m` has deselected what this run leaves out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the files expected to take longest come first. `--dist loadfile` hands whole files to
    the workers in collection order (the Makefile turns off xdist's own reorder, which puts the files with the most
    tests first and so left the few long multi-process tests to the end, one worker idle beside them); longest
    first, the short files fill in at the end. The estimate is the markers' seconds summed over a file's tests."""
    if not hasattr(config, "workerinput"):  # one process: collection order, the quick tests first
        return
    seconds: dict[str, float] = {}
    for item in items:
        marks = [(item.get_closest_marker(name), default) for name, default in SECONDS_BY_MARKER.items()]
        marked = [float(mark.kwargs.get("seconds", default)) for mark, default in marks if mark is not None]
        path = item.nodeid.split("::")[0]
        seconds[path] = seconds.get(path, 0.0) + max(marked, default=SECONDS_OTHERWISE)
    items.sort(key=lambda item: -seconds[item.nodeid.split("::")[0]])  # stable: a file's tests keep their order
