"""Every private LangGraph / LangChain name the engine uses, in one place, each with why no public one does.

An upgrade that changes one fails here, and tests/test_compat.py checks each against the installed
library's behaviour. Partner packages are imported inside the functions that need them.
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

#: CONFIG_KEY_DURABILITY: where a compiled graph carries its own durability (public only as an `invoke`
#: argument; persistence.checkpointer). CONFIG_KEY_RUNTIME: where a checkpoint saver finds the run's Runtime,
#: which `get_runtime()` does not give it (persistence.saver_mixins).

#: The protocol that makes a chat model called with `invoke` stream its tokens to a callback handler
#: (graphs.runner.TokenHandler); it has no public base.
StreamingCallbackHandler = _StreamingCallbackHandler


def openai_sdk_httpx() -> ModuleType:
    """The httpx module the installed openai SDK is built on (httpx2 from openai 3, httpx before): objects
    handed to the SDK's client must come from that one, and only `_compat` resolves it."""
    from langchain_openai import _compat

    sdk_httpx: ModuleType = _compat.httpx
    return sdk_httpx


def chroma_collection(store: Chroma) -> Collection:
    """The chromadb collection under a langchain-chroma store: the public wrapper cannot write precomputed
    vectors (`add_texts` embeds again) nor query without fetching documents."""
    return store._collection  # noqa: SLF001 - the one place the private attribute is read
