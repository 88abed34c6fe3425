"""Development and test halves of a labelled set, by a hash of each item's id.

Why its own module: every evaluation that chooses a setting (a threshold, a prompt, a router rule) must choose
it on one half and report it on the other; the readers (evals/datasets.py) only load questions, and the
halves are the same whichever reader loaded them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal, get_args

from evals.datasets import QAExample

#: The halves of a question set: settings are chosen on "dev" and reported on "test" (split_of).
Split = Literal["dev", "test"]
SPLITS: tuple[str, ...] = get_args(Split)
#: What `rag eval qa --split` also accepts: every question, whichever half (the behaviour before splits).
ALL_SPLITS = "all"


def hash_split(key: str, test_share: float) -> Split:
    """ "test" when SHA-256(key, UTF-8), its first 8 bytes read as a fraction of their range, is below
    `test_share`, else "dev": the router's and the follow-ups' halves (a key with the source or a salt keeps
    sets apart; stable across runs, machines and added items)."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < test_share else "dev"


def split_of(qid: str) -> Split:
    """The half a question belongs to: "dev" when the first byte of SHA-256(qid, UTF-8) is even, else "test".

    Why a hash of the id rather than file position: the half of a question never changes when a file is
    resampled, reordered or grown, so a setting chosen on "dev" (a confidence threshold, a prompt) is never
    chosen on a question later reported in "test". SHA-256 makes the halves about even whatever the ids
    look like (sequential, hex, prefixed); Python's hash() would change between processes.
    """
    return "dev" if hashlib.sha256(qid.encode("utf-8")).digest()[0] % 2 == 0 else "test"


def examples_in_split(examples: Iterable[QAExample], split: str) -> list[QAExample]:
    """The examples of one half (split_of), in their order; all of them for ALL_SPLITS."""
    if split == ALL_SPLITS:
        return list(examples)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join((*SPLITS, ALL_SPLITS))}")
    return [example for example in examples if split_of(example.qid) == split]
