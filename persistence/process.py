"""The process's defaults for the stores' functions called without settings or an embedding model.

nodes.resources installs its accessor here when imported, so persistence never imports a layer above it
(tests/test_layering.py); without one the settings are the environment's and there is no knowledge base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from config.settings import Settings, get_settings

if TYPE_CHECKING:
    from persistence.catalog import Catalog


class KnowledgeBaseView(Protocol):
    """What the stores use of the knowledge base: its embedding model and its catalog."""

    @property
    def embeddings(self) -> Any:
        """A langchain Embeddings with a `model_key` (the key its vectors are stored under)."""

    @property
    def catalog(self) -> Catalog: ...


class ProcessResources(Protocol):
    """What the stores use of the process's resources."""

    @property
    def settings(self) -> Settings: ...

    def kb(self) -> KnowledgeBaseView: ...


_accessor: Callable[[], ProcessResources] | None = None


def install_process_resources(accessor: Callable[[], ProcessResources]) -> None:
    """Make `accessor` (nodes.resources.get_resources) the source of the defaults below."""
    global _accessor
    _accessor = accessor


def process_settings() -> Settings:
    """The settings of the process's resources, else the environment's."""
    return _accessor().settings if _accessor is not None else get_settings()


def process_knowledge_base() -> KnowledgeBaseView:
    """The process's knowledge base; a clear error when no resources were installed (pass the model)."""
    if _accessor is None:
        raise RuntimeError(
            "no process resources installed: import nodes.resources, or pass the embedding model explicitly"
        )
    return _accessor().kb()
