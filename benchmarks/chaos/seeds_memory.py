"""The seeds suite's memory probes: another tenant's memories, and another conversation's memories and
summaries within a tenant, attacked over HTTP (benchmarks/chaos/seeds.py runs them).

Bravo keeps two memories (one tenant-wide, one of its conversation `bravo-notes`); alpha lists, gets,
deletes and searches them by their ids, names bravo's tenant and conversation, and asks every seed route the
questions they answer: no word or id of bravo's memories may come back, and bravo's memories must be intact
afterwards. Within alpha, a memory of conversation A and the summary of conversation S must not reach an
answer in conversation B. Controls show the attacks could have found something: bravo's own question
recalls its memories, alpha's question in conversation A recalls A's memory, and S's summary is searchable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.chaos.api_server import GENERATE, ApiServer
from benchmarks.chaos.corpora import ALPHA, BRAVO, leaked
from benchmarks.chaos.http_client import HttpResult
from benchmarks.chaos.limits import API_TURN_TIMEOUT_S, REFUSAL_TIMEOUT_S
from benchmarks.chaos.probe import Probe, failed_checks
from benchmarks.chaos.runner import ChaosRunner
from benchmarks.chaos.seeds_verdicts import (
    BATCH,
    GENERATE_STREAM,
    MEMORIES,
    QUERY,
    QUERY_STREAM,
    SUITE,
    SUMMARIZE,
    answer_excerpt,
    seeds_verdict,
)

#: Bravo's memories: (conversation, text); '' is tenant-wide. Their canaries are words no document holds.
BRAVO_NOTES = "bravo-notes"
BRAVO_MEMORIES = (
    ("", "The vault code of the Ostrevane archive is KV-4417."),
    (BRAVO_NOTES, "The courier who carries the archive keys is named Mirelthorn."),
)
BRAVO_MEMORY_CANARIES = ("Ostrevane", "KV-4417", "Mirelthorn")
#: The questions bravo's memories answer (naming no canary, so an echoed question is no leak).
VAULT_QUESTION = "What is the vault code of the archive?"
COURIER_QUESTION = "Who is the courier that carries the archive keys?"
#: Alpha's conversations: A keeps a memory, S is summarized, B asks about both.
CONVERSATION_A, CONVERSATION_S, CONVERSATION_B = "alpha-conv-a", "alpha-conv-s", "alpha-conv-b"
ALPHA_A_MEMORY = "The locker combination agreed in this conversation is Quenbrisk 5520."
LOCKER_CANARY, BOAT_CANARY = "Quenbrisk", "Talvornix"
SUMMARIZED_QUESTION = f"Please note that my boat is named {BOAT_CANARY}. Which planet is the largest?"
LOCKER_QUESTION = "What is the locker combination?"
CROSS_QUESTION = "What is the locker combination, and what is my boat named?"
#: The retrieval-only route (the control that S's summary is stored and findable).
SEARCH = "/api/v1/search"


# --- verdicts -----------------------------------------------------------------------------------------------


def listed_memories(result: HttpResult) -> list[dict[str, Any]]:
    """The memories of a list or search answer (none when it is not one)."""
    body = result.json()
    memories = body.get("memories") if isinstance(body, dict) else None
    return [memory for memory in memories or [] if isinstance(memory, dict)]


def memory_snapshot(result: HttpResult) -> list[tuple[str, str, str]]:
    """(id, conversation, text) of every memory a list answer shows, sorted: what 'intact' compares."""
    return sorted(
        (str(memory.get("id")), str(memory.get("conversation_id") or ""), str(memory.get("content") or ""))
        for memory in listed_memories(result)
    )


def intact_verdict(before: list[tuple[str, str, str]], after: list[tuple[str, str, str]]) -> Probe:
    """Bravo's memories after alpha's attacks: the same ids, conversations and texts as before (and some to
    begin with). A memory lost or changed counts as a leak: the attacker reached it."""
    intact = bool(before) and before == after
    missing = sorted(set(before) - set(after))
    return Probe(
        SUITE,
        "bravo's memories intact after alpha's attacks",
        intact,
        ""
        if intact
        else f"{len(before)} memories before, {len(after)} after; missing or changed: {missing[:3]}",
        {"leaks": float(not intact)},
    )


def deleted_count(result: HttpResult) -> int | None:
    """The `deleted` count of a delete answer (None when it is not one)."""
    body = result.json()
    value = body.get("deleted") if isinstance(body, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def foreign_delete_verdict(name: str, result: HttpResult, canaries: tuple[str, ...]) -> Probe:
    """Alpha deletes by bravo's ids or conversation: answered (200) with nothing deleted."""
    deleted = deleted_count(result)
    return seeds_verdict(
        name,
        result,
        {200},
        canaries=canaries,
        harms={"leaks": bool(deleted)},
        checks=[(f"the answer has no deleted count: {result.text[:120]}", result.ok and deleted is None)],
        note=f"deleted {deleted}",
    )


