"""The mock retriever (RAG_RETRIEVER=mock, RAG_ENABLED=false): canned passages instead of the knowledge base,
so the graph, `rag search` and the API's search run without a store, an embedding model or an ingest.

It searches the built-in passages below, or the JSON list RAG_MOCK_PASSAGES names (objects with `text` and
optionally the PASSAGE_FIELDS, `id`, `tenant` and custom `metadata`); a file that cannot be used is a
StoreUnavailableError naming it. It honours the store's scoping (one tenant, filters, collections, a
directory), so code run on the mock is the code that runs on the store. Ranking is the cosine of character
n-gram counts (no model, any language), ties in file order; `mode`, `mmr`, `query_vector` and `weights` are
accepted and change nothing.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from typing_extensions import Unpack

from config.settings import Settings
from core.types import CHUNK_METADATA_DEFAULTS, SearchHit, is_custom_metadata_key
from persistence.errors import StoreUnavailableError
from persistence.vector_store import DEFAULT_COLLECTION
from retrieval.directory_scope import is_under
from retrieval.filters import matches
from retrieval.search import SearchOptions, SearchResult, checked_search

#: Passage fields that go into the chunk metadata as they are (the rest of the schema keeps its defaults).
PASSAGE_FIELDS = (
    "source",
    "title",
    "section",
    "chapter",
    "page",
    "collection",
    "doc_id",
    "doc_type",
    "conversation_id",
    "level",
)
#: The built-in passages: planets and brewing in two folders, and one note of `demo-conversation`.
BUILTIN_PASSAGES: tuple[dict[str, Any], ...] = (
    {
        "source": "/mock/astronomy/jupiter.md",
        "title": "Jupiter",
        "section": "Size",
        "text": "Jupiter is the largest planet in the Solar System. It has 95 known moons; Ganymede, its "
        "largest moon, is bigger than the planet Mercury.",
    },
    {
        "source": "/mock/astronomy/mars.md",
        "title": "Mars",
        "section": "Colour",
        "text": "Mars is the fourth planet from the Sun. Its red colour comes from iron oxide dust on its "
        "surface.",
    },
    {
        "source": "/mock/astronomy/saturn.md",
        "title": "Saturn",
        "section": "Rings",
        "text": "Saturn's rings are made mostly of water ice, with some rock and dust.",
    },
    {
        "source": "/mock/kitchen/tea.md",
        "title": "Tea",
        "section": "Oolong",
        "text": "Oolong tea is brewed at 90 degrees Celsius for three minutes.",
    },
    {
        "source": "/mock/kitchen/espresso.md",
        "title": "Espresso",
        "section": "Pressure",
        "text": "An espresso is brewed at about 9 bars of pressure in 25 to 30 seconds.",
    },
    {
        "source": "conversation:demo-conversation",
        "title": "Conversation notes",
        "conversation_id": "demo-conversation",
        "text": "The user's cat is called Miso and is three years old.",
    },
)


#: Character n-gram sizes compared: bigrams match short terms and Chinese words, trigrams English stems.
NGRAM_SIZES = (2, 3)
_NOT_WORD = re.compile(r"[\W_]+")


def char_ngrams(text: str) -> Counter[str]:
    """Counts of the character n-grams of `text`, lower-cased, punctuation as one space, padded."""
    normalized = f" {_NOT_WORD.sub(' ', text.lower()).strip()} "
    return Counter(
        normalized[start : start + size]
        for size in NGRAM_SIZES
        for start in range(len(normalized) - size + 1)
    )


def ngram_similarity(query: Counter[str], passage: Counter[str]) -> float:
    """Cosine similarity of two n-gram counts (0 when either is empty)."""
    dot = sum(count * passage[gram] for gram, count in query.items() if gram in passage)
    norms = math.sqrt(sum(v * v for v in query.values())) * math.sqrt(sum(v * v for v in passage.values()))
    return dot / norms if norms else 0.0


class MockPassagesError(StoreUnavailableError):
    """The mock retriever's passages file cannot be used; the message names the file and what is wrong."""


