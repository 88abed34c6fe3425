"""Every private LangGraph / LangChain name the engine uses, in one place, each with why no public one does.

Private names change without notice between releases. Kept here, an upgrade that removes or changes one
fails in one module, and tests/test_compat.py checks each against the installed library's behaviour (not
only its presence), so a change is caught by the tests rather than by a run that silently misbehaves.

Why in core: the lowest layer, so persistence, models and graphs all import it without an import cycle.
The LangChain partner packages (langchain-openai, langchain-chroma) are imported inside the functions that
need them: importing this module costs only langgraph and langchain-core.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from langchain_core.tracers._streaming import _StreamingCallbackHandler
from langgraph._internal._constants import CONFIG_KEY_DURABILITY, CONFIG_KEY_RUNTIME

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from langchain_chroma import Chroma

__all__ = [
    "CONFIG_KEY_DURABILITY",
    "CONFIG_KEY_RUNTIME",
    "StreamingCallbackHandler",
    "chroma_collection",
    "openai_sdk_httpx",
]

#: The config key under which Pregel reads a run's durability ("sync" | "async" | "exit"). Public only as
#: an argument of `invoke` / `stream`; a compiled graph that must carry its own durability for every caller
#: (persistence.checkpointer.with_durability) sets it in its config under this key.
#: CONFIG_KEY_RUNTIME: the key under which Pregel hands a checkpoint saver the run's Runtime (its context,
#: so its tenant); `langgraph.runtime.get_runtime()` reads the caller's context variable instead, which is
#: not the run's when the saver is called (persistence.saver_mixins).

#: The protocol langchain-core's chat models test callback handlers against (`isinstance`) to decide that a
#: model called with `invoke` streams its tokens: LangGraph's own "messages" handler implements it, and so
#: does the runner's token handler (graphs.runner.TokenHandler), which has no public base for it.
StreamingCallbackHandler = _StreamingCallbackHandler


def openai_sdk_httpx() -> ModuleType:
    """The httpx module the installed openai SDK is built on (httpx2 from openai 3, httpx before): objects
    handed to the SDK's client (models.factory's connection limits) must come from that one, and only
    langchain-openai's private `_compat` resolves it. Typed as a module: its static type claims `httpx`
    whichever library it really is."""
    from langchain_openai import _compat

    sdk_httpx: ModuleType = _compat.httpx
    return sdk_httpx


def chroma_collection(store: Chroma) -> Collection:
    """The chromadb collection under a langchain-chroma store (its private `_collection`): the vector store
    writes precomputed vectors (`add_texts` would embed again) and queries without fetching documents, which
    the public wrapper methods cannot do."""
    return store._collection  # noqa: SLF001 - the one place the private attribute is read
