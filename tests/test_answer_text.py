"""The preamble small models put before answers is removed, and nothing else is."""

import pytest

from retrieval.answer_text import strip_preamble


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The answer is:\n\nSiri Remote [1]", "Siri Remote [1]"),
        ("The answer is: Paris [1].", "Paris [1]."),
        ("Answer: Paris", "Paris"),
        ("Final answer: 42", "42"),
        ("答案是：北京 [1]", "北京 [1]"),
    ],
)
def test_preamble_is_removed(raw: str, expected: str) -> None:
    assert strip_preamble(raw) == expected


@pytest.mark.parametrize(
    "raw",
    ["Paris is the capital of France [1].", "The answer is that x", "Answers vary [2].", "The answer is:"],
)
def test_other_text_is_kept(raw: str) -> None:
    assert strip_preamble(raw) == raw
