"""Tests of retrieval.chunking: size limit, overlap, paragraph/sentence boundaries, merging, hard splits.

Token counts of the fixture sentences (cl100k_base) are asserted up front, so the expected chunk groupings
below follow from arithmetic on those numbers rather than from running the chunker.
"""

from __future__ import annotations

import math
import random

import pytest

from retrieval.chunking import ChunkingConfig, chunk_text
from retrieval.tokens import count_tokens, decode, encode

MERCURY = "Mercury is the smallest planet and the closest to the Sun."  # 13 tokens
VENUS = "Venus is wrapped in a thick atmosphere of carbon dioxide."  # 12
JUPITER = (
    "Jupiter is the largest planet, more than twice as massive as all the other planets combined, "
    "and it has dozens of moons."
)  # 26
MARS = "Mars is red."  # 5
SATURN = "Saturn is best known for its bright ring system of ice and rock."  # 15
EARTH = "Earth is the third planet from the Sun and the only place known to support life."  # 17
NEPTUNE = "Neptune has the strongest winds in the Solar System."  # 11
URANUS = "Uranus rotates on its side."  # 8
PLUTO = "Pluto is a dwarf planet in the Kuiper Belt beyond Neptune."  # 14
ENGLISH_TOKENS = {
    MERCURY: 13, VENUS: 12, JUPITER: 26, MARS: 5, SATURN: 15, EARTH: 17, NEPTUNE: 11, URANUS: 8, PLUTO: 14,
}  # fmt: skip

CHINESE_SENTENCES = [
    "长城是中国古代修建的大型军事防御工程。",  # 22 tokens
    "八达岭长城位于北京市延庆区！",  # 17
    "你在月球上能用肉眼看到长城吗？",  # 18
    "明朝用了大约二百年的时间重修长城。",  # 18
    "士兵在烽火台上白天放烟、夜间点火。",  # 24
    "长城被联合国教科文组织列入世界遗产名录。",  # 25
]
CHINESE_TOKENS = [22, 17, 18, 18, 24, 25]

NUMBER_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def test_fixture_token_counts() -> None:
    """The arithmetic of the other tests rests on these counts."""
    for sentence, tokens in ENGLISH_TOKENS.items():
        assert count_tokens(sentence) == tokens, sentence
    assert [count_tokens(sentence) for sentence in CHINESE_SENTENCES] == CHINESE_TOKENS
    assert count_tokens(" ".join(NUMBER_WORDS * 10)) == 100  # each " word" is one token


def consecutive_groups(chunks: list[str], parts: list[str], separator: str) -> list[list[str]]:
    """Split `parts` into consecutive groups whose joins are exactly `chunks`; fail if impossible."""
    groups: list[list[str]] = []
    position = 0
    for chunk in chunks:
        for end in range(position + 1, len(parts) + 1):
            if separator.join(parts[position:end]) == chunk:
                groups.append(parts[position:end])
                position = end
                break
        else:
            raise AssertionError(f"chunk is not a run of whole parts starting at part {position}: {chunk!r}")
    assert position == len(parts), "some parts are in no chunk"
    return groups


# --- size limit ----------------------------------------------------------------------------------------


def random_text(rng: random.Random) -> str:
    """Paragraphs of sentences in English (with brackets, quotes, numbers) or Chinese (with quotes)."""
    english = (
        'the sun planet orbit (moon) jupiter\'s "quoted" 3.14 data-driven e.g. x+y=z café 12,345 [ref] --'
    )
    chinese = list("长城是中国古代修建的大型军事防御工程主要用于抵御北方游牧民族侵扰") + [
        "2012年",
        "“万里长城”",
        "（明朝）",
    ]
    is_chinese = rng.random() < 0.5
    paragraphs = []
    for _ in range(rng.randint(1, 6)):
        sentences = []
        for _ in range(rng.randint(1, 8)):
            length = rng.randint(1, 30)
            if is_chinese:
                sentences.append("".join(rng.choice(chinese) for _ in range(length)) + rng.choice("。！？；"))
            else:
                sentences.append(
                    " ".join(rng.choice(english.split()) for _ in range(length)) + rng.choice(".!?;")
                )
        paragraphs.append(("" if is_chinese else " ").join(sentences))
    return "\n\n".join(paragraphs)


