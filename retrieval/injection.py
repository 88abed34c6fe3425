"""Untrusted passage text: spot instructions planted in documents and defang what could pass for prompt
structure. A document can say "ignore previous instructions" or carry chat role tags, so: `neutralize`
rewrites fences, role markers and source headers inside a passage; the extractive answerer skips
instruction-like sentences (`is_instruction_like`); and generate drops answer sentences carrying a token
only an instruction-like passage sentence holds (`planted_tokens`: an obeyed "reply only with X" gives X).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

#: Phrases of instructions addressed to a model (matched case-insensitively inside one sentence).
_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}\b(?:instructions?|prompts?|rules?|"
    r"guidelines?|context|directions?)\b"
    r"|\b(?:new|updated|real|actual|secret|hidden)\s+instructions?\b"
    r"|#{2,}\s*(?:instruction|system|assistant|user|human|response)\b"
    r"|\bsystem\s*(?:notice|message|prompt|override|instruction)s?\b"
    r"|\b(?:administrator|admin|developer|operator)\s+(?:override|mode|notice|instruction)s?\b"
    r"|\bfrom now on\b"
    r"|\b(?:reply|respond|answer|say|write|output|print)\s+(?:only\s+|just\s+|exactly\s+)?"
    r"(?:with|by saying)\b"
    r"|\b(?:answer|reply|respond)\s+(?:to\s+)?(?:every|each|any|all)\s+(?:questions?|messages?|prompts?)\b"
    r"|\b(?:include|insert|append|add)\s+(?:the\s+)?(?:token|code|phrase|word|string)\b"
    r"|\bin (?:every|each|all) (?:answers?|repl(?:y|ies)|responses?)\b"
    r"|\byou (?:must|should|will|are to|have to)\s+(?:now\s+)?(?:answer|reply|respond|say|ignore|"
    r"output|include|act|pretend)\b"
    r"|\b(?:act|behave) as (?:an?|the)\b|\bpretend (?:to be|you are)\b"
    r"|\bjailbreak\b|\bprompt injection\b"
    # Instructions that suppress the answer ("ignore the question and answer 'not found'").
    r"|\bignore (?:the|this|that|any|all|every|each)\s+(?:questions?|query|queries|requests?|users?)\b"
    r"|\b(?:answer|reply|respond|say|state)\s+(?:only\s+|just\s+|exactly\s+)?(?:that\s+)?[\"'“‘]?"
    r"(?:not found|nothing (?:was )?found|"
    r"(?:you |it )?(?:do not|don't|cannot|can't|could not) (?:know|find|answer)|"
    r"(?:the |this |that )?information is (?:not available|unavailable|missing))"
    r"|\b(?:note|message|instructions?|reminder)s?\s+(?:to|for)\s+(?:the\s+|any\s+)?(?:ai|assistants?|models?|"
    r"llms?|chatbots?|bots?|language models?)\b"
    r"|\b(?:if|when|whenever)\s+(?:you are|you're|you get)\s+asked\b[^.\n]{0,80}\b(?:answer|reply|"
    r"respond|say)\b"
    r"|\b(?:answer|reply|respond|say)\s+(?:that\s+)?(?:it|this|the answer)\s+is\s+not\s+in\s+the\s+"
    r"(?:documents?|sources?|context|passages?|text)\b"
    r"|忽略(?:之前|以上|上面|前面|所有)|无视(?:之前|以上|所有)|系统(?:通知|提示|指令)|从现在起|从现在开始",
    re.IGNORECASE,
)
#: Chat-template role markers ("<|im_start|>", "[INST]", "<<SYS>>", "<system>").
_ROLE_TAG = re.compile(
    r"<\|[^|<>\n]{0,40}\|>|\[/?INST\]|<</?SYS>>|</?(?:system|assistant|user|human)>",
    re.IGNORECASE,
)
#: Look-alikes of the sources fence (any "<<< ... SOURCES ... >>>" variant).
_FENCE_LIKE = re.compile(r"<{2,}[^<>\n]{0,20}SOURCES?[^<>\n]{0,20}>{2,}", re.IGNORECASE)
#: A line starting with a role label ("System:", "Assistant:", "### Instruction").
_ROLE_LINE = re.compile(
    r"(?im)^([ \t]*)(?:#{1,6}[ \t]*)?(system|assistant|user|human|instruction|instructions|response)"
    r"[ \t]*:"
)
_HEADING_ROLE = re.compile(
    r"(?im)^([ \t]*)#{1,6}[ \t]*(system|assistant|user|human|instructions?|response)\b"
)
#: A copy of a source header inside a passage ("[2] (File: x.md)") would read as another source.
_FAKE_HEADER = re.compile(r"\((File|Source|Page)\s*:\s*", re.IGNORECASE)
#: Tokens that can carry an obeyed instruction into an answer: words with a digit or in capitals, numbers.
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
#: Distinct sentences whose instruction check is kept.
INSTRUCTION_CHECK_CACHE_SIZE = 8192


@lru_cache(maxsize=INSTRUCTION_CHECK_CACHE_SIZE)
def is_instruction_like(sentence: str) -> bool:
    """Whether a sentence addresses a model (an instruction or a role marker), not the reader. Cached per
    sentence: evidence selection, answer spans and the grounding checks ask it of the same passage
    sentences, about 70 times a question."""
    return bool(_INSTRUCTION.search(sentence) or _ROLE_TAG.search(sentence) or _HEADING_ROLE.search(sentence))


def neutralize(text: str) -> str:
    """Passage text safe inside the fence: role tags and fence look-alikes replaced by "[tag removed]", role
    labels at line starts quoted, "### System" headings flattened, source-header look-alikes de-parenthesised;
    the words themselves stay (they may be a fact the reader needs)."""
    cleaned = _FENCE_LIKE.sub("[tag removed]", _ROLE_TAG.sub("[tag removed]", text))
    cleaned = _ROLE_LINE.sub(lambda m: f"{m.group(1)}'{m.group(2)}' said:", cleaned)
    cleaned = _HEADING_ROLE.sub(lambda m: f"{m.group(1)}{m.group(2)}", cleaned)
    return _FAKE_HEADER.sub(lambda m: f"({m.group(1).lower()} ", cleaned)


def _distinctive(token: str) -> bool:
    """Tokens specific enough to betray a copied instruction: with a digit, or mostly capitals (>= 3)."""
    if any(char.isdigit() for char in token):
        return True
    letters = [char for char in token if char.isalpha()]
    return len(letters) >= 3 and sum(char.isupper() for char in letters) >= len(letters) - 1


def planted_tokens(sentences_of: Iterable[list[str]]) -> set[str]:
    """Distinctive tokens (lowercased) that occur in instruction-like sentences of the passages and nowhere
    else in them. `sentences_of` gives each passage's sentences (the caller's splitter, so this module stays
    free of sentence rules)."""
    planted: set[str] = set()
    honest: set[str] = set()
    for sentences in sentences_of:
        for sentence in sentences:
            tokens = {token.lower() for token in _TOKEN.findall(sentence) if _distinctive(token)}
            (planted if is_instruction_like(sentence) else honest).update(tokens)
    return planted - honest


def carries_planted_token(sentence: str, planted: set[str]) -> bool:
    """Whether a sentence contains one of the planted tokens (see `planted_tokens`)."""
    if not planted:
        return False
    return any(token.lower() in planted for token in _TOKEN.findall(sentence))
