"""Shared fixtures: isolated settings, a knowledge base with the fake embedding model, corpus writing.

Why the isolation: a developer's `RAG_*` variables, a `.env` file in the working directory or the default
`./.rag` data folder must never leak into a test (nor a test into them), so every test runs in its own
temporary folder with the `RAG_*` environment cleared and tiktoken's cache outside the repository.
"""

from __future__ import annotations

import os
import tempfile
import types
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from answering.calibrator import Calibrator, use_calibrator
from config.settings import Settings, load_settings
from nodes.resources import Resources, use_resources
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings
from tests.helpers.calibrators import ALWAYS_CONFIDENT
from tests.helpers.servers import chroma_server, pg_url, throwaway_servers  # noqa: F401 (fixtures)

# tiktoken's BPE files are copied into this cache on first use; by default it lives under ./.rag, which
# tests must not touch. Set before any test imports trigger `prepare_offline_environment`.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(tempfile.gettempdir()) / "agentic-rag-tests-tiktoken"))

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = REPO_ROOT / "samples" / "corpus"
#: The semantic cache is off in tests unless a test turns it on (settings `cache_enabled=True`): otherwise a
#: question asked again in one data folder would get the first run's answer instead of running the graph.
CACHE_OFF = {"RAG_CACHE_ENABLED": "false"}
#: The focused read (nodes/focused_read.py) is off in tests unless a test turns it on (`focused_read=True` in
#: the run's context, or the variable): a fake model scripts one reply per answer call, and the second call
#: would consume the next reply. tests/test_focused_read.py runs it, on fake and on the real model.
FOCUSED_READ_OFF = {"RAG_FOCUSED_READ": "false"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`-n`, with `--dist loadgroup` as .ci/run runs it) the `servers` tests share one
    worker: they share the session's PostgreSQL and Chroma servers (tests/helpers/servers.py), which a
    second worker would start a second time."""
    for item in items:
        if item.get_closest_marker("servers") is not None:
            item.add_marker(pytest.mark.xdist_group("servers"))


@pytest.fixture(autouse=True, scope="session")
def _test_calibrator() -> Iterator[Calibrator]:
    """Every answer is judged by a calibrator with known numbers (tests/helpers/calibrators.py), never by
    the committed artifacts, which are refit; session-scoped so module-scoped graph runs get it too."""
    with use_calibrator(ALWAYS_CONFIDENT) as installed:
        yield installed


#: Folder of the start-up hook that gives the processes tests start the same calibrator (tests/site).
SUBPROCESS_SITE = Path(__file__).parent / "site"


@pytest.fixture(autouse=True, scope="session")
def _subprocess_calibrator() -> Iterator[None]:
    """Processes the tests start (workers, `langgraph dev`, fresh interpreters) inherit PYTHONPATH, so its
    sitecustomize installs the same calibrator there (tests/site/sitecustomize.py)."""
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUBPROCESS_SITE), previous]))
    yield
    if previous is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = previous


@pytest.fixture
def calibrator() -> Iterator[Callable[[Calibrator], Calibrator]]:
    """Install a calibrator for the rest of the test: `calibrator(following("reader_declined",
    inverted=True))` (tests/helpers/calibrators.py); the test default is restored after."""
    with ExitStack() as stack:

        def installer(chosen: Calibrator) -> Calibrator:
            return stack.enter_context(use_calibrator(chosen))

        yield installer


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No RAG_* variable from the caller, and a working directory without a `.env` or `.rag`."""
    for name in list(os.environ):
        if name.startswith("RAG_"):
            monkeypatch.delenv(name)
    for name, value in {**CACHE_OFF, **FOCUSED_READ_OFF}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)


def isolated_settings(root: Path, **overrides: object) -> Settings:
    """Settings with data under `root`, read without the caller's RAG_* variables or `.env`: for
    module-scoped fixtures, which run outside the per-test isolation above."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("RAG_"):
                patch.delenv(name)
        patch.chdir(root)
        overrides.setdefault("data_dir", root / "rag")
        overrides.setdefault("cache_enabled", False)
        overrides.setdefault("focused_read", False)
        return load_settings(**overrides)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings with the data folder in tmp_path, plus any overrides (chunk sizes, weights...)."""

    def factory(**overrides: object) -> Settings:
        overrides.setdefault("data_dir", tmp_path / "rag")
        return load_settings(**overrides)

    return factory


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    """Default settings with a temporary data folder."""
    return make_settings()


@pytest.fixture
def make_kb() -> Iterator[Callable[..., KnowledgeBase]]:
    """Factory of knowledge bases with an injected model (the fake by default); all are closed after."""
    opened: list[KnowledgeBase] = []

    def factory(settings: Settings, model: Embeddings | None = None) -> KnowledgeBase:
        kb = KnowledgeBase(settings, base_model=model or HashEmbeddings(), model_key=FAKE_MODEL_KEY)
        opened.append(kb)
        return kb

    yield factory
    for kb in opened:
        kb.close()


@pytest.fixture
def kb(settings: Settings, make_kb: Callable[..., KnowledgeBase]) -> KnowledgeBase:
    """A knowledge base on `settings` with the fake embedding model (reach it as `kb.base_model`)."""
    return make_kb(settings)


def write_corpus(root: Path, files: dict[str, str | bytes]) -> dict[str, Path]:
    """Write `{relative name: text or bytes}` under `root` (folders created); return name -> path."""
    written: dict[str, Path] = {}
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        written[name] = path.resolve()
    return written


def runtime(**fields: Any) -> Any:
    """What nodes read from their Runtime: only `context`."""
    return types.SimpleNamespace(context=Context(**fields))


@pytest.fixture
def install(tmp_path: Path) -> Iterator[Callable[..., Resources]]:
    """Install fake chat models as the process resources: `install(generator, grader=None, strength=...)`
    (the grader defaults to the generator); everything installed is removed after the test."""
    with ExitStack() as stack:

        def installer(
            generator: BaseChatModel,
            grader: BaseChatModel | None = None,
            *,
            strength: Literal["weak", "strong"] = "strong",
        ) -> Resources:
            resources = Resources(
                load_settings(data_dir=tmp_path / "rag"),
                generator=generator,
                grader=grader or generator,
                strengths={"generate": strength, "grade": strength},
            )
            stack.enter_context(use_resources(resources))
            return resources

        yield installer
