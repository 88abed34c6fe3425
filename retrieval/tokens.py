"""Token counting with tiktoken (cl100k_base), offline.

All budgets of the engine (chunk sizes, context budget, prompt budget) are counted with this one encoder,
so a number in the settings means the same thing everywhere.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

from config.offline import prepare_offline_environment

ENCODING_NAME = "cl100k_base"
#: Distinct texts whose token counts are kept. A question's nodes count the same passages and sentences
#: several times (evidence selection, the prompt budget, generate's accounting); about 2 ms of tiktoken per
#: question on a 2-core machine before this cache. Texts are the key, so the bound keeps memory small.
TOKEN_COUNT_CACHE_SIZE = 4096


@lru_cache(maxsize=1)
def encoder() -> tiktoken.Encoding:
    """The shared tiktoken encoder, loaded from the bundled BPE file."""
    prepare_offline_environment()
    return tiktoken.get_encoding(ENCODING_NAME)


@lru_cache(maxsize=TOKEN_COUNT_CACHE_SIZE)
def count_tokens(text: str) -> int:
    """Number of tokens in `text` (cached per text: the graph's nodes count the same texts again)."""
    return len(encoder().encode(text, disallowed_special=()))


def encode(text: str) -> list[int]:
    """Token ids of `text` (special tokens treated as plain text)."""
    return encoder().encode(text, disallowed_special=())


def decode(tokens: list[int]) -> str:
    """Text of token ids."""
    return encoder().decode(tokens)


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """`text` cut to at most `max_tokens` tokens (whole text when it fits)."""
    if max_tokens <= 0:
        return ""
    ids = encode(text)
    if len(ids) <= max_tokens:
        return text
    return decode(ids[:max_tokens])
