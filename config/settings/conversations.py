"""Settings of conversation memory (retrieval/conversation_summary.py, `rag summarize`) and of the
director (nodes/director_recall.py). One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from config.settings.api import API_TIMEOUT_MAX_S


class ConversationSettings(BaseModel):
    """How conversations are summarized into the store and recalled when a conversation stalls."""

    memory_collection: str = Field(
        "conversations", min_length=3, description="Collection that conversation summaries and turns go to."
    )
    summary_block_turns: int = Field(
        8, ge=1, le=200, description="Turns summarized together: one summary chunk per block of turns."
    )
    summary_max_tokens: int = Field(
        200,
        ge=32,
        le=2000,
        description="Tokens of one summary chunk, at most (kept inside the embedding window).",
    )
    summary_recall_k: int = Field(
        2,
        ge=0,
        le=50,
        description="Block summaries of the turn's conversation recalled from the long-term store with its "
        "passages (each expanded into its nearest detail events when the question asks for details); "
        "0 = none.",
    )
    # Automatic summaries (retrieval/auto_summary.py): only threads whose turns carry a conversation_id.
    summary_every_turns: int = Field(
        4,
        ge=0,
        le=1000,
        description="Summarize a conversation into the store after this many new turns since its last "
        "summary, in the background after the answer (0 = never automatically). 4 = RAG_HISTORY_TURNS + 1: "
        "a turn reaches the store before it leaves the prompt's history.",
    )
    summary_idle_s: float = Field(
        900.0,
        ge=0.0,
        le=API_TIMEOUT_MAX_S,
        description="Seconds without a turn after which a conversation with unsummarized turns is summarized "
        "by the idle sweep (`rag summarize --idle`, the API server's periodic sweep); 0 = no idle sweep.",
    )
    summary_sweep_s: float = Field(
        60.0,
        ge=1.0,
        le=API_TIMEOUT_MAX_S,
        description="Seconds between two idle sweeps of the API server (when RAG_SUMMARY_IDLE_S > 0).",
    )

    # --- the director (nodes/director_recall.py): a stalled conversation gets its events -------------
    director_stall_turns: int = Field(
        3,
        ge=0,
        le=100,
        description="Turns in a row without progress (answered 'not found', or asking again a question "
        "already asked) after which the answer prompt gets the director's section (0 = never).",
    )
    director_conversation_k: int = Field(
        15, ge=0, le=100, description="Events of this conversation the director retrieves."
    )
    director_other_k: int = Field(
        5, ge=0, le=100, description="Events of the tenant's other conversations the director retrieves."
    )
    director_share: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Share of the answer window left after the fixed part and the memories that the "
        "director's events may use (budgeted before sources and history).",
    )