def control_verdict(name: str, result: HttpResult, wanted: tuple[str, ...]) -> Probe:
    """A control: the owner's own request finds what the attacks look for (each of `wanted` in the answer or
    its events). Without it, zero leaks would prove nothing: the thing attacked might not be reachable."""
    found = leaked(result.text, wanted)
    missing = [word for word in wanted if word not in found]
    problems = failed_checks(
        (f"status {result.status}: {result.text[:160]}", not result.ok),
        (
            f"{missing} not in the owner's own answer: the attack's target is not reachable",
            result.ok and missing,
        ),
    )
    detail = "; ".join(part for part in ("; ".join(problems), answer_excerpt(result)) if part)
    return Probe(SUITE, name, not problems, detail, {"controls_failed": float(bool(problems))})


# --- the probes ---------------------------------------------------------------------------------------------


@dataclass
class MemoryProbes:
    """The memory probes over one running server: plant, attack, then check bravo's memories."""

    runner: ChaosRunner
    server: ApiServer
    data_dir: Path
    bravo_ids: list[str] = field(default_factory=list)
    bravo_before: list[tuple[str, str, str]] = field(default_factory=list)

    def ask(self, tenant: str, path: str, body: dict[str, Any]) -> HttpResult:
        """A question as `tenant`, waited for as long as a model turn may take."""
        return self.server.request("POST", path, tenant=tenant, payload=body, timeout=API_TURN_TIMEOUT_S)

    def call(self, tenant: str, method: str, path: str, body: dict[str, Any] | None = None) -> HttpResult:
        """A memory request as `tenant` (no model turn)."""
        return self.server.request(method, path, tenant=tenant, payload=body, timeout=REFUSAL_TIMEOUT_S)

    def setup_failed(self, what: str, result: HttpResult) -> None:
        self.runner.record(
            Probe(SUITE, f"set-up: {what}", False, f"status {result.status}: {result.text[:200]}")
        )

    def plant(self) -> list[str]:
        """Bravo's memories and alpha's memory of conversation A; bravo's ids (none when planting failed)."""
        for conversation, text in BRAVO_MEMORIES:
            body = {"text": text, **({"conversation_id": conversation} if conversation else {})}
            result = self.call(BRAVO, "POST", MEMORIES, body)
            if not result.ok:
                self.setup_failed("bravo keeps a memory", result)
                return []
        listing = self.call(BRAVO, "GET", MEMORIES)
        self.bravo_before = memory_snapshot(listing)
        self.bravo_ids = [memory_id for memory_id, _conversation, _text in self.bravo_before]
        if len(self.bravo_ids) != len(BRAVO_MEMORIES):
            self.setup_failed(f"bravo lists its {len(BRAVO_MEMORIES)} memories", listing)
            return []
        result = self.call(
            ALPHA, "POST", MEMORIES, {"text": ALPHA_A_MEMORY, "conversation_id": CONVERSATION_A}
        )
        if not result.ok:
            self.setup_failed("alpha keeps a memory in conversation A", result)
        return self.bravo_ids

    def attack_tenants(self) -> None:
        """Alpha after bravo's memories through the memory routes and every seed route."""
        self._read_and_delete_foreign_memories()
        self._claim_bravo_tenant()
        self._ask_for_foreign_memories()

    def _read_and_delete_foreign_memories(self) -> None:
        """Alpha lists, searches, reads and deletes bravo's memories as its own tenant: nothing of bravo's
        shows, no id of bravo's is found, nothing is deleted."""
        words = BRAVO_MEMORY_CANARIES
        everything = (*words, *self.bravo_ids)
        record = self.runner.record
        for name, path in (
            ("alpha lists memories", MEMORIES),
            ("alpha lists bravo's conversation's memories", f"{MEMORIES}?conversation_id={BRAVO_NOTES}"),
            ("alpha searches memories for bravo's vault", f"{MEMORIES}/search?query=vault+code+archive"),
            (
                "alpha searches bravo's conversation for the courier",
                f"{MEMORIES}/search?query=courier&conversation_id={BRAVO_NOTES}",
            ),
        ):
            record(seeds_verdict(name, self.call(ALPHA, "GET", path), {200}, canaries=everything))
        for index, memory_id in enumerate(self.bravo_ids):
            for method in ("GET", "DELETE"):
                result = self.call(ALPHA, method, f"{MEMORIES}/{memory_id}")
                record(
                    seeds_verdict(
                        f"alpha {method}s bravo's memory {index} by id: 404", result, {404}, canaries=words
                    )
                )
        ids = "&".join(f"id={memory_id}" for memory_id in self.bravo_ids)
        record(
            foreign_delete_verdict(
                "alpha deletes bravo's ids (?id=): nothing deleted",
                self.call(ALPHA, "DELETE", f"{MEMORIES}?{ids}"),
                words,
            )
        )
        record(
            foreign_delete_verdict(
                "alpha deletes bravo's conversation's memories: nothing deleted",
                self.call(ALPHA, "DELETE", f"{MEMORIES}?conversation_id={BRAVO_NOTES}"),
                words,
            )
        )

    def _claim_bravo_tenant(self) -> None:
        """Alpha names tenant bravo in a query or body: every route refuses with 403."""
        everything = (*BRAVO_MEMORY_CANARIES, *self.bravo_ids)
        record = self.runner.record
        for name, method, path, body in (
            ("alpha lists with tenant_id=bravo", "GET", f"{MEMORIES}?tenant_id={BRAVO}", None),
            (
                "alpha searches with tenant_id=bravo",
                "GET",
                f"{MEMORIES}/search?query=vault&tenant_id={BRAVO}",
                None,
            ),
            (
                "alpha gets bravo's memory with tenant_id=bravo",
                "GET",
                f"{MEMORIES}/{self.bravo_ids[0]}?tenant_id={BRAVO}",
                None,
            ),
            (
                "alpha deletes all of bravo's memories",
                "DELETE",
                f"{MEMORIES}?all=true&tenant_id={BRAVO}",
                None,
            ),
            (
                "alpha keeps a memory for bravo",
                "POST",
                MEMORIES,
                {"text": "Alpha was here.", "tenant_id": BRAVO},
            ),
            (
                "alpha asks /query as tenant bravo",
                "POST",
                QUERY,
                {"query": VAULT_QUESTION, "tenant_id": BRAVO},
            ),
        ):
            record(
                seeds_verdict(
                    f"{name}: 403", self.call(ALPHA, method, path, body), {403}, canaries=everything
                )
            )

    def _ask_for_foreign_memories(self) -> None:
        """Bravo's own question recalls its memories (the control); alpha's questions on every answer route,
        scoped to bravo's conversation or not, never do."""
        everything = (*BRAVO_MEMORY_CANARIES, *self.bravo_ids)
        record = self.runner.record
        record(
            control_verdict(
                "control: bravo's own question recalls both of its memories",
                self.ask(
                    BRAVO,
                    GENERATE,
                    {"query": f"{VAULT_QUESTION} {COURIER_QUESTION}", "conversation_id": BRAVO_NOTES},
                ),
                ("KV-4417", "Mirelthorn"),
            )
        )
        questions: list[tuple[str, str, dict[str, Any]]] = [
            ("alpha asks /query what bravo's memory answers", QUERY, {"query": VAULT_QUESTION}),
            (
                "alpha streams /query-stream on bravo's conversation id",
                QUERY_STREAM,
                {"query": VAULT_QUESTION, "conversation_id": BRAVO_NOTES},
            ),
            (
                "alpha asks /generate scoped to bravo's conversation id",
                GENERATE,
                {"query": COURIER_QUESTION, "conversation_id": BRAVO_NOTES},
            ),
            (
                "alpha streams /generate/stream on bravo's thread and conversation ids",
                GENERATE_STREAM,
                {"query": COURIER_QUESTION, "thread_id": BRAVO_NOTES, "conversation_id": BRAVO_NOTES},
            ),
            (
                "alpha asks a /batch of bravo's questions",
                BATCH,
                {"queries": [{"query": COURIER_QUESTION, "conversation_id": BRAVO_NOTES}]},
            ),
        ]
        for name, path, body in questions:
            result = self.ask(ALPHA, path, body)
            record(seeds_verdict(name, result, {200}, canaries=everything, note=answer_excerpt(result)))

    def attack_conversations(self) -> None:
        """Conversation A's memory and S's summary must not reach an answer in conversation B."""
        record = self.runner.record
        canaries = (LOCKER_CANARY, BOAT_CANARY)
        turn = self.ask(ALPHA, QUERY, {"query": SUMMARIZED_QUESTION, "conversation_id": CONVERSATION_S})
        if not turn.ok:
            self.setup_failed("alpha's turn in conversation S", turn)
        summary = self.call(
            ALPHA, "POST", SUMMARIZE.format(thread=CONVERSATION_S), {"conversation_id": CONVERSATION_S}
        )
        record(seeds_verdict("alpha summarizes conversation S", summary, {200}))
        search = self.call(ALPHA, "POST", SEARCH, {"query": f"boat named {BOAT_CANARY}", "mode": "bm25"})
        record(
            control_verdict(
                "control: conversation S's summary is stored and searchable", search, (BOAT_CANARY,)
            )
        )
        record(
            control_verdict(
                "control: conversation A's question recalls A's memory",
                self.ask(ALPHA, GENERATE, {"query": LOCKER_QUESTION, "conversation_id": CONVERSATION_A}),
                (LOCKER_CANARY,),
            )
        )
        for name, path, body in (
            (
                "conversation B asks /query what A's memory and S's summary answer",
                QUERY,
                {"query": CROSS_QUESTION, "conversation_id": CONVERSATION_B},
            ),
            (
                "conversation B asks /generate (scoped to B) what A's memory and S's summary answer",
                GENERATE,
                {"query": CROSS_QUESTION, "conversation_id": CONVERSATION_B},
            ),
        ):
            result = self.ask(ALPHA, path, body)
            record(seeds_verdict(name, result, {200}, canaries=canaries, note=answer_excerpt(result)))
        for name, path in (
            ("conversation B lists its memories", f"{MEMORIES}?conversation_id={CONVERSATION_B}"),
            (
                "conversation B searches its memories for the locker",
                f"{MEMORIES}/search?query=locker+combination&conversation_id={CONVERSATION_B}",
            ),
        ):
            record(seeds_verdict(name, self.call(ALPHA, "GET", path), {200}, canaries=canaries))

    def check_intact(self) -> None:
        """Bravo's memories after every attack: the same as planted, each still readable by bravo."""
        after = memory_snapshot(self.call(BRAVO, "GET", MEMORIES))
        self.runner.record(intact_verdict(self.bravo_before, after))
