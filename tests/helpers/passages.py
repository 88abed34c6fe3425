"""Retrieved passages built by hand, for tests that judge or cite an answer without running a search."""

from __future__ import annotations

from state.schemas import RetrievedDoc


def passage(index: int, text: str, title: str = "", relevance: float = 0.9) -> RetrievedDoc:
    """Passage `index` (chunk c<index> of /docs/p<index>.md) holding `text`, graded `relevance`."""
    return RetrievedDoc(
        chunk_id=f"c{index}",
        text=text,
        source=f"/docs/p{index}.md",
        title=title,
        page=0,
        doc_id=f"p{index}",
        score=1.0,
        relevance=relevance,
        query="",
        metadata={},
    )
