"""A client of the RAG engine's seed contract written from the seed document alone, not from the engine.

The request and response classes are copied from the seed's text (its section of each is named above the
class); where the seed describes a body by a field list rather than a class (RAGRequest, RAGResponse, the
stream events) the class is written from that list or from its stream examples, and says so. The tests
validate every body and every stream event the server sends with these classes: a field the seed's client
could not read fails them.

`from __future__ import annotations` lets the classes stand in the seed's order (QueryResponse names
SourceInfo before the seed defines it); pydantic resolves the names when a class is first used. The typing
names are the seed's own (`List`, `Dict`, `Optional`): hence the file's ruff exemption below.
"""

# ruff: noqa: UP006, UP035, UP045

from __future__ import annotations

import json
from typing import Dict, List, Literal, Optional

import httpx
from pydantic import BaseModel, Field

# --- "API 详解" > "1. 问答查询（非流式）" > 请求结构 (copied as written)


class QueryRequest(BaseModel):
    query: str  # 用户查询
    conversation_id: Optional[str] = None  # 会话ID
    tenant_id: Optional[str] = None  # 租户ID
    mode: str = "simple"  # 模式
    top_k: int = 5  # 检索结果数
    temperature: float = 0.7  # 生成温度
    include_sources: bool = True  # 是否包含来源


# --- "API 详解" > "1. 问答查询（非流式）" > 响应结构 (copied as written)


class QueryResponse(BaseModel):
    answer: str  # 生成的答案
    sources: List[SourceInfo]  # 引用来源列表
    query: str  # 原始查询
    rewritten_query: str  # 改写后的查询
    retrieved_count: int  # 检索到的文档数
    generation_time: float  # 生成耗时(秒)
    citations: List[CitationInfo]  # 引用详情
    metadata: Dict  # 元数据


class SourceInfo(BaseModel):
    id: str  # 文档ID
    title: str  # 文档标题
    content: str  # 文档内容片段
    score: float  # 相关性得分
    source: str  # 来源
    citation_id: str  # 引用标识符


class CitationInfo(BaseModel):
    citation_num: int  # 引用编号
    source_id: str  # 源文档ID
    confidence: float  # 置信度


# --- "架构层次说明" > Request Validator, and "时序图详细说明" > 输入参数（RAGRequest）:
# --- a field list, no class; written from it (query 1-5000 chars, rewrite_method multi/hyde/none
# --- default multi, top_k 1-50 default 10, stream default False, include_citations default True)


class RAGRequest(BaseModel):
    query: str = Field(min_length=1, max_length=5000)
    tenant_id: Optional[str] = None
    rewrite_method: Literal["multi", "hyde", "none"] = "multi"
    top_k: int = Field(10, ge=1, le=50)
    stream: bool = False
    include_citations: bool = True


class BatchRAGRequest(BaseModel):
    """ "架构层次说明" > BatchRAGRequest: queries, 1-50."""

    queries: List[str] = Field(min_length=1, max_length=50)


# --- "时序图详细说明" > 输出字段（RAGResponse）: a field list, no class; written from it


class RAGCitation(BaseModel):
    source_id: int  # 引用编号
    chunk_id: str  # 分块 ID
    content: str  # 原文内容
    score: float  # 相关性得分
    document_id: Optional[str]  # 元数据
    filename: Optional[str]
    page: Optional[int]
    url: Optional[str]


class RAGUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class RAGMetadata(BaseModel):
    total_time: float  # 总耗时（秒）
    rewrite_time: float  # 改写耗时（秒）
    retrieve_time: float  # 检索耗时（秒）
    generate_time: float  # 生成耗时（秒）
    chunks_found: int  # 检索到的文档数
    model: str  # 使用的模型名称
    usage: RAGUsage  # Token 使用情况


class RAGResponse(BaseModel):
    answer: str
    citations: List[RAGCitation]
    metadata: RAGMetadata


# --- "API 详解" > "2. 问答查询（流式）" > 响应格式: the example's events, one class per `type`


class QueryRewrittenEvent(BaseModel):
    type: Literal["query_rewritten"]
    content: str


class DocumentsRetrievedEvent(BaseModel):
    type: Literal["documents_retrieved"]
    count: int


