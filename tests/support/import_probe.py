"""What a fresh interpreter loads: the check that a module (or a call) stays clear of heavy frameworks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def heavy_modules_loaded(code: str, heavy: Iterable[str]) -> list[str]:
    """The packages of `heavy` loaded after `code` runs in a new interpreter in the repository root, sorted.

    Example:
        assert heavy_modules_loaded("import foundation.contract", ["tensorflow", "tfx"]) == []
    """
    wanted = sorted(set(heavy))
    loaded = "{name.split('.')[0] for name in sys.modules}"
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({loaded} & set({wanted!r}))))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout.strip().splitlines()[-1]))
