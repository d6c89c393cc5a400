"""The Kubeflow tests' fixture for the run notice: a local receiver (tests/support/run_spec_e2e.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from run_spec_e2e import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    endpoint = Receiver()
    yield endpoint
    endpoint.close()
