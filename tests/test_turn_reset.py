"""Per-turn fields are declared once, in the state schema (`PerTurn`), and start_turn resets exactly them.

Why: start_turn once reset ~37 fields from a hand-kept list; a field added to the state but not to the list
carried the previous turn's value into the next turn.
"""

from __future__ import annotations

from typing import Annotated, Any

from langgraph.types import Overwrite

from nodes.start_turn import start_turn
from state.graph_state import PerTurn, State, add_count, per_turn_fields, turn_reset
from tests.conftest import runtime

#: What the old hand-kept list reset each turn, and to what (behaviour kept): reducer fields via Overwrite.
OVERWRITTEN = {
    "documents": [],
    "queries_run": [],
    "hops": 0,
    "retrieval_rounds": 0,
    "generation_rounds": 0,
    "llm_calls": 0,
    "timings_ms": {},
    "usage": {},
}
PLAIN = {
    "best_answer": None,
    "queries": [],
    "retrieval_depth": 1,
    "sources": [],
    "retrieved": [],
    "citations": [],
    "renderings": {},
    "unsupported_sentences": [],
    "draft": "",
    "evidence": [],
    "recalled_memories": None,
    "director_events": None,
    "answer": "",
    "answer_id": "",
    "short_answer": "",
    "not_found": False,
    "not_found_reason": "",
    "confidence": None,
    "band": "not_found",
    "answer_record": None,
    "error": "",
    "prompt_info": {},
    "answer_grade": {},
    "missing_terms": [],
    "retrieval_score": 0.0,
    "strategy": "",
    "analysis": {},
    "next_action": "accept",
    "stalled_revisions": 0,
    "retrieval_decision": "generate",
}
#: What start_turn sets from the turn's input, and what carries over between turns (never reset).
FROM_INPUT = {"question", "standalone_question", "tenant", "filters", "conversation_id"}
CARRIED = {"messages", "owner_tenant", "conversation_metadata", "cache_hit", "answer_score", "cache_key"}
CARRIED |= {"turn_started_at", "conversation_scopes_retrieval"}


def plain(update: dict[str, Any]) -> dict[str, Any]:
    return {name: value.value if isinstance(value, Overwrite) else value for name, value in update.items()}


def test_start_turn_resets_every_per_turn_field_as_before() -> None:
    update = start_turn({"question": "Which planet is the largest?"}, runtime())
    resets = {name: value for name, value in update.items() if name not in FROM_INPUT | {"messages"}}
    resets.pop("owner_tenant")  # the first turn claims the thread
    assert plain(resets) == OVERWRITTEN | PLAIN
    assert {name for name, value in resets.items() if isinstance(value, Overwrite)} == set(OVERWRITTEN)


def test_every_state_field_is_per_turn_or_named_as_carried_over() -> None:
    """A new State field makes this fail until it is declared PerTurn or named here as carried over."""
    assert set(State.__annotations__) - set(per_turn_fields(State)) - FROM_INPUT == CARRIED


class Extended(State, total=False):
    """The state with a per-turn field added: start_turn's reset takes it from the schema alone."""

    new_notes: Annotated[list[str], PerTurn([])]
    new_counter: Annotated[int, PerTurn(0), add_count]


def test_a_new_per_turn_field_is_reset_without_editing_start_turn() -> None:
    update = turn_reset(Extended)
    assert update["new_notes"] == [] and isinstance(update["new_counter"], Overwrite)
    assert update["new_counter"].value == 0
    assert set(update) == set(turn_reset()) | {"new_notes", "new_counter"}


def test_reset_values_are_fresh_each_turn() -> None:
    first, second = turn_reset(), turn_reset()
    first["sources"].append("leak")
    assert second["sources"] == [] and PerTurn([]).empty == []