def test_chunks_never_exceed_the_configured_size() -> None:
    # Seams between joined parts retokenise ("x" + " (" + "moon", "。" fusing with the next character):
    # a chunker that sums part sizes lets such chunks run over; the count must hold on the final text.
    rng = random.Random(20240601)
    checked = 0
    for _ in range(250):
        text = random_text(rng)
        size = rng.choice([16, 24, 40, 64])
        config = ChunkingConfig(size, rng.choice([0, size // 8, size // 4]))
        for chunk in chunk_text(text, config):
            assert count_tokens(chunk) <= size, (size, config.overlap, chunk)
            checked += 1
    assert checked > 1000


# --- overlap -------------------------------------------------------------------------------------------


def test_consecutive_chunks_share_the_overlap_tokens() -> None:
    paragraph = " ".join([MERCURY, VENUS, MARS, SATURN, EARTH, NEPTUNE, URANUS, PLUTO])  # 95 tokens
    overlap = 8
    chunks = chunk_text(paragraph, ChunkingConfig(40, overlap))
    assert len(chunks) >= 3
    for previous, following in zip(chunks, chunks[1:], strict=False):
        tail = decode(encode(previous)[-overlap:]).strip()
        assert tail
        assert following.startswith(tail), (previous, following)
        assert count_tokens(following) <= 40


def test_no_overlap_means_the_chunks_partition_the_text() -> None:
    paragraph = " ".join([MERCURY, VENUS, MARS, SATURN, EARTH, NEPTUNE, URANUS, PLUTO])
    chunks = chunk_text(paragraph, ChunkingConfig(40, 0))
    assert " ".join(chunks) == paragraph


# --- boundaries ----------------------------------------------------------------------------------------


def test_paragraphs_that_fit_are_never_split() -> None:
    # size 30: Mercury 13 + Venus 12 = 25 fit; + Jupiter 26 does not; Jupiter 26 + Uranus 8 = 34 does not;
    # Uranus 8 + Neptune 11 + Mars 5 = 24 fit. (Joined, a seam may save a token: " Mars" is one token where
    # "Mars" is two, so no sum here is within one token of the limit.)
    text = "\n\n".join([MERCURY, VENUS, JUPITER, URANUS, NEPTUNE, MARS])
    chunks = chunk_text(text, ChunkingConfig(30, 0))
    assert chunks == [f"{MERCURY} {VENUS}", JUPITER, f"{URANUS} {NEPTUNE} {MARS}"]


def test_long_paragraph_is_split_at_sentence_ends() -> None:
    sentences = [MERCURY, VENUS, JUPITER, SATURN, EARTH, NEPTUNE, URANUS, PLUTO]  # 116 tokens, one paragraph
    chunks = chunk_text(" ".join(sentences), ChunkingConfig(30, 0))
    assert len(chunks) >= math.ceil(116 / 30)
    groups = consecutive_groups(chunks, sentences, " ")
    assert all(chunk.endswith(".") for chunk in chunks)
    assert all(count_tokens(chunk) <= 30 for chunk in chunks)
    assert sum(len(group) for group in groups) == len(sentences)


def test_chinese_text_is_split_after_full_stops_exclamation_and_question_marks() -> None:
    paragraph = "".join(CHINESE_SENTENCES)  # 124 tokens, no spaces
    chunks = chunk_text(paragraph, ChunkingConfig(40, 0))
    assert len(chunks) >= math.ceil(124 / 40)
    consecutive_groups(chunks, CHINESE_SENTENCES, "")
    assert all(chunk[-1] in "。！？" for chunk in chunks)
    assert all(count_tokens(chunk) <= 40 for chunk in chunks)


# --- short chunks --------------------------------------------------------------------------------------


def test_short_last_chunk_takes_text_from_its_predecessor() -> None:
    # size 40, min 0.25 -> threshold 10. Greedy packing gives [Jupiter 26 + Venus 12] and [Mars 5]: Mars
    # cannot join (26 + 12 + 5 = 43 > 40), so Venus moves over: [Jupiter 26], [Venus 12 + Mars 5].
    text = " ".join([JUPITER, VENUS, MARS])
    chunks = chunk_text(text, ChunkingConfig(40, 0, min_fraction=0.25))
    assert chunks == [JUPITER, f"{VENUS} {MARS}"]
    assert all(count_tokens(chunk) >= 10 for chunk in chunks)


def test_no_chunk_below_the_minimum_when_text_allows_it() -> None:
    sentences = [MERCURY, VENUS, SATURN, EARTH, NEPTUNE, PLUTO, MARS]  # 87 tokens, short sentence last
    for size, overlap in [(40, 0), (40, 6), (32, 0), (50, 10)]:
        chunks = chunk_text(" ".join(sentences), ChunkingConfig(size, overlap, min_fraction=0.25))
        assert len(chunks) > 1
        assert all(count_tokens(chunk) >= 0.25 * size for chunk in chunks), (size, overlap, chunks)
        assert all(count_tokens(chunk) <= size for chunk in chunks)


def test_text_shorter_than_the_minimum_is_one_chunk() -> None:
    assert chunk_text(MARS, ChunkingConfig(100, 10, min_fraction=0.5)) == [MARS]


# --- hard splits and edge cases ------------------------------------------------------------------------


def test_over_long_sentence_is_hard_split_by_tokens() -> None:
    text = " ".join(NUMBER_WORDS * 10)  # 100 one-token words, no sentence end
    chunks = chunk_text(text, ChunkingConfig(16, 0))
    assert [count_tokens(chunk) for chunk in chunks] == [16, 16, 16, 16, 16, 16, 4]
    assert " ".join(chunks) == text


def test_hard_split_of_chinese_keeps_every_character() -> None:
    # Many CJK characters span two or three tokens; a cut inside one must not lose the character.
    text = (
        "长城是中国古代修建的大型军事防御工程主要用于抵御北方游牧民族的侵扰现存的明长城东起辽宁省的虎山" * 3
    )
    assert count_tokens(text) > 16 * 5
    chunks = chunk_text(text, ChunkingConfig(16, 0))
    assert "".join(chunks) == text
    assert all(count_tokens(chunk) <= 16 for chunk in chunks)


@pytest.mark.parametrize("text", ["", "   ", "\n\n \n\n"])
def test_empty_text_gives_no_chunks(text: str) -> None:
    assert chunk_text(text, ChunkingConfig(50, 5)) == []


@pytest.mark.parametrize(("size", "overlap"), [(10, 10), (10, 11), (10, -1), (0, 0)])
def test_config_rejects_overlap_not_below_size(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="chunk"):
        ChunkingConfig(size, overlap)
