"""Document routes: upload, list, delete, and index raw text or an event.

Uploads are kept under `<data_dir>/uploads/<tenant>/<collection>/` because the catalog keys a document by its
path: uploading a name again replaces that document atomically, like `rag ingest`; a failed upload restores
the previous file. A client that leaves stops the ingestion (a 499).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from starlette.concurrency import run_in_threadpool

from core.metadata import MetadataBoundError, validate_document_metadata
from nodes.resources import get_resources
from persistence.semantic_cache import invalidate_tenant
from persistence.vector_store import DEFAULT_COLLECTION, validate_collection_name
from retrieval.deletion import delete_content
from retrieval.indexing import index_event, index_raw_text
from retrieval.ingest import IngestSummary, ingest_paths
from retrieval.ingest_lock import ingest_lock
from retrieval.loaders import SUPPORTED_SUFFIXES, LoaderError, StopRequested
from retrieval.public_source import UPLOAD_FOLDER, public_json, public_source, stored_sources
from service.api.errors import ApiError, ClientDisconnected
from service.api.runtime import api_state, wait_for_disconnect
from service.api.schemas import TextDocument

if TYPE_CHECKING:
    from retrieval.knowledge_base import KnowledgeBase

router = APIRouter(prefix="/api/v1/documents", tags=["documents"])

#: Bytes read per step while saving an upload (the size limit is checked as it grows).
COPY_BLOCK = 1 << 20
#: Random bytes in a staged upload's name (`.<name>.<hex>.part`, within DERIVED_NAME_RESERVE_BYTES).
STAGED_TOKEN_BYTES = 8
#: Longest file name most filesystems store (bytes of UTF-8), and the room kept for names derived from it.
FILESYSTEM_NAME_MAX_BYTES = 255
DERIVED_NAME_RESERVE_BYTES = 55
#: Longest upload file name accepted, in bytes of UTF-8: a longer one is 422 before anything is written.
MAX_UPLOAD_NAME_BYTES = FILESYSTEM_NAME_MAX_BYTES - DERIVED_NAME_RESERVE_BYTES

Result = TypeVar("Result")


def _collection(name: str | None, default: str) -> str:
    try:
        return validate_collection_name(name or default)
    except ValueError as error:
        raise ApiError(422, "ValidationError", f"collection: {error}", "collection") from None


def _safe_name(filename: str | None) -> str:
    name = Path(filename or "").name.strip()
    if not name or name.startswith(".") or name in ("..", "."):
        raise ApiError(422, "ValidationError", f"file: unusable file name {filename!r}", "file")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no filesystem name
        raise ApiError(
            422, "ValidationError", "file: unusable file name (not valid Unicode)", "file"
        ) from None
    if size > MAX_UPLOAD_NAME_BYTES:
        raise ApiError(
            422,
            "ValidationError",
            f"file: name too long: {size} bytes, at most {MAX_UPLOAD_NAME_BYTES} bytes of UTF-8",
            "file",
        )
    suffixes = "".join(Path(name).suffixes[-2:]).lower()
    if not any(suffixes.endswith(suffix) for suffix in SUPPORTED_SUFFIXES):
        raise ApiError(422, "ValidationError", f"file: unsupported file type {Path(name).suffix!r}", "file")
    return name


@dataclass(frozen=True)
class StagedFile:
    """An uploaded file copied next to its target under a name of its own, with its bytes' SHA-256."""

    target: Path
    staged: Path
    sha256: str


def _stage(upload: UploadFile, target: Path, max_bytes: int) -> StagedFile:
    """Copy `upload` beside `target` under a unique hidden name, hashing it as it is written."""
    staged = target.with_name(f".{target.name}.{secrets.token_hex(STAGED_TOKEN_BYTES)}.part")
    digest = hashlib.sha256()
    written = 0
    with staged.open("wb") as handle:
        while block := upload.file.read(COPY_BLOCK):
            written += len(block)
            if written > max_bytes:
                raise ApiError(
                    413,
                    "PayloadTooLarge",
                    f"file too large: more than {max_bytes} bytes (RAG_MAX_FILE_BYTES)",
                )
            digest.update(block)
            handle.write(block)
    return StagedFile(target, staged, digest.hexdigest())


@router.post("")
async def upload_documents(
    request: Request,
    files: Annotated[
        list[UploadFile], File(description="Files to index (.md .txt .html .pdf .docx .json .jsonl)")
    ],
    collection: Annotated[str | None, Form()] = None,
    tenant_id: Annotated[str | None, Form()] = None,
) -> dict[str, Any]:
    """Index uploaded files into one collection of the caller's tenant; 422 when every file failed."""
    return await _until_client_leaves(request, _upload, request, files, collection, tenant_id)


