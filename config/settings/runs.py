"""Settings of graph runs: the defaults of the run's context (state/context.py), each overridable per run.
One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator

AnswerMode = Literal["auto", "simple", "advanced", "precise"]
RewriteOverride = Literal["auto", "multi", "hyde", "decompose", "expand", "none"]
Preference = Literal["accuracy", "speed", "balanced"]
GraderKind = Literal["llm", "score", "auto"]
#: What a retrieval retry does (seed 003's `retryStrategy`; nodes/retry_strategy.py): expand = the same
#: queries searched deeper (a larger k), rewrite = reformulated queries, both = the two in one round.
RetryStrategy = Literal["expand", "rewrite", "both"]
#: Words read as an on/off value by the settings that also accept a seed's boolean name.
_TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
_FALSE_WORDS = frozenset({"false", "0", "no", "off"})
AnalyzerKind = Literal["llm", "heuristic", "auto"]
AnswerSource = Literal["rag", "chat"]
#: Who writes the short answer: the model, the extractive answerer (no model call), or the model with the
#: extractive answer when the model's is not grounded in the passages (nodes/generate.py).
Answerer = Literal["auto", "model", "extractive"]
#: How the model writes the answer: free text ("Answer: ... / Explanation: ..."), or a JSON object
#: {"answer", "explanation"} forced by the endpoint's JSON-schema grammar; auto = JSON schema for weak models
#: whose endpoint takes a schema. Default text: the grammar made the embedded model give its short answer in
#: form far more often (`rag eval prompts`, results/prompts.json), but end to end on development questions it
#: answered no better, with more calls and no token stream (README "Answer prompt and decoding").
AnswerDecoding = Literal["auto", "text", "json_schema"]


class RunSettings(BaseModel):
    """Answer mode, rewriting, Self-RAG loops and prompt budgets of a graph run."""

    mode: AnswerMode = Field(
        "auto", description="Answer template: simple | advanced | precise, or auto (from the query analysis)."
    )
    rewrite: RewriteOverride = Field(
        "auto",
        # RAG_ENABLE_QUERY_REWRITING is seed 003's on/off name of this knob: true = auto, false = none.
        validation_alias=AliasChoices("rewrite", "RAG_REWRITE", "RAG_ENABLE_QUERY_REWRITING"),
        description="Query rewriting of the first search: auto (by strategy) or a fixed method "
        "(RAG_REWRITE; or RAG_ENABLE_QUERY_REWRITING=true|false, read as auto|none). Retries follow "
        "RAG_RETRY_STRATEGY.",
    )
    hyde: bool = Field(
        True,
        validation_alias=AliasChoices("hyde", "RAG_HYDE", "RAG_ENABLE_HYDE"),
        description="Strategy selection may choose HyDE (a hypothetical answer passage searched for); false "
        "never does (RAG_REWRITE=hyde still does: an explicit method wins). RAG_HYDE or RAG_ENABLE_HYDE.",
    )
    self_rag: bool = Field(
        True,
        validation_alias=AliasChoices("self_rag", "RAG_SELF_RAG", "RAG_ENABLE_REFLECTION"),
        description="Self-RAG (seed 003's reflection): grade each answer and revise it or search again until "
        "it passes; false accepts the first answer (no grading call, no revision). RAG_SELF_RAG or "
        "RAG_ENABLE_REFLECTION.",
    )
    retry_strategy: RetryStrategy = Field(
        "rewrite",
        description="What a retrieval retry does (after poor passages or an answer that needs improvement): "
        "expand = the same queries searched deeper (k times RAG_RETRY_EXPAND_FACTOR each retry), rewrite = "
        "reformulated queries, both = both in one round.",
    )
    retry_expand_factor: int = Field(
        2,
        ge=2,
        le=10,
        description="Factor on the k of each expanding retry (RAG_RETRY_STRATEGY expand or both): top_k, "
        "then top_k x factor, x factor^2...; at most RAG_CANDIDATE_K.",
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
        description="Focused read: after the draft, the model reads the one passage that holds its "
        "answer again in a short prompt, and the short answer it gives there (when the passage holds it) "
        "becomes the bold short answer (one more model call, ~1-2 s on 2 cores); false keeps the draft's.",
    )
    focused_read_tokens: int = Field(
        400,
        ge=32,
        le=4000,
        description="Tokens of the passage given to the focused read, at most (the sentences around the "
        "draft's answer when the passage is longer).",
    )
    answer_decoding: AnswerDecoding = Field(
        "text",
        description="Answer decoding: text (streams) | json_schema ({answer, explanation} forced by the "
        "endpoint's grammar; not streamed) | auto (json_schema for a weak model whose endpoint takes one).",
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
        # RAG_MAX_REFLECTION_ROUNDS is seed 003's name: each answer attempt is one graded (reflection) round.
        validation_alias=AliasChoices("max_iterations", "RAG_MAX_ITERATIONS", "RAG_MAX_REFLECTION_ROUNDS"),
        description="Bound on retrieval rounds and on answer attempts, each graded once (Self-RAG loops; "
        "RAG_MAX_ITERATIONS or RAG_MAX_REFLECTION_ROUNDS).",
    )
    iterative_hops: int = Field(
        2, ge=1, le=3, description="Retrieval hops of the ITERATIVE (multi-hop) strategy."
    )
    # 0 chosen on development questions (not reported): HotpotQA 300-319 and CMRC 120-159, same answer
    # accuracy as unlimited patience (0.20 / 0.25) at 1.15 / 1.18 model calls instead of 1.25 / 1.38.
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
        description="Tokens of evidence sentences given to the reader (retrieval.evidence: the best "
        "sentences of the graded chunks with their neighbours); 0 = whole chunks (no compression).",
    )
    answer_max_tokens: int = Field(
        96,
        ge=16,
        le=4096,
        description="Completion cap of a short-answer reply (simple mode: answer line plus one cited "
        "sentence); explaining modes get generation_reserve. Also the stop of a looping reply.",
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
    max_subquestions: int = Field(4, ge=2, le=8, description="Sub-questions of decomposition (2 to this).")
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

    @field_validator("rewrite", mode="before")
    @classmethod
    def _rewriting_switch(cls, value: object) -> object:
        """RAG_ENABLE_QUERY_REWRITING's on/off value as a method: on = auto (by strategy), off = none."""
        word = str(value).strip().lower() if isinstance(value, str | bool) else None
        if word in _TRUE_WORDS:
            return "auto"
        if word in _FALSE_WORDS:
            return "none"
        return value
