"""History trimming through langchain_core's trim_messages cuts exactly where the hand-written
loops it replaced did: the answer prompt's newest whole turns within a token limit
(retrieval/section_packing.py) and contextualize's last `history_turns` turns (nodes/contextualize.py).

The old loops are kept below as references and compared on random histories, including the cases
trim_messages' `start_on="human"` alone would get wrong: a history whose first turn has no question, and a
history with no question at all.
"""

from __future__ import annotations

import random

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage

from nodes.contextualize import recent_turns
from retrieval.section_packing import group_turns, message_tokens, pack_history

WORDS = "the sun moon planet orbit ring tea coffee wall river 长城 北京 data 3.14".split()


def referencepack_history(history: list[tuple[str, str]], limit: int) -> list[list[BaseMessage]]:
    """The loop pack_history had before trim_messages: whole turns, newest first, while they fit."""
    kept: list[list[BaseMessage]] = []
    used = 0
    for turn in reversed(group_turns(history)):
        size = message_tokens(turn)
        if used + size > limit:
            break
        kept.insert(0, turn)
        used += size
    return kept


def reference_recent_turns(history: list[AnyMessage], turns: int) -> list[AnyMessage]:
    """The slicing recent_turns had before trim_messages."""
    if turns <= 0:
        return []
    starts = [index for index, message in enumerate(history) if isinstance(message, HumanMessage)]
    if not starts:
        return list(history[-turns:])
    return list(history[starts[-turns] if len(starts) >= turns else starts[0] :])


def random_history(rng: random.Random) -> list[tuple[str, str]]:
    """(role, text) pairs: mostly alternating, sometimes several answers in a row, an answer first, an
    unknown role (ignored by the budget), or no question at all."""
    roles = ["human", "ai", "user", "assistant", "tool"]
    history = []
    for _ in range(rng.randint(0, 12)):
        role = rng.choices(roles, weights=[5, 5, 1, 1, 1])[0]
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30)))
        history.append((role, text))
    return history


def as_messages(history: list[tuple[str, str]]) -> list[AnyMessage]:
    by_role = {"human": HumanMessage, "user": HumanMessage, "ai": AIMessage, "assistant": AIMessage}
    return [by_role.get(role, SystemMessage)(text) for role, text in history]


def test_pack_history_keeps_the_same_whole_turns_as_the_loop_it_replaced() -> None:
    rng = random.Random(2211)
    trimmed = 0
    for _ in range(600):
        history = random_history(rng)
        whole = message_tokens([message for turn in group_turns(history) for message in turn])
        limit = rng.randint(0, whole + 10)
        expected = referencepack_history(history, limit)
        assert pack_history(history, limit) == expected, (history, limit)
        trimmed += 0 < len(expected) < len(group_turns(history))
    assert trimmed > 50  # the cut fell between turns often enough to mean something


def test_pack_history_keeps_a_first_turn_without_question_when_everything_fits() -> None:
    history = [("ai", "Earlier answer."), ("human", "Next question?"), ("ai", "Next answer.")]
    turns = pack_history(history, 10_000)
    assert [[message.text for message in turn] for turn in turns] == [
        ["Earlier answer."],
        ["Next question?", "Next answer."],
    ]
    # One token short of everything: the answer without its question goes, the whole turn after it stays.
    everything = message_tokens([message for turn in turns for message in turn])
    assert [len(turn) for turn in pack_history(history, everything - 1)] == [2]


def test_recent_turns_cuts_where_the_slicing_it_replaced_did() -> None:
    rng = random.Random(2212)
    for _ in range(600):
        history = as_messages(random_history(rng))
        turns = rng.randint(-1, 6)
        assert recent_turns(history, turns) == reference_recent_turns(history, turns), (history, turns)


def test_recent_turns_without_any_question_keeps_the_last_messages() -> None:
    history: list[AnyMessage] = [AIMessage("Welcome."), AIMessage("Ask me anything.")]
    assert [message.text for message in recent_turns(history, 1)] == ["Ask me anything."]
    assert recent_turns(history, 3) == history
