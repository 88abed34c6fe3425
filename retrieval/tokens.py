"""Token counting with tiktoken (cl100k_base), offline: every budget of the engine uses this one encoder."""

from __future__ import annotations

from functools import lru_cache

import tiktoken

from config.offline import prepare_offline_environment

ENCODING_NAME = "cl100k_base"
#: Distinct texts whose token counts are kept (a question's nodes count the same passages several times).
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
