"""The semantic cache: a repeated question of the same tenant is answered without the model, and nothing else.

Both backends (the SQL table and Redis) are checked by the same tests: hit on a near-identical question, the
similarity threshold is the setting, a miss for another tenant or another scope, after the TTL, after the
tenant's documents change, the per-tenant bound, and the counters. Redis is an in-memory stand-in of the
few commands the backend uses (no Redis server exists here), running on the test's clock so its key TTLs
expire when the test says. Then the graph (use_cache bypass, invalidation by ingest and delete, a down
backend never costs the answer) and the REST API on a real server (second answer is a fast-path hit: the
model's call count, never timings).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from config.settings import Settings
from graphs.rag import build_graph
from nodes.resources import Resources
from persistence.database import open_database
from persistence.semantic_cache import (
    CACHE_MAX_ENTRIES,
    SemanticCache,
    cache_counters,
    get_semantic_cache,
    reset_cache_counters,
)
from persistence.semantic_cache_backends import CacheScope, RedisCacheBackend, SqlCacheBackend
from persistence.vector_store import DEFAULT_COLLECTION
from retrieval.deletion import delete_content
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from state.context import Context
from tests.conftest import write_corpus
from tests.fakes import HashEmbeddings, TaskChatModel
from tests.helpers.api_server import serve
from tests.helpers.calibrators import constant
from tests.helpers.rag_world import ANSWER, QUESTION, REPLY, World, world

PAYLOAD = {
    "answer": ANSWER,
    "citations": [{"marker": 1}],
    "sources": [{"chunk_id": "c1"}],
    "strategy": "DIRECT",
}
#: The question with other case and punctuation: the same words, so the fake embeds it identically.
SAME_WORDS = "what is the LARGEST planet in the solar system"
#: One word differs: cosine 10/11 with the fake bag-of-words embeddings (counts: "the" twice).
REWORDED = "Which is the largest planet in the Solar System?"
TTL_S = 60.0


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class FakeRedis:
    """The Redis commands RedisCacheBackend uses, in memory, with key TTLs on the test's clock. Replies are
    bytes, as redis-py returns them without decode_responses."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.strings: dict[str, bytes] = {}
        self.zsets: dict[str, dict[str, float]] = {}
        self.expiry: dict[str, float] = {}

    @staticmethod
    def _key(key: str | bytes) -> str:
        return key.decode() if isinstance(key, bytes) else key

    def _alive(self, key: str) -> bool:
        if key in self.expiry and self.expiry[key] <= self.clock():
            self.strings.pop(key, None)
            self.zsets.pop(key, None)
            self.expiry.pop(key, None)
        return key in self.strings or key in self.zsets

    def get(self, key: str | bytes) -> bytes | None:
        key = self._key(key)
        return self.strings[key] if self._alive(key) and key in self.strings else None

    def mget(self, keys: list[str | bytes]) -> list[bytes | None]:
        return [self.get(key) for key in keys]

    def set(self, key: str, value: str | bytes, px: int | None = None) -> bool:
        self.strings[key] = value.encode() if isinstance(value, str) else value
        if px is not None:
            self.expiry[key] = self.clock() + px / 1000
        return True

    def incr(self, key: str) -> int:
        value = int(self.get(key) or 0) + 1
        self.strings[key] = str(value).encode()
        return value

    def zadd(self, key: str, mapping: dict[str, float]) -> int:
        self._alive(key)
        self.zsets.setdefault(key, {}).update(mapping)
        return len(mapping)

    def _ordered(self, key: str) -> list[str]:
        if not self._alive(key):
            return []
        return sorted(self.zsets.get(key, {}), key=lambda member: self.zsets[key][member])

    def zremrangebyscore(self, key: str, low: str | float, high: str | float) -> int:
        low_value = float("-inf") if low == "-inf" else float(low)
        members = self.zsets.get(key, {}) if self._alive(key) else {}
        gone = [m for m, score in members.items() if low_value <= score <= float(high)]
        for member in gone:
            del members[member]
        return len(gone)

    def zremrangebyrank(self, key: str, start: int, stop: int) -> int:
        ordered = self._ordered(key)
        size = len(ordered)
        start, stop = start + size if start < 0 else start, stop + size if stop < 0 else stop
        gone = ordered[max(0, start) : stop + 1] if stop >= 0 else []
        for member in gone:
            del self.zsets[key][member]
        return len(gone)

    def zrevrange(self, key: str, start: int, stop: int) -> list[bytes]:
        ordered = list(reversed(self._ordered(key)))
        stop = len(ordered) - 1 if stop < 0 else stop
        return [member.encode() for member in ordered[start : stop + 1]]

    def pexpire(self, key: str, ms: int) -> bool:
        if not self._alive(key):
            return False
        self.expiry[key] = self.clock() + ms / 1000
        return True

    def scan_iter(self, match: str = "*", count: int = 10) -> Iterator[bytes]:
        for key in list(self.strings) + list(self.zsets):
            if self._alive(key) and fnmatch.fnmatchcase(key, match):
                yield key.encode()

    def delete(self, *keys: str | bytes) -> int:
        gone = 0
        for key in map(self._key, keys):
            gone += int(self.strings.pop(key, None) is not None or self.zsets.pop(key, None) is not None)
            self.expiry.pop(key, None)
        return gone

    def pipeline(self) -> FakePipeline:
        return FakePipeline(self)