def _passage_hit(index: int, raw: Any, settings: Settings, where: str) -> SearchHit:
    """One passage as a stored chunk would come back: the schema's metadata with the passage's fields."""
    if not isinstance(raw, dict):
        raise MockPassagesError(f"{where}: passage {index} is not a JSON object")
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        raise MockPassagesError(f"{where}: passage {index} has no text")
    custom = raw.get("metadata") or {}
    if not isinstance(custom, dict) or not all(is_custom_metadata_key(str(key)) for key in custom):
        raise MockPassagesError(
            f"{where}: passage {index}: metadata must map custom keys (letters, digits, _) to values"
        )
    metadata: dict[str, Any] = dict(CHUNK_METADATA_DEFAULTS)
    metadata.update(custom)
    metadata.update({key: raw[key] for key in PASSAGE_FIELDS if raw.get(key) is not None})
    metadata["source"] = str(metadata["source"] or f"mock:{index}")
    metadata["doc_id"] = str(metadata["doc_id"] or metadata["source"])
    metadata["collection"] = str(metadata["collection"] or DEFAULT_COLLECTION)
    metadata["tenant"] = str(raw.get("tenant") or settings.default_tenant)
    metadata["chunk_index"] = index - 1
    return SearchHit(str(raw.get("id") or f"mock:{index}"), text.strip(), metadata, 0.0)


def load_passages(settings: Settings) -> list[SearchHit]:
    """The passages of RAG_MOCK_PASSAGES, or the built-in ones when it is unset; MockPassagesError naming
    the file when it cannot be read or a passage is malformed."""
    path = settings.mock_passages
    if path is None:
        return [
            _passage_hit(index, raw, settings, "built-in") for index, raw in enumerate(BUILTIN_PASSAGES, 1)
        ]
    where = f"mock passages {path} (RAG_MOCK_PASSAGES)"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise MockPassagesError(f"{where}: cannot read it: {error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MockPassagesError(f"{where}: not JSON text: {error}") from None
    if not isinstance(data, list):
        raise MockPassagesError(f"{where}: expected a JSON list of passages, got {type(data).__name__}")
    return [_passage_hit(index, raw, settings, where) for index, raw in enumerate(data, 1)]


class MockSearcher:
    """The store searcher's interface (retrieval.search.PassageSearcher) over canned passages."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._passages: list[tuple[SearchHit, Counter[str]]] | None = None
        self._lock = threading.Lock()

    def passages(self) -> list[tuple[SearchHit, Counter[str]]]:
        """The passages with their n-gram counts, read on first use (so a bad file fails a search)."""
        with self._lock:
            if self._passages is None:
                self._passages = [(hit, char_ngrams(hit.text)) for hit in load_passages(self.settings)]
            return self._passages

    def embed_query(self, query: str) -> list[float]:
        """No vectors: the mock ranks by character n-grams (the graph embeds the query before it searches)."""
        return []

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchResult:
        """Top `k` passages of `tenant` in scope for `query`, by n-gram similarity (every passage in scope is
        a candidate); the same input errors as the store's searcher."""
        query, k, _, node, tenant, directory = checked_search(self.settings, query, options)
        wanted = set(options.get("collections") or ())
        query_grams = char_ngrams(query)
        scored: list[SearchHit] = []
        for passage, grams in self.passages():
            metadata = passage.metadata
            if metadata["tenant"] != tenant or (wanted and metadata["collection"] not in wanted):
                continue
            if not matches(node, metadata) or not is_under(str(metadata["source"]), directory):
                continue
            score = round(ngram_similarity(query_grams, grams), 4)
            scored.append(SearchHit(passage.chunk_id, passage.text, dict(metadata), score, None, score))
        scored.sort(key=lambda hit: hit.score, reverse=True)  # stable: ties keep the file's order
        return SearchResult(scored[:k], {"mock_ms": 0.0})
