"""Settings of graph runs: the defaults of the run's context (state/context.py), each overridable per run.
One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

AnswerMode = Literal["auto", "simple", "advanced", "precise"]
RewriteOverride = Literal["auto", "multi", "hyde", "decompose", "expand", "none"]
Preference = Literal["accuracy", "speed", "balanced"]
GraderKind = Literal["llm", "score", "auto"]
#: What a retrieval retry does (the notes assistant's `retryStrategy`; nodes/retry_strategy.py): expand =
#: the same queries searched deeper (a larger k), rewrite = reformulated queries, both = the two in one round.
RetryStrategy = Literal["expand", "rewrite", "both"]
AnalyzerKind = Literal["llm", "heuristic", "auto"]
AnswerSource = Literal["rag", "chat"]
#: Who writes the short answer: the model, the extractive answerer (no model call), or the model with the
#: extractive answer when the model's is not grounded in the passages (nodes/generate.py).
Answerer = Literal["auto", "model", "extractive"]
#: How the model writes the answer: free text, or a JSON object forced by the endpoint's grammar. Default
#: text: JSON answered no better end to end, with more calls and no token stream (README "Answer prompt and
#: decoding").
AnswerDecoding = Literal["auto", "text", "json_schema"]


class RunSettings(BaseModel):
    """Answer mode, rewriting, Self-RAG loops and prompt budgets of a graph run."""

    mode: AnswerMode = Field(
        "auto", description="Answer template: simple | advanced | precise, or auto (from the query analysis)."
    )
    rewrite: RewriteOverride = Field(
        "auto",
        description="Query rewriting of the first search: auto (by strategy) or a fixed method "
        "(none = the question as asked). Retries follow RAG_RETRY_STRATEGY.",
    )
    hyde: bool = Field(
        True,
        description="Strategy selection may choose HyDE (a hypothetical answer passage searched for); false "
        "never does (RAG_REWRITE=hyde still does: an explicit method wins).",
    )
    self_rag: bool = Field(
        True,
        description="Self-RAG: grade each answer and revise it or search again until it passes; false "
        "accepts the first answer.",
    )
    retry_strategy: RetryStrategy = Field(
        "rewrite",
        description="What a retrieval retry does: expand = the same queries searched deeper (k times "
        "RETRY_EXPAND_FACTOR) | rewrite = reformulated queries | both.",
    )
    preference: Preference = Field(
        "balanced", description="accuracy | speed | balanced: how much work to spend."
    )
    answerer: Answerer = Field(
        "auto",
        description="Short answer: auto (the model's, or the extractive span when the model's is not in the "
        "passages) | model | extractive (no model call).",
    )
    focused_read: bool = Field(
        True,
        description="After the draft, the model rereads the passage that holds its answer in a short "
        "prompt, and that short answer becomes the bold one (one more model call); false keeps the draft's.",
    )
    answer_decoding: AnswerDecoding = Field(
        "text",
        description="text (streams) | json_schema ({answer, explanation} forced by the endpoint's grammar) "
        "| auto (json_schema for a weak model).",
    )
    analyzer: AnalyzerKind = Field(
        "auto", description="Query analysis: llm | heuristic | auto (heuristic for weak models)."
    )
    grader: GraderKind = Field(
        "auto", description="Graders: llm | score | auto (score-based for weak models)."
    )
    max_iterations: int = Field(
        3,
        ge=1,
        le=10,
        description="Bound on retrieval rounds and on answer attempts, each graded once (Self-RAG "
        "loops; the notes assistant's reflection rounds).",
    )
    iterative_hops: int = Field(
        2, ge=1, le=3, description="Retrieval hops of the ITERATIVE (multi-hop) strategy."
    )
    # 0: the same accuracy as unlimited patience on development questions, with fewer model calls.
    revision_patience: int = Field(
        0,
        ge=0,
        le=10,
        description="Answer revisions in a row that may fail to beat the best answer before the Self-RAG "
        "loop gives up (0 = stop at the first that does not; max_iterations bounds the attempts anyway).",
    )
    relevance_threshold: float = Field(
        0.35, ge=0.0, le=1.0, description="Passage relevance (0-1) needed to count as relevant."
    )
    context_token_budget: int = Field(
        3000, ge=64, description="Tokens of retrieved context in the prompt, at most."
    )
    evidence_token_budget: int = Field(
        400,
        ge=0,
        le=8000,
        description="Tokens of evidence sentences given to the reader (retrieval/evidence.py); 0 = whole "
        "chunks.",
    )
    answer_max_tokens: int = Field(
        96,
        ge=16,
        le=4096,
        description="Completion cap of a short-answer reply (simple mode); explaining modes get "
        "generation_reserve.",
    )
    context_share: float = Field(
        0.5, gt=0.0, le=1.0, description="Share of the window left after the fixed part that context may use."
    )
    generation_reserve: int = Field(
        512, ge=16, description="Tokens reserved for the answer (< model_context_tokens)."
    )
    history_turns: int = Field(
        3, ge=0, le=100, description="Previous turns used to contextualize a follow-up question."
    )
    model_context_tokens: int = Field(
        8192, ge=128, description="Context window of the generation model, in tokens."
    )
    query_variants: int = Field(
        3, ge=1, le=8, description="Variants generated by multi-query rewriting (plus the original)."
    )
    cross_conversation_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="With a conversation id, share of results taken from other conversations "
        "(0 = strictly this one).",
    )
    collection: str = Field(
        "", description="Collection the graph searches ('' = every collection of the tenant)."
    )
    directory: str = Field(
        "",
        max_length=4096,
        description="Directory the graph searches: only documents whose source path is it or lies under it, "
        "by whole path components ('' = all; an absolute path, no '..'; retrieval/directory_scope.py).",
    )
    system_prompt: str = Field("", description="Operator instructions added to the answer's system prompt.")
    answer_source: AnswerSource = Field(
        "rag",
        description="rag: no evidence -> the honest not-found answer; chat: no evidence -> answer from the "
        "conversation history.",
    )