class GenerationStartEvent(BaseModel):
    type: Literal["generation_start"]


class TokenEvent(BaseModel):
    type: Literal["token"]
    content: str


class GenerationCompleteEvent(BaseModel):
    type: Literal["generation_complete"]
    sources: List[SourceInfo]
    citations: List[CitationInfo]


class ErrorEvent(BaseModel):
    """`error`：错误信息 (the seed names no fields; a message is what a client shows)."""

    type: Literal["error"]
    message: str


QUERY_STREAM_EVENTS: dict[str, type[BaseModel]] = {
    "query_rewritten": QueryRewrittenEvent,
    "documents_retrieved": DocumentsRetrievedEvent,
    "generation_start": GenerationStartEvent,
    "token": TokenEvent,
    "generation_complete": GenerationCompleteEvent,
    "error": ErrorEvent,
}
#: The example's last line.
QUERY_STREAM_END = "[DONE]"


# --- "流式调用时序图" (/generate/stream): `yield {type: ...}` of its stages 2, 4 and 5


class ContextEvent(BaseModel):
    type: Literal["context"]
    chunks_count: int


class ChunkEvent(BaseModel):
    type: Literal["chunk"]
    content: str


class CitationsEvent(BaseModel):
    type: Literal["citations"]
    citations: List[RAGCitation]


class DoneEvent(BaseModel):
    type: Literal["done"]


GENERATE_STREAM_EVENTS: dict[str, type[BaseModel]] = {
    "context": ContextEvent,
    "chunk": ChunkEvent,
    "citations": CitationsEvent,
    "done": DoneEvent,
    "error": ErrorEvent,
}


def data_lines(reply: httpx.Response) -> list[str]:
    """The `data:` payloads of an SSE reply, in order (keep-alive comments and blank lines skipped).
    The seed's streams are `data:` lines only: an `event:` field is not its format."""
    payloads: list[str] = []
    for line in reply.iter_lines():
        assert not line.startswith("event:"), f"not the seed's format (an `event:` field): {line}"
        if line.startswith("data:"):
            payloads.append(line[len("data:") :].strip())
    return payloads


def read_events(payloads: list[str], classes: dict[str, type[BaseModel]]) -> list[BaseModel]:
    """Each payload validated by the class of its `type` (an unknown type fails)."""
    events: list[BaseModel] = []
    for payload in payloads:
        data = json.loads(payload)
        assert data["type"] in classes, f"an event type the seed does not name: {data}"
        events.append(classes[data["type"]].model_validate(data))
    return events


class SeedClient:
    """The seed's client: its routes, its request classes in, its response classes out."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def query(self, request: QueryRequest, **kwargs: object) -> QueryResponse:
        reply = self.client.post("/api/v1/rag/query", json=request.model_dump(), **kwargs)  # type: ignore[arg-type]
        assert reply.status_code == 200, reply.text
        return QueryResponse.model_validate(reply.json())

    def generate(self, request: RAGRequest, **kwargs: object) -> RAGResponse:
        reply = self.client.post("/api/v1/rag/generate", json=request.model_dump(), **kwargs)  # type: ignore[arg-type]
        assert reply.status_code == 200, reply.text
        return RAGResponse.model_validate(reply.json())

    def stream(self, path: str, body: BaseModel) -> list[str]:
        """The `data:` payloads of a streamed answer."""
        with self.client.stream("POST", path, json=body.model_dump()) as reply:
            assert reply.status_code == 200, reply.read()
            assert reply.headers["content-type"].startswith("text/event-stream")
            return data_lines(reply)

    def query_stream(self, request: QueryRequest) -> tuple[list[BaseModel], str]:
        """/query-stream's events (each validated) and its last line."""
        payloads = self.stream("/api/v1/rag/query-stream", request)
        return read_events(payloads[:-1], QUERY_STREAM_EVENTS), payloads[-1]

    def generate_stream(
        self, request: RAGRequest, path: str = "/api/v1/rag/generate/stream"
    ) -> list[BaseModel]:
        """/generate/stream's events (each validated)."""
        return read_events(self.stream(path, request), GENERATE_STREAM_EVENTS)
