"""Development and test halves of a labelled set, by a hash of each item's id: a setting (a threshold, a
prompt, a router rule) is chosen on one half and reported on the other, whichever reader loaded the items.
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
    """ "test" when SHA-256(key)'s first 8 bytes, as a fraction of their range, are below `test_share`."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < test_share else "dev"


def split_of(qid: str) -> Split:
    """ "dev" when the first byte of SHA-256(qid) is even, else "test": a hash of the id, not the position,
    so a question never changes half when a file is resampled, reordered or grown."""
    return "dev" if hashlib.sha256(qid.encode("utf-8")).digest()[0] % 2 == 0 else "test"


def check_split(split: str) -> None:
    """ValueError naming the choices unless `split` is a half or ALL_SPLITS."""
    if split not in (*SPLITS, ALL_SPLITS):
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join((*SPLITS, ALL_SPLITS))}")


def examples_in_split(examples: Iterable[QAExample], split: str) -> list[QAExample]:
    """The examples of one half (split_of), in their order; all of them for ALL_SPLITS."""
    check_split(split)
    if split == ALL_SPLITS:
        return list(examples)
    return [example for example in examples if split_of(example.qid) == split]
