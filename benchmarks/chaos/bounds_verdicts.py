"""The bounds suite's attacks and verdicts as pure functions: the hostile inputs it sends (wide and deep
filters, metadata of too many keys, the lower-500 inputs) and how a response is judged, so they are
tested without a server (benchmarks/chaos/bounds.py runs them)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from benchmarks.chaos.api_server import DOCUMENTS
from benchmarks.chaos.corpora import BRAVO_CANARIES, leaked
from benchmarks.chaos.http_client import HttpResult
from benchmarks.chaos.probe import Probe, failed_checks
from benchmarks.chaos.runner import TRACEBACK, ProcessResult

SUITE = "bounds"
#: The retrieval-only route and the batch route the filters go through (beside generate).
SEARCH = "/api/v1/search"
BATCH = "/api/v1/rag/batch"
TEXT = f"{DOCUMENTS}/text"
MEMORIES = "/api/v1/memories"
#: Conditions of the wide `$or` filters: ten, a hundred and a thousand times the engine's bound.
WIDE_FILTER_MEMBERS = (1_000, 10_000, 100_000)
#: The setting that bounds a filter's conditions, and its default: a refusal names one or the other.
FILTER_BOUND_SETTING = "RAG_FILTER_MAX_CONDITIONS"
FILTER_BOUND_DEFAULT = 100
#: The deep and wide filter: `$and` and `$or` alternating this many levels deep, each of this many members
#: (4 ** 6 = 4,096 conditions, no list wider than 4: only a bound on the whole tree refuses it).
DEEP_FILTER_LEVELS = 6
DEEP_FILTER_FAN_OUT = 4
#: The custom metadata key the wide filters compare (one letter: 100,000 conditions stay under the JSON cap).
FILTER_KEY = "n"
#: Bytes Linux accepts in one command-line argument (MAX_ARG_STRLEN, 32 pages): a longer `--filter` cannot
#: reach the CLI at all, so that probe is not applicable rather than failed.
ARGUMENT_MAX_BYTES = 131_072
#: Metadata keys of the raw text that must be refused, and fields of the .jsonl record that must be indexed
#: without the ones over the bound.
TEXT_METADATA_KEYS = 10_000
RECORD_FIELDS = 12_000
#: Words that exist only in the probes' documents (how "stored" and "found" are told).
TEXT_CANARY = "Metakeyquorblin"
RECORD_CANARY = "Fieldwexmorrow"
AFTER_RESTART_CANARY = "Restartplumbeck"
#: What an answer says when it left record fields out (any of them, case-insensitive).
LEFT_OUT_WORDS = ("left out", "left_out", "dropped", "ignored", "skipped", "warning")
#: The lower 500s' inputs: a memory id of 23 digits (past SQLite's 64-bit integers), an integer just past
#: 64 bits, and a file name longer than a file system's 255 bytes.
LONG_MEMORY_ID = "9" * 23
HUGE_INTEGER = 2**64 + 1
LONG_FILE_NAME_CHARS = 304


# --- filters ------------------------------------------------------------------------------------------------


def compact_json(value: Any) -> bytes:
    """JSON without spaces (a 100,000-condition filter must stay under the server's JSON cap)."""
    return json.dumps(value, separators=(",", ":")).encode()


def wide_or(members: int) -> dict[str, Any]:
    """An `$or` of `members` equality conditions on one custom key."""
    return {"$or": [{FILTER_KEY: index % 10} for index in range(members)]}


def deep_filter(levels: int = DEEP_FILTER_LEVELS, fan_out: int = DEEP_FILTER_FAN_OUT) -> dict[str, Any]:
    """`$and` over `$or` over `$and`... `levels` deep, each of `fan_out` members: fan_out ** levels
    conditions in lists no wider than `fan_out`."""
    if levels == 0:
        return {FILTER_KEY: 1}
    operator = "$and" if levels % 2 == 0 else "$or"
    return {operator: [deep_filter(levels - 1, fan_out) for _ in range(fan_out)]}


def hostile_filters() -> dict[str, dict[str, Any]]:
    """The filters over the bound, by the name their probes carry."""
    filters = {f"$or of {members:,} conditions": wide_or(members) for members in WIDE_FILTER_MEMBERS}
    conditions = DEEP_FILTER_FAN_OUT**DEEP_FILTER_LEVELS
    filters[f"deep+wide $and of {conditions:,} conditions ({DEEP_FILTER_LEVELS} levels)"] = deep_filter()
    return filters


def names_filter_bound(text: str) -> bool:
    """Whether a refusal names the filter bound: its setting, or its default with the word 'conditions'."""
    return FILTER_BOUND_SETTING in text or (
        "condition" in text.lower() and re.search(rf"\b{FILTER_BOUND_DEFAULT}\b", text) is not None
    )


def expected_statuses(expected: Collection[int]) -> str:
    """The statuses a verdict wants, as a reader names them ("a 4xx", or the list)."""
    return "a 4xx" if set(range(400, 500)) <= set(expected) else str(sorted(expected))


def exchange_verdict(
    suite: str,
    name: str,
    result: HttpResult,
    expected: Collection[int],
    *,
    alive: bool = True,
    traces_added: int = 0,
    harms: dict[str, bool] | None = None,
    checks: Sequence[tuple[str, bool]] = (),
    note: str = "",
    canaries: Sequence[str] = (),
) -> Probe:
    """One exchange judged: one of the `expected` statuses in time, no stack trace in the answer nor new ones
    in the server's log, the server alive afterwards, no canary of bravo nor of `canaries`; `harms` are
    figures of their own (counted when true; `leaks` adds to the leak count), `checks` more reasons to
    fail."""
    found = leaked(result.text, (*BRAVO_CANARIES, *canaries))
    trace = TRACEBACK in result.text or traces_added > 0
    wrong = not result.hung and result.status not in expected
    harms = harms or {}
    problems = failed_checks(
        (f"leaked {found}", bool(found)),
        (
            "stack trace in the answer"
            if TRACEBACK in result.text
            else f"{traces_added} stack traces logged",
            trace,
        ),
        ("no answer in time", result.hung),
        (
            f"status {result.status}, expected {expected_statuses(expected)}"
            + (f" ({result.error})" if result.error else "")
            + (f": {result.text[:160]}" if result.text else ""),
            wrong,
        ),
        ("the server is dead afterwards (GET /health)", not alive),
        *((harm.replace("_", " "), bad) for harm, bad in harms.items()),
        *checks,
    )
    figures = {
        "traces": float(max(traces_added, int(TRACEBACK in result.text))),
        "hangs": float(result.hung),
        "wrong_statuses": float(wrong),
        "crashes": float(not alive),
        **{harm: float(bad) for harm, bad in harms.items()},
        "leaks": float(bool(found) or harms.get("leaks", False)),
    }
    detail = "; ".join(dict.fromkeys(problems))
    return Probe(suite, name, not problems, "; ".join(part for part in (detail, note) if part), figures)


def filter_refusal_verdict(name: str, result: HttpResult, *, alive: bool, traces_added: int = 0) -> Probe:
    """A filter over the bound: 422 naming the bound, the server alive. Anything else than a refusal (an
    answer, a 500, no answer) let the filter through to the stores."""
    refused = result.status == 422
    return exchange_verdict(
        SUITE,
        name,
        result,
        {422},
        alive=alive,
        traces_added=traces_added,
        harms={"oversize_accepted": result.ok},
        checks=[
            (f"the 422 does not name {FILTER_BOUND_SETTING}", refused and not names_filter_bound(result.text))
        ],
    )


def batch_item(result: HttpResult) -> HttpResult:
    """The batch's one item as an exchange of its own: its status and body (the whole answer when the batch
    was refused as a whole, or has no items)."""
    body = result.json()
    items = body.get("results") if isinstance(body, dict) and result.ok else None
    if not items or not isinstance(items[0], dict):
        return result
    item = items[0]
    status = item.get("status") if isinstance(item.get("status"), int) else (200 if item.get("ok") else None)
    return HttpResult(status, result.headers, json.dumps(item).encode(), result.seconds, result.sent)


def cli_refusal_verdict(name: str, result: ProcessResult) -> Probe:
    """`rag search --filter` over the bound: an exit code other than 0, one line naming the bound, no stack
    trace, in time."""
    wrong_exit = not result.hung and result.returncode == 0
    killed = result.returncode is not None and result.returncode < 0
    multiline = result.lines != 1
    problems = failed_checks(
        ("stack trace", result.traceback),
        ("no answer in time", result.hung),
        (f"the CLI was killed by signal {-(result.returncode or 0)}", killed),
        (f"exit code {result.returncode}: the filter was accepted", wrong_exit),
        (f"{result.lines} lines of output, expected one", not result.hung and multiline),
        (
            f"the error does not name {FILTER_BOUND_SETTING}",
            not result.hung and not wrong_exit and not names_filter_bound(result.output),
        ),
    )
    return Probe(
        SUITE,
        name,
        not problems,
        "; ".join(problems) + (f": {result.output.strip()[-200:]}" if problems else ""),
        {
            "traces": float(result.traceback),
            "hangs": float(result.hung),
            "wrong_exit_codes": float(wrong_exit),
            "multiline_errors": float(not result.hung and multiline),
            "oversize_accepted": float(wrong_exit),
            "crashes": float(killed),
        },
    )


def not_applicable(suite: str, name: str, reason: str) -> Probe:
    """A probe that cannot be run here (counted apart, neither a pass of the product nor a failure)."""
    return Probe(suite, name, True, f"not applicable: {reason}", {"not_applicable": 1.0})


# --- metadata -----------------------------------------------------------------------------------------------


def text_with_keys(keys: int = TEXT_METADATA_KEYS) -> dict[str, Any]:
    """POST /documents/text's body: a note with `keys` custom metadata keys."""
    return {
        "text": f"The {TEXT_CANARY} note carries far too many metadata keys.",
        "metadata": {f"k{index}": 1 for index in range(keys)},
    }


def record_with_fields(fields: int = RECORD_FIELDS) -> bytes:
    """A .jsonl file of one record with text and `fields` scalar fields of its own."""
    record: dict[str, Any] = {"id": "wide-record", "text": f"The {RECORD_CANARY} record has many fields."}
    record.update({f"f{index}": index for index in range(fields)})
    return compact_json(record) + b"\n"


def search_hits(result: HttpResult) -> list[dict[str, Any]]:
    """The hits of a /api/v1/search answer (none when it is not one)."""
    body = result.json()
    hits = body.get("results") if isinstance(body, dict) else None
    return [hit for hit in hits or [] if isinstance(hit, dict)]


def hits_with(result: HttpResult, word: str) -> list[dict[str, Any]]:
    """The hits of a search answer whose text holds `word`."""
    return [hit for hit in search_hits(result) if word.lower() in str(hit.get("content", "")).lower()]


def stored_keys_verdict(result: HttpResult, stored: bool, *, alive: bool, traces_added: int) -> Probe:
    """Raw text over the metadata-key bound: 422, and nothing of it searchable afterwards."""
    return exchange_verdict(
        SUITE,
        f"text with {TEXT_METADATA_KEYS:,} metadata keys: 422, nothing stored",
        result,
        {422},
        alive=alive,
        traces_added=traces_added,
        harms={"oversize_accepted": result.ok or stored},
        checks=[("the text is searchable afterwards", stored)],
    )


def wide_record_verdict(result: HttpResult, hit_keys: int | None, *, alive: bool, traces_added: int) -> Probe:
    """A record with RECORD_FIELDS fields: indexed (200, one document indexed), its answer says fields were
    left out, and the stored chunk holds fewer keys than the record had (`hit_keys`: None = not found)."""
    body = result.json()
    indexed = body.get("indexed") if isinstance(body, dict) else None
    warned = any(word in result.text.lower() for word in LEFT_OUT_WORDS)
    return exchange_verdict(
        SUITE,
        f".jsonl record with {RECORD_FIELDS:,} fields: indexed without the extra fields",
        result,
        {200},
        alive=alive,
        traces_added=traces_added,
        harms={"oversize_accepted": hit_keys is not None and hit_keys >= RECORD_FIELDS},
        checks=[
            (f"indexed {indexed}, expected 1", result.ok and indexed != 1),
            ("the answer does not say fields were left out", result.ok and not warned),
            ("the record is not searchable", result.ok and hit_keys is None),
        ],
        note=f"the stored chunk has {hit_keys} metadata keys" if hit_keys is not None else "",
    )


def restart_verdict(
    bravo_search: HttpResult, alpha_search: HttpResult, alpha_upload: HttpResult, *, started: bool
) -> Probe:
    """After a restart over the same data: bravo's wide record still found, alpha's search answered with its
    documents, and an upload for alpha indexed."""
    body = alpha_upload.json()
    indexed = body.get("indexed") if isinstance(body, dict) else None
    bravo_found = bool(hits_with(bravo_search, RECORD_CANARY))
    problems = failed_checks(
        ("the server did not start again", not started),
        (f"bravo's search: status {bravo_search.status} {bravo_search.text[:120]}", not bravo_search.ok),
        ("bravo's wide record is not found", bravo_search.ok and not bravo_found),
        (f"alpha's search: status {alpha_search.status} {alpha_search.text[:120]}", not alpha_search.ok),
        ("alpha's search finds nothing", alpha_search.ok and not search_hits(alpha_search)),
        (f"alpha's upload: status {alpha_upload.status} {alpha_upload.text[:120]}", not alpha_upload.ok),
        (f"alpha's upload indexed {indexed}, expected 1", alpha_upload.ok and indexed != 1),
    )
    traces = sum(TRACEBACK in item.text for item in (bravo_search, alpha_search, alpha_upload))
    return Probe(
        SUITE,
        "after a restart: bravo's record found, both tenants search and ingest",
        not problems,
        "; ".join(problems),
        {
            "lost": float(started and bravo_search.ok and not bravo_found),
            "crashes": float(not started),
            "traces": float(traces),
            "wrong_statuses": float(sum(not item.ok for item in (bravo_search, alpha_search, alpha_upload))),
        },
    )
