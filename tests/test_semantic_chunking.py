"""The semantic chunker (retrieval/semantic_chunking.py, RAG_CHUNKER=semantic): cuts between adjacent
sentences whose similarity drops, by percentile or absolute threshold, within the chunk size bounds.

A fake embedder gives each fixture sentence a chosen 2-d unit vector, so the similarity of two adjacent
sentences is the cosine of the angle between them, known in advance; a window of several sentences gets the
sum of theirs."""

from __future__ import annotations

import math

import pytest

from retrieval.chunking import ChunkingConfig, chunk_text
from retrieval.semantic_chunking import (
    SemanticPolicy,
    adjacent_similarities,
    cut_points,
    semantic_chunk_text,
)
from retrieval.tokens import count_tokens

HERONS = [
    "Herons stand still in shallow water for a long time.",
    "A heron strikes fish with its sharp bill.",
    "Grey herons nest in tall trees in colonies.",
]
COMETS = [
    "Comets are balls of ice and dust that orbit the Sun.",
    "A comet grows a bright tail near the Sun.",
    "Halley's comet returns about every 76 years.",
]
MARS = "Mars is red."  # 5 tokens


class AngleEmbedder:
    """Sentence -> (cos a, sin a) for its angle a; a text holding several sentences sums their vectors."""

    def __init__(self, angles: dict[str, float]) -> None:
        self.angles = angles
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        vectors = []
        for text in texts:
            found = [angle for sentence, angle in self.angles.items() if sentence in text]
            assert found, f"unknown text {text!r}"
            vectors.append([sum(math.cos(a) for a in found), sum(math.sin(a) for a in found)])
        return vectors


def angles_for(sentences: list[str], similarities: list[float]) -> dict[str, float]:
    """Angles such that sentence i and i + 1 have cosine similarity `similarities[i]`."""
    angles = [0.0]
    for value in similarities:
        angles.append(angles[-1] + math.acos(value))
    return dict(zip(sentences, angles, strict=True))


def test_fixture_token_counts() -> None:
    assert [count_tokens(s) for s in HERONS] == [12, 10, 10]
    assert [count_tokens(s) for s in COMETS] == [13, 10, 11]
    assert count_tokens(" ".join([*HERONS, MARS])) == 36 and count_tokens(" ".join([MARS, *COMETS])) == 39
    assert count_tokens(MARS) == 5


def test_similarities_are_the_cosines_of_adjacent_windows() -> None:
    sentences = HERONS + COMETS[:1]
    embed = AngleEmbedder(angles_for(sentences, [0.9, 0.3, 0.8]))
    assert adjacent_similarities(sentences, embed, buffer=0) == pytest.approx([0.9, 0.3, 0.8])
    assert embed.calls == [sentences]


def test_each_sentence_is_embedded_with_its_buffer_of_neighbours() -> None:
    sentences = HERONS + COMETS[:1]
    embed = AngleEmbedder(angles_for(sentences, [0.9, 0.3, 0.8]))
    adjacent_similarities(sentences, embed, buffer=1)
    h0, h1, h2, c0 = sentences
    assert embed.calls == [[f"{h0} {h1}", f"{h0} {h1} {h2}", f"{h1} {h2} {c0}", f"{h2} {c0}"]]


@pytest.mark.parametrize(
    ("policy", "cuts"),
    [
        (SemanticPolicy("absolute", min_similarity=0.5), [1]),
        (SemanticPolicy("absolute", min_similarity=0.85), [1, 2]),
        (SemanticPolicy("absolute", min_similarity=0.2), []),
        # distances 0.1, 0.7, 0.2: above their median (0.2) only the 0.7 drop; above their minimum, two.
        (SemanticPolicy("percentile", percentile=50), [1]),
        (SemanticPolicy("percentile", percentile=0), [1, 2]),
        (SemanticPolicy("percentile", percentile=100), []),
    ],
)
def test_cut_points_by_absolute_threshold_or_percentile(policy: SemanticPolicy, cuts: list[int]) -> None:
    assert cut_points([0.9, 0.3, 0.8], policy) == cuts