class FakePipeline:
    """Queued commands run by `execute` (no transaction semantics needed by the backend)."""

    def __init__(self, client: FakeRedis) -> None:
        self.client = client
        self.queued: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., FakePipeline]:
        def queue(*args: Any, **kwargs: Any) -> FakePipeline:
            self.queued.append((name, args, kwargs))
            return self

        return queue

    def execute(self) -> list[Any]:
        return [getattr(self.client, name)(*args, **kwargs) for name, args, kwargs in self.queued]


# --- the cache on each backend ----------------------------------------------------------------------------


@pytest.fixture(params=["sql", "redis"])
def make_cache(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., tuple[SemanticCache, Clock]]]:
    """`make_cache(**settings)`: a SemanticCache on the parametrized backend, fake embeddings, test clock."""
    opened = []

    def factory(**overrides: Any) -> tuple[SemanticCache, Clock]:
        max_entries = overrides.pop("cache_max_entries", CACHE_MAX_ENTRIES)
        overrides = {"data_dir": tmp_path / "rag", "cache_ttl_s": TTL_S, **overrides}
        settings = Settings(**overrides)
        clock = Clock()
        if request.param == "sql":
            database = open_database(f"sqlite:///{tmp_path / f'cache-{len(opened)}.sqlite'}")
            opened.append(database)
            backend: Any = SqlCacheBackend(database, settings.cache_ttl_s, max_entries)
        else:
            opened.append(None)
            backend = RedisCacheBackend(
                "redis://unused", settings.cache_ttl_s, max_entries, client=FakeRedis(clock)
            )
        embeddings = HashEmbeddings()
        return SemanticCache(settings, backend, embeddings=lambda: embeddings, clock=clock), clock

    reset_cache_counters()
    yield factory
    for database in opened:
        if database is not None:
            database.close()


ACME = CacheScope(tenant="acme")


def test_a_near_identical_question_of_the_same_tenant_hits(make_cache: Callable[..., Any]) -> None:
    cache, _clock = make_cache()
    assert cache.lookup(QUESTION, ACME, "v1") is None
    cache.store(QUESTION, ACME, "v1", PAYLOAD)
    hit = cache.lookup(SAME_WORDS, ACME, "v1")
    assert hit is not None and hit.payload == PAYLOAD and hit.question == QUESTION
    assert hit.similarity == pytest.approx(1.0, abs=1e-5)


def test_the_similarity_threshold_is_the_setting(make_cache: Callable[..., Any]) -> None:
    strict, _ = make_cache(cache_similarity=0.95)
    loose, _ = make_cache(cache_similarity=0.85)
    for cache in (strict, loose):
        cache.store(QUESTION, ACME, "v1", PAYLOAD)
    assert strict.lookup(REWORDED, ACME, "v1") is None
    hit = loose.lookup(REWORDED, ACME, "v1")
    assert hit is not None and hit.similarity == pytest.approx(10 / 11, abs=1e-4)  # "the" twice: 10 of 11


def test_another_tenant_never_gets_the_answer(make_cache: Callable[..., Any]) -> None:
    cache, _ = make_cache(cache_similarity=0.0)  # even with any similarity accepted
    cache.store(QUESTION, ACME, "v1", PAYLOAD)
    assert cache.lookup(QUESTION, CacheScope(tenant="globex"), "v1") is None
    assert cache.lookup(QUESTION, ACME, "v1") is not None