async def _until_client_leaves(request: Request, work: Callable[..., Result], *args: Any) -> Result:
    """Run `work(*args, should_stop)` in the thread pool; `should_stop()` is True once the client is gone."""
    gone = threading.Event()
    watcher = asyncio.ensure_future(_set_when_gone(request, gone))
    try:
        return await run_in_threadpool(work, *args, gone.is_set)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher


async def _set_when_gone(request: Request, gone: threading.Event) -> None:
    """Set `gone` when the client disconnects."""
    await wait_for_disconnect(request)
    gone.set()


def _upload(
    request: Request,
    files: list[UploadFile],
    collection: str | None,
    tenant_id: str | None,
    should_stop: Callable[[], bool],
) -> dict[str, Any]:
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    kb = get_resources().kb()
    name = _collection(collection, DEFAULT_COLLECTION)
    folder = state.settings.data_dir / UPLOAD_FOLDER / tenant / name
    targets = [folder / _safe_name(upload.filename) for upload in files]
    repeated = sorted({target.name for target in targets if targets.count(target) > 1})
    if repeated:
        raise ApiError(422, "ValidationError", f"files: {repeated[0]!r} given more than once", "files")
    folder.mkdir(parents=True, exist_ok=True)
    staged: list[StagedFile] = []
    try:
        for upload, target in zip(files, targets, strict=True):
            staged.append(_stage(upload, target, state.settings.max_file_bytes))
        # One upload into a tenant's collection at a time, so another upload of the same name cannot swap the
        # bytes between placing and indexing, and each reply speaks of its own bytes.
        with ingest_lock(kb.settings, tenant, name):
            return _place_and_ingest(request, staged, tenant, name, should_stop)
    finally:
        for item in staged:
            item.staged.unlink(missing_ok=True)


def _place_and_ingest(
    request: Request, staged: list[StagedFile], tenant: str, name: str, should_stop: Callable[[], bool]
) -> dict[str, Any]:
    """Put the staged files in place, ingest them and report per file what was indexed."""
    state = api_state(request)
    kb = get_resources().kb()
    saved: list[tuple[Path, Path | None]] = []
    try:
        for item in staged:
            target, backup = item.target, None
            if target.exists():
                backup = target.with_name(f".{target.name}.previous")
                shutil.copy2(target, backup)
            saved.append((target, backup))
            item.staged.replace(target)
        summary = ingest_paths(
            kb, [target for target, _ in saved], collection=name, tenant=tenant, should_stop=should_stop
        )
    except BaseException:
        _restore(saved)
        raise
    finished = {result.source for result in summary.results}
    failed = {result.source for result in summary.results if result.status == "failed"}
    # A failed file, or one a stopped run never finished, keeps its previous version (the catalog's).
    kept = finished - failed
    _restore([(target, backup) for target, backup in saved if str(target.resolve()) not in kept])
    _discard_backups(saved)
    report = summary.as_dict()
    if summary.count("indexed"):
        invalidate_tenant(tenant)  # its cached answers may be stale
    if summary.stopped:
        detail = f"{len(finished)} of {len(saved)} files done when ingestion stopped"
        state.client_left("upload_documents", request, f"upload: {detail}")
        raise ClientDisconnected(f"the client closed the connection during ingestion ({detail})")
    if failed and len(failed) == len(saved):
        reasons = "; ".join(
            f"{Path(result.source).name}: {result.reason}"
            for result in summary.results
            if result.status == "failed"
        )
        raise ApiError(422, "IngestError", f"no file could be indexed: {reasons}", "files")
    documents = _uploaded_documents(kb, staged, summary, tenant, name)
    reply = {"tenant_id": tenant, "collection": name, **report, "documents": documents}
    return public_json(reply, tenant=tenant, data_dir=state.settings.data_dir)  # no server path goes out


def _uploaded_documents(
    kb: KnowledgeBase, staged: list[StagedFile], summary: IngestSummary, tenant: str, name: str
) -> list[dict[str, Any]]:
    """Per uploaded file: its name, source, SHA-256, status, chunks, the catalog's hash and why it failed."""
    results = {result.source: result for result in summary.results}
    documents = []
    for item in staged:
        source = str(item.target.resolve())
        result = results.get(source)
        record = kb.catalog.document(tenant, name, source) if result and result.status != "failed" else None
        documents.append(
            {
                "file": item.target.name,
                "source": source,
                "sha256": item.sha256,
                "status": result.status if result else "failed",
                "chunks": result.chunks if result else 0,
                "file_hash": record.file_hash if record else None,
                "reason": result.reason if result else "not ingested",
            }
        )
    return documents


def _restore(saved: list[tuple[Path, Path | None]]) -> None:
    """Put back the previous version of each file (or remove a new one that failed)."""
    for target, backup in saved:
        if backup is not None and backup.exists():
            backup.replace(target)
        elif backup is None:
            target.unlink(missing_ok=True)


