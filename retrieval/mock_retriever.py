"""The mock retriever (RAG_RETRIEVER=mock; the knowledge-base design's development retriever): deterministic
canned passages instead of the knowledge base, so the whole graph, `rag search` and the API's search run
without a store, an embedding model or an ingest.

What it searches: the built-in passages below (a few files about planets and brewing, one of them tagged
with a conversation), or the JSON file RAG_MOCK_PASSAGES names: a list of objects with `text` (required)
and optionally `id`, `source`, `title`, `section`, `chapter`, `page`, `collection`, `tenant`, `doc_id`,
`doc_type`, `conversation_id`, `level` and `metadata` (custom keys such as `session_id`, filterable as in
the store). A file that cannot be used is a StoreUnavailableError naming it: the graph then answers "not
found" with that error, `rag search` exits 1 with one line, as for a store that is down.

Why it honours the same scoping as the store: a mock that ignored scope would let a development run show a
passage of session A to a question of session B, which the store never does, so code tested on the mock
would not be the code that runs. Every search names one tenant (a passage without `tenant` belongs to
RAG_DEFAULT_TENANT), filters use the one filter language (retrieval.filters, evaluated by `matches`, the
reference semantics of both store renderings) over the chunk metadata schema's defaults plus the passage's
fields, and collections and a directory (retrieval.directory_scope) restrict as in the store.

Ranking is by similarity and deterministic: the cosine of the query's and the passage's character n-gram
counts (NGRAM_SIZES, on lower-cased text with punctuation as spaces), ties in file order. Why characters
rather than words or an embedding model: the mock must run with no model at all (the seed's mock skips every
dependency), n-grams match inflections and Chinese without a tokenizer, and a search always returns its top
k of the passages in scope (a development run asks whatever it likes, and an empty answer would test
nothing). `mode`, `mmr`, `query_vector` and `weights` are accepted (the store's searcher takes them) and
change nothing: there are no vectors.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from config.settings import SearchMode, Settings
from core.types import CHUNK_METADATA_DEFAULTS, SearchHit, is_custom_metadata_key
from persistence.errors import StoreUnavailableError
from persistence.vector_store import DEFAULT_COLLECTION
from retrieval.directory_scope import is_under, normalize_directory
from retrieval.filters import Condition, FilterNode, Logical, matches, parse_filter
from retrieval.search import MAX_K, SEARCH_MODES, QueryError, SearchResult, validate_query

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
#: The built-in passages: three planets and two brewing guides in two folders (so a directory scope has
#: something to choose between), and one passage of the conversation `demo-conversation` (a question of
#: another conversation never gets it).
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


#: Character n-gram sizes the mock compares: bigrams match short terms and two-character Chinese words,
#: trigrams English stems.
NGRAM_SIZES = (2, 3)
_NOT_WORD = re.compile(r"[\W_]+")


def char_ngrams(text: str) -> Counter[str]:
    """Counts of the character n-grams (NGRAM_SIZES) of `text`, lower-cased, runs of punctuation and spaces
    read as one space, padded with a space at each end so a word's first and last letters count."""
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
    """The passages of RAG_MOCK_PASSAGES (a JSON list, see the module docstring), or the built-in ones when
    it is unset; MockPassagesError naming the file when it cannot be read or a passage is malformed. A
    passage without `collection` / `tenant` is in DEFAULT_COLLECTION / RAG_DEFAULT_TENANT."""
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

    def __init__(self, settings: Settings, passages: Sequence[SearchHit] | None = None) -> None:
        self.settings = settings
        self._passages = list(passages) if passages is not None else None
        self._grams: dict[int, Counter[str]] = {}
        self._lock = threading.Lock()

    def passages(self) -> list[SearchHit]:
        """The passages, read on first use (inside a search, so a bad file fails the search, not the
        process that only created the searcher)."""
        with self._lock:
            if self._passages is None:
                self._passages = load_passages(self.settings)
            return self._passages

    def _passage_grams(self, position: int, passage: SearchHit) -> Counter[str]:
        """The n-gram counts of the passage at `position` of the (fixed) list, counted once per searcher."""
        grams = self._grams.get(position)
        if grams is None:
            grams = self._grams[position] = char_ngrams(passage.text)
        return grams

    def embed_query(self, query: str) -> list[float]:
        """No vectors: the mock ranks by character n-grams (the graph embeds the query before it searches)."""
        return []

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        mode: SearchMode | None = None,
        filters: str | dict[str, Any] | FilterNode | None = None,
        tenant: str | None = None,
        collections: Sequence[str] | None = None,
        mmr: bool | None = None,
        query_vector: Sequence[float] | None = None,
        weights: tuple[float, float] | None = None,
        directory: str | None = None,
    ) -> SearchResult:
        """Top `k` passages of `tenant` for `query` within `filters`, `collections` and `directory`, by
        n-gram similarity (every passage in scope is a candidate: fewer than `k` only when fewer are in
        scope); the same input errors as the store's searcher (QueryError, FilterError, DirectoryError)."""
        settings = self.settings
        query = validate_query(query, settings.max_query_chars)
        k = settings.top_k if k is None else k
        if not 1 <= k <= MAX_K:
            raise QueryError(f"k must be between 1 and {MAX_K}, got {k}")
        if (mode or settings.search_mode) not in SEARCH_MODES:
            raise QueryError(f"unknown search mode {mode!r}; choose one of {', '.join(SEARCH_MODES)}")
        node = (
            filters
            if isinstance(filters, Condition | Logical)
            else parse_filter(filters, max_conditions=settings.filter_max_conditions)
        )
        tenant = tenant or settings.default_tenant
        directory = normalize_directory(directory or "")
        wanted = set(collections or ())
        query_grams = char_ngrams(query)
        scored: list[SearchHit] = []
        for position, passage in enumerate(self.passages()):
            metadata = passage.metadata
            if metadata["tenant"] != tenant or (wanted and metadata["collection"] not in wanted):
                continue
            if not matches(node, metadata) or not is_under(str(metadata["source"]), directory):
                continue
            score = round(ngram_similarity(query_grams, self._passage_grams(position, passage)), 4)
            scored.append(SearchHit(passage.chunk_id, passage.text, dict(metadata), score, None, score))
        scored.sort(key=lambda hit: hit.score, reverse=True)  # stable: ties keep the file's order
        return SearchResult(scored[:k], {"mock_ms": 0.0})