@pytest.mark.parametrize(
    "other",
    [
        CacheScope(tenant="acme", collection="manuals"),
        CacheScope(tenant="acme", directory="/srv/manuals"),
        CacheScope(tenant="acme", filters={"doc_type": "pdf"}),
        CacheScope(tenant="acme", conversation_id="c-2"),
        CacheScope(tenant="acme", mode="precise"),
        CacheScope(tenant="acme", model="another-model"),
        CacheScope(tenant="acme", system_prompt="Answer in French."),
    ],
)
def test_another_scope_misses(make_cache: Callable[..., Any], other: CacheScope) -> None:
    cache, _ = make_cache()
    cache.store(QUESTION, ACME, "v1", PAYLOAD)
    assert cache.lookup(QUESTION, other, "v1") is None


def test_an_entry_expires_after_the_ttl(make_cache: Callable[..., Any]) -> None:
    cache, clock = make_cache()
    cache.store(QUESTION, ACME, "v1", PAYLOAD)
    clock.now += TTL_S - 1
    assert cache.lookup(QUESTION, ACME, "v1") is not None
    clock.now += 2
    assert cache.lookup(QUESTION, ACME, "v1") is None


def test_changed_documents_make_old_answers_unreachable(make_cache: Callable[..., Any]) -> None:
    cache, _ = make_cache()
    cache.store(QUESTION, ACME, "v1", PAYLOAD)
    assert cache.lookup(QUESTION, ACME, "v2") is None


def test_invalidating_a_tenant_drops_only_its_answers(make_cache: Callable[..., Any]) -> None:
    cache, _ = make_cache()
    globex = CacheScope(tenant="globex")
    cache.store(QUESTION, ACME, "v1", PAYLOAD)
    cache.store(QUESTION, globex, "v1", {**PAYLOAD, "answer": "globex's"})
    cache.invalidate_tenant("acme")
    assert cache.lookup(QUESTION, ACME, "v1") is None
    hit = cache.lookup(QUESTION, globex, "v1")
    assert hit is not None and hit.payload["answer"] == "globex's"
    cache.store(QUESTION, ACME, "v1", PAYLOAD)  # the tenant caches again afterwards
    assert cache.lookup(QUESTION, ACME, "v1") is not None


def test_the_number_of_entries_is_bounded_oldest_first(make_cache: Callable[..., Any]) -> None:
    cache, clock = make_cache(cache_max_entries=3)
    questions = [f"question number {word} about planets" for word in ("one", "two", "three", "four", "five")]
    for question in questions:
        cache.store(question, ACME, "v1", {**PAYLOAD, "answer": question})
        clock.now += 1
    found = [cache.lookup(question, ACME, "v1") for question in questions]
    assert [hit is not None for hit in found] == [False, False, True, True, True]
    assert [hit.payload["answer"] for hit in found if hit] == questions[2:]


def test_the_counters_count_hits_misses_stores_and_invalidations(make_cache: Callable[..., Any]) -> None:
    cache, _ = make_cache()
    cache.lookup(QUESTION, ACME, "v1")
    cache.store(QUESTION, ACME, "v1", PAYLOAD)
    cache.lookup(QUESTION, ACME, "v1")
    cache.lookup(SAME_WORDS, ACME, "v1")
    cache.invalidate_tenant("acme")
    counters = cache_counters()
    assert (counters["hits"], counters["misses"], counters["stores"]) == (2, 1, 1)
    assert counters["invalidations"] == 1 and counters["errors"] == 0


def test_the_sql_bound_is_per_tenant(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path / 'bound.sqlite'}")
    try:
        cache = SemanticCache(
            Settings(data_dir=tmp_path / "rag"),
            SqlCacheBackend(database, TTL_S, 2),
            embeddings=HashEmbeddings,
        )
        cache.store(QUESTION, CacheScope(tenant="globex"), "v1", PAYLOAD)
        for word in ("one", "two", "three"):
            cache.store(f"question {word}", ACME, "v1", PAYLOAD)
        with database.engine.connect() as connection:
            counts = dict(
                connection.exec_driver_sql(
                    "SELECT tenant, COUNT(*) FROM semantic_cache GROUP BY tenant"
                ).all()
            )
        assert counts == {"acme": 2, "globex": 1}  # acme's inserts never evict globex's entry
    finally:
        database.close()


# --- in the graph -----------------------------------------------------------------------------------------


@pytest.fixture
def cache_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """RAG_CACHE_ENABLED on, as a deployment sets it: the setting the nodes read and the default of the run's
    `Context.use_cache` (the test environment turns it off)."""
    monkeypatch.setenv("RAG_CACHE_ENABLED", "true")