def _discard_backups(saved: list[tuple[Path, Path | None]]) -> None:
    for _, backup in saved:
        if backup is not None:
            backup.unlink(missing_ok=True)


@router.get("")
def list_documents(
    request: Request,
    collection: Annotated[str | None, Query()] = None,
    tenant_id: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """The caller's indexed documents with their chunk counts (sources in public form)."""
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    kb = get_resources().kb()
    name = _collection(collection, DEFAULT_COLLECTION) if collection else None
    records = kb.catalog.documents(tenant, name)
    data_dir = state.settings.data_dir
    shown = {r.source: public_source(r.source, tenant=tenant, data_dir=data_dir) for r in records}
    return {
        "tenant_id": tenant,
        "collections": kb.catalog.collections(tenant),
        "documents": [
            {
                "source": shown[r.source],
                "collection": r.collection,
                "chunks": r.n_chunks,
                "file_hash": r.file_hash,
            }
            for r in sorted(records, key=lambda record: (record.collection, shown[record.source]))
        ],
    }


@router.delete("")
def delete_documents(
    request: Request,
    source: Annotated[
        str | None, Query(description="A document's source as listings show it (or its text:... key).")
    ] = None,
    doc_id: Annotated[str | None, Query(description="A document id (a JSON record's id).")] = None,
    collection: Annotated[
        str | None, Query(description="A collection (alone: the whole collection).")
    ] = None,
    conversation_id: Annotated[str | None, Query(description="Every chunk of a conversation.")] = None,
    tenant_id: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """Delete a document, a collection or a conversation's chunks of the caller's tenant (404: none)."""
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    if not any((source, doc_id, collection, conversation_id)):
        raise ApiError(422, "ValidationError", "give source, doc_id, collection or conversation_id", "source")
    kb = get_resources().kb()
    name = _collection(collection, DEFAULT_COLLECTION) if collection else None
    data_dir = state.settings.data_dir
    stored = [record.source for record in kb.catalog.documents(tenant, name)] if source or doc_id else []
    if source:
        source = _stored_source(source, stored, tenant, data_dir, "source")
    if doc_id:  # a file's doc id is its source, shown in public form like it
        doc_id = _stored_source(doc_id, stored, tenant, data_dir, "doc_id")
    summary = delete_content(
        kb, tenant, source=source, doc_id=doc_id, collection=name, conversation_id=conversation_id
    )
    if not summary.chunks and not summary.documents:
        raise ApiError(404, "NotFound", "nothing matched: no document, collection or conversation deleted")
    invalidate_tenant(tenant)  # its cached answers may be stale
    return public_json({"tenant_id": tenant, **summary.as_dict()}, tenant=tenant, data_dir=data_dir)


def _stored_source(given: str, stored: list[str], tenant: str, data_dir: Path, field: str) -> str:
    """The stored source a public `given` names (else `given`); 409 when it names several documents."""
    found = stored_sources(given, stored, tenant=tenant, data_dir=data_dir)
    if len(found) > 1:
        reason = f"{field}: {given!r} names {len(found)} documents; give the collection too"
        raise ApiError(409, "Ambiguous", reason, field)
    return found[0] if found else given


@router.post("/text")
async def index_text(body: TextDocument, request: Request) -> dict[str, Any]:
    """Index raw text: one unchunked chunk for an event, else chunked like a file."""
    return await _until_client_leaves(request, _index_text, request, body)


def _index_text(request: Request, body: TextDocument, should_stop: Callable[[], bool]) -> dict[str, Any]:
    state = api_state(request)
    tenant = state.tenant(request, body.tenant_id)
    try:  # over a bound of core.metadata: 422 naming the key and the bound, before anything is stored
        validate_document_metadata(body.metadata)
    except MetadataBoundError as error:
        raise ApiError(422, "ValidationError", str(error), error.field) from None
    kb = get_resources().kb()
    name = _collection(body.collection, DEFAULT_COLLECTION)
    try:
        if body.event:
            source = index_event(
                kb,
                body.text,
                tenant=tenant,
                collection=name,
                title=body.title,
                metadata=body.metadata,
                should_stop=should_stop,
            )
            chunks = 1
        else:
            source, chunks = index_raw_text(
                kb,
                body.text,
                tenant=tenant,
                collection=name,
                title=body.title,
                doc_id=body.doc_id,
                metadata=body.metadata,
                should_stop=should_stop,
            )
    except LoaderError as error:
        raise ApiError(422, "IngestError", str(error), "text") from None
    except StopRequested:
        state.client_left("index_text", request, "text: indexing stopped, nothing stored")
        raise ClientDisconnected("the client closed the connection while its text was indexed") from None
    invalidate_tenant(tenant)  # its cached answers may be stale
    reply = {"tenant_id": tenant, "collection": name, "source": source, "chunks": chunks}
    return public_json(reply, tenant=tenant, data_dir=state.settings.data_dir)