def test_a_document_is_cut_where_the_topic_changes() -> None:
    """Six sentences that fit one 200-token chunk: the paragraph chunker keeps them together; the semantic
    one cuts at the one drop (herons -> comets: similarity 0, the others 1)."""
    text = " ".join(HERONS + COMETS)
    config = ChunkingConfig(200, 20, min_fraction=0.0)
    embed = AngleEmbedder(angles_for(HERONS + COMETS, [1.0, 1.0, 0.0, 1.0, 1.0]))
    assert chunk_text(text, config) == [text]
    chunks = semantic_chunk_text(text, config, embed, SemanticPolicy(percentile=90, buffer=0))
    assert chunks == [" ".join(HERONS), " ".join(COMETS)]  # no overlap across a semantic cut


def test_paragraph_breaks_and_separators_bound_the_sentences() -> None:
    text = "\n\n".join(HERONS) + "\n\n" + " ".join(COMETS)
    config = ChunkingConfig(200, 20, min_fraction=0.0)
    embed = AngleEmbedder(angles_for(HERONS + COMETS, [1.0, 1.0, 0.0, 1.0, 1.0]))
    chunks = semantic_chunk_text(text, config, embed, SemanticPolicy(buffer=0))
    assert chunks == [" ".join(HERONS), " ".join(COMETS)]
    separated = ChunkingConfig(200, 20, min_fraction=0.0, separators=("|",))
    chunks = semantic_chunk_text("|".join(HERONS + COMETS), separated, embed, SemanticPolicy(buffer=0))
    assert chunks == [" ".join(HERONS), " ".join(COMETS)]


def test_a_segment_longer_than_the_chunk_size_is_packed_within_it() -> None:
    """All herons alike (no cut), 32 tokens over a 25-token chunk: packed by the paragraph chunker's rules
    (each chunk <= 25 tokens); the comets still start a chunk of their own."""
    text = " ".join(HERONS + COMETS)
    config = ChunkingConfig(25, 0, min_fraction=0.0)
    embed = AngleEmbedder(angles_for(HERONS + COMETS, [1.0, 1.0, 0.0, 1.0, 1.0]))
    chunks = semantic_chunk_text(text, config, embed, SemanticPolicy(buffer=0))
    assert chunks == [
        f"{HERONS[0]} {HERONS[1]}",
        HERONS[2],
        f"{COMETS[0]} {COMETS[1]}",
        COMETS[2],
    ]
    assert all(count_tokens(chunk) <= 25 for chunk in chunks)


def test_a_short_segment_joins_the_more_similar_neighbour() -> None:
    """herons | Mars | comets, cut on both sides of Mars (absolute 0.7); Mars (5 tokens) is under a quarter
    of 60 and joins the side it is more similar to, when both fit in one chunk."""
    sentences = [*HERONS, MARS, *COMETS]
    text = " ".join(sentences)
    config = ChunkingConfig(60, 0, min_fraction=0.25)
    policy = SemanticPolicy("absolute", min_similarity=0.7, buffer=0)
    closer_to_comets = AngleEmbedder(angles_for(sentences, [1.0, 1.0, 0.2, 0.6, 1.0, 1.0]))
    assert semantic_chunk_text(text, config, closer_to_comets, policy) == [
        " ".join(HERONS),
        " ".join([MARS, *COMETS]),
    ]
    closer_to_herons = AngleEmbedder(angles_for(sentences, [1.0, 1.0, 0.6, 0.2, 1.0, 1.0]))
    assert semantic_chunk_text(text, config, closer_to_herons, policy) == [
        " ".join([*HERONS, MARS]),
        " ".join(COMETS),
    ]
    # When the closer side has no room (Mars + comets = 39 tokens > 38), Mars goes to the other side.
    tight = ChunkingConfig(38, 0, min_fraction=0.25)
    assert semantic_chunk_text(text, tight, closer_to_comets, policy) == [
        " ".join([*HERONS, MARS]),
        " ".join(COMETS),
    ]


def test_short_texts() -> None:
    config = ChunkingConfig(200, 20)
    embed = AngleEmbedder({})
    assert semantic_chunk_text("", config, embed) == []
    assert semantic_chunk_text(f"  {MARS}  ", config, embed) == [MARS]
    assert embed.calls == []  # one sentence: nothing to compare, no model call


@pytest.mark.parametrize(
    "bad",
    [{"percentile": 101.0}, {"min_similarity": 1.5}, {"buffer": -1}],
)
def test_policy_values_are_checked(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SemanticPolicy(**bad)  # type: ignore[arg-type]