@pytest.fixture
def cached(
    cache_on: None, make_settings: Callable[..., Settings], kb: KnowledgeBase, tmp_path: Path
) -> Iterator[World]:
    """Tenants default and acme indexed, the cache on (SQL backend), the fake model installed."""
    with world(make_settings(cache_enabled=True), kb, tmp_path, tenants=("default", "acme")) as built:
        yield built


def ask(question: str = QUESTION, **context: Any) -> dict[str, Any]:
    return build_graph().invoke({"question": question}, context=Context(**context))


def test_the_second_ask_is_answered_from_the_cache_without_the_model(cached: World) -> None:
    first = ask()
    assert first["answer"] == ANSWER and first["cache_hit"] is False
    calls = len(cached.model.calls)
    second = ask(SAME_WORDS)
    assert second["cache_hit"] is True and len(cached.model.calls) == calls  # no model call at all
    assert second["answer"] == first["answer"] and second["citations"] == first["citations"]
    assert [s["chunk_id"] for s in second["sources"]] == [s["chunk_id"] for s in first["sources"]]
    assert cache_counters()["hits"] == 1


def test_use_cache_false_bypasses_the_cache(cached: World) -> None:
    ask()
    out = ask(use_cache=False)
    assert out["cache_hit"] is False and cached.generate_calls() == 2
    assert cache_counters()["bypassed"] == 1


def test_the_cache_setting_off_never_answers_from_the_cache(
    make_settings: Callable[..., Settings], kb: KnowledgeBase, tmp_path: Path
) -> None:
    with world(make_settings(cache_enabled=False), kb, tmp_path) as built:
        assert [ask()["cache_hit"] for _ in range(2)] == [False, False]
        assert built.generate_calls() == 2


def chunk_ids(built: World, tenant: str, name: str) -> set[str]:
    """The chunk ids of one file of `tenant`'s folder (answers show sources by name, not by path)."""
    source = str((built.folders[tenant] / name).resolve())
    collection = DEFAULT_COLLECTION
    return {chunk.chunk_id for chunk in built.kb.catalog.source_chunks(tenant, collection, source)}


def test_another_tenant_asking_the_same_gets_its_own_answer(cached: World) -> None:
    ask(tenant="default")
    out = ask(tenant="acme")
    assert out["cache_hit"] is False and cached.generate_calls() == 2
    acme_chunks = {
        chunk_id for name in ("jupiter.md", "tea.md") for chunk_id in chunk_ids(cached, "acme", name)
    }
    assert {source["chunk_id"] for source in out["sources"]} <= acme_chunks
    assert ask(tenant="acme")["cache_hit"] is True


class SwitchedModel(TaskChatModel):
    """Another model than the world's (same replies): what a deployment gets after switching models."""


def test_switching_the_model_never_serves_the_previous_models_answer(cached: World) -> None:
    assert ask()["cache_hit"] is False
    switched = SwitchedModel(replies={"generate": REPLY})
    cached.resources.generator = cached.resources.grader = switched
    out = ask(SAME_WORDS)
    assert out["cache_hit"] is False and switched.tasks().count("generate") == 1  # the new model answered
    assert ask(SAME_WORDS)["cache_hit"] is True  # and its own answer is cached for it


