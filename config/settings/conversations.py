"""Settings of conversation memory (retrieval/conversation_index.py, `rag summarize`) and of the
director (nodes/director_recall.py). One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from config.settings.api import API_TIMEOUT_MAX_S


class ConversationSettings(BaseModel):
    """How conversations are summarized into the store and recalled when a conversation stalls."""

    # Automatic summaries (retrieval/auto_summary.py): only threads whose turns carry a conversation_id.
    summary_every_turns: int = Field(
        4,
        ge=0,
        le=1000,
        description="Summarize a conversation into the store after this many new turns, in the background "
        "(0 = never automatically); RAG_HISTORY_TURNS + 1, so a turn is stored before it leaves the history.",
    )
    summary_idle_s: float = Field(
        900.0,
        ge=0.0,
        le=API_TIMEOUT_MAX_S,
        description="Seconds without a turn after which a conversation with unsummarized turns is summarized "
        "by the idle sweep (`rag summarize --idle`, the API server's periodic sweep); 0 = no idle sweep.",
    )

    # --- the director (nodes/director_recall.py): a stalled conversation gets its events -------------
    director_stall_turns: int = Field(
        3,
        ge=0,
        le=100,
        description="Turns in a row without progress (answered 'not found', or asking again a question "
        "already asked) after which the answer prompt gets the director's section (0 = never).",
    )