def test_the_configured_model_is_part_of_the_scope_without_starting_it(
    make_settings: Callable[..., Settings],
) -> None:
    """The settings' model (no injected one): a switch of RAG_LOCAL_MODEL, RAG_LLM_MODEL or the endpoint
    changes the identity the cache scope holds; nothing is loaded to say so."""
    embedded = Resources(make_settings(local_model="qwen2.5-coder-0.5b"))
    other_embedded = Resources(make_settings(local_model="qwen2.5-coder-1.5b"))
    endpoint = Resources(
        make_settings(llm_provider="openai", llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    )
    identities = {r.model_identity("generate") for r in (embedded, other_embedded, endpoint)}
    assert len(identities) == 3
    override = embedded.model_identity("generate", Context(model="other"))
    assert override != embedded.model_identity("generate")


def test_ingesting_into_the_tenant_invalidates_its_answers_only(cached: World, tmp_path: Path) -> None:
    ask(tenant="default")
    ask(tenant="acme")
    extra = write_corpus(tmp_path / "more", {"saturn.md": "# Saturn\n\nSaturn has bright rings of ice."})
    ingest_paths(cached.kb, list(extra.values()), tenant="acme")
    assert ask(tenant="acme")["cache_hit"] is False
    assert ask(tenant="default")["cache_hit"] is True


def test_deleting_a_document_invalidates_and_the_answer_no_longer_cites_it(cached: World) -> None:
    ask()
    jupiter = str((cached.folders["default"] / "jupiter.md").resolve())
    summary = delete_content(cached.kb, "default", source=jupiter)
    assert summary.documents == 1
    out = ask()
    assert out["cache_hit"] is False
    assert all(source["source"] != jupiter for source in out["sources"])
    hits = Searcher(cached.kb).search("largest planet Jupiter moons", tenant="default").hits
    assert all(hit.metadata["source"] != jupiter for hit in hits)


def test_not_found_answers_are_not_cached(cached: World, calibrator: Any) -> None:
    calibrator(constant(0.1))  # the judgement declines every draft
    question = "How long should sourdough bread proof overnight?"
    outs = [ask(question) for _ in range(2)]
    assert [out["not_found"] for out in outs] == [True, True]
    assert [out["cache_hit"] for out in outs] == [False, False]


def test_a_cache_that_is_down_never_costs_the_answer(
    cache_on: None, make_settings: Callable[..., Settings], kb: KnowledgeBase, tmp_path: Path
) -> None:
    # a Redis URL on a port where nothing listens: every lookup and store fails at once
    settings = make_settings(cache_enabled=True, redis_url="redis://127.0.0.1:1/0")
    with world(settings, kb, tmp_path) as built:
        outs = [ask() for _ in range(2)]
        assert [out["answer"] for out in outs] == [ANSWER, ANSWER]
        assert [out["cache_hit"] for out in outs] == [False, False] and built.generate_calls() == 2
        assert cache_counters()["errors"] >= 2


def test_the_graph_uses_redis_when_a_url_is_set(
    cache_on: None,
    make_settings: Callable[..., Settings],
    kb: KnowledgeBase,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    fake = FakeRedis(clock)
    monkeypatch.setattr(redis.Redis, "from_url", classmethod(lambda cls, url, **kwargs: fake))
    settings = make_settings(cache_enabled=True, redis_url="redis://cache.example:6379/0")
    with world(settings, kb, tmp_path) as built:
        assert isinstance(get_semantic_cache().backend, RedisCacheBackend)
        assert [ask()["cache_hit"] for _ in range(2)] == [False, True]
        assert built.generate_calls() == 1
    assert any(key.startswith("rag:semcache:entry:") for key in fake.strings)


# --- over the REST API ------------------------------------------------------------------------------------


def generate(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    reply = client.post("/api/v1/rag/generate", json={"query": QUESTION, **fields})
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_api_second_generate_is_a_cache_hit_and_metered(cached: World) -> None:
    with serve(cached.settings) as client:
        first, second = generate(client), generate(client)
        metrics = client.get("/metrics").text
    assert first["metadata"]["cache_hit"] is False and second["metadata"]["cache_hit"] is True
    assert cached.generate_calls() == 1 and second["answer"] == first["answer"] == ANSWER
    assert second["citations"] == first["citations"]
    assert 'rag_cache_lookups_total{result="hit"} 1.0' in metrics
    assert 'rag_cache_lookups_total{result="miss"} 1.0' in metrics


def test_api_use_cache_false_bypasses(cached: World) -> None:
    with serve(cached.settings) as client:
        generate(client)
        bypassed = generate(client, use_cache=False)
    assert bypassed["metadata"]["cache_hit"] is False and cached.generate_calls() == 2


def test_api_upload_then_the_cache_misses(cached: World, tmp_path: Path) -> None:
    with serve(cached.settings) as client:
        generate(client)
        files = {"files": ("saturn.md", b"# Saturn\n\nSaturn has bright rings of ice.", "text/markdown")}
        assert client.post("/api/v1/documents", files=files).status_code == 200
        after = generate(client)
    assert after["metadata"]["cache_hit"] is False and cached.generate_calls() == 2


def test_api_delete_then_the_cache_misses_and_search_finds_nothing(cached: World) -> None:
    jupiter = str((cached.folders["default"] / "jupiter.md").resolve())
    with serve(cached.settings) as client:
        generate(client)
        reply = client.delete("/api/v1/documents", params={"source": jupiter})
        assert reply.status_code == 200, reply.text
        after = generate(client)
    assert after["metadata"]["cache_hit"] is False
    assert all(source["source"] != jupiter for source in after["sources"])
    hits = Searcher(cached.kb).search("Jupiter largest planet moons", tenant="default").hits
    assert all(hit.metadata["source"] != jupiter for hit in hits)
    assert json.dumps(after).count("95 known moons") == 0
