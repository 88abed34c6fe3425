"""The seeds suite's routes and verdicts: what one exchange with the seed contract's routes, the memory routes
or the summary route must look like (benchmarks/chaos/seeds.py and its probe modules judge by them). Pure over
the client's view of an exchange, so the unit tests pin them without a server."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from benchmarks.chaos.api_server import ApiServer
from benchmarks.chaos.bounds_verdicts import exchange_verdict
from benchmarks.chaos.corpora import leaked
from benchmarks.chaos.http_client import HttpResult, http_request
from benchmarks.chaos.probe import Probe, failed_checks
from benchmarks.chaos.runner import TRACEBACK

SUITE = "seeds"
#: The seed contract's routes (docs/api-seed.md) and the memory and summary routes.
QUERY = "/api/v1/rag/query"
QUERY_STREAM = "/api/v1/rag/query-stream"
GENERATE_STREAM = "/api/v1/rag/generate/stream"
BATCH = "/api/v1/rag/batch"
MEMORIES = "/api/v1/memories"
SUMMARIZE = "/api/v1/conversations/{thread}/summarize"
#: The setting a 413 of a JSON body names.
JSON_CAP_SETTING = "RAG_API_MAX_JSON_BYTES"
#: Questions in the oversized batch: one over the contract's 50.
OVERSIZED_BATCH = 51
#: A word only the oversized bodies hold: found in a memory afterwards, an oversized body was stored.
CAP_CANARY = "Capwhistlevorn"
#: A memory id no memory has (the right shape: 16 hex digits).
UNKNOWN_MEMORY_ID = "0123456789abcdef"
#: An `answer` field of a JSON body or event, and how much of it a probe's note shows.
ANSWER_FIELD = re.compile(r'"answer":\s*"((?:[^"\\]|\\.)*)"')
ANSWER_GIST_CHARS = 120
#: A question the seed routes accept (alpha's documents answer it).
PLANET_QUESTION = "Which planet is the largest?"


# --- verdicts -----------------------------------------------------------------------------------------------


def seeds_verdict(
    name: str,
    result: HttpResult,
    expected: set[int],
    *,
    canaries: Sequence[str] = (),
    harms: dict[str, bool] | None = None,
    checks: Sequence[tuple[str, bool]] = (),
    note: str = "",
) -> Probe:
    """One exchange judged (bounds_verdicts.exchange_verdict): one of the `expected` statuses in time, no
    stack trace in the answer, none of bravo's document canaries nor of `canaries` (another tenant's or
    conversation's words and ids) in any byte of it (a stream's events included); `harms` are figures of
    their own (`leaks` adds to the leak count), `checks` more reasons to fail."""
    return exchange_verdict(
        SUITE, name, result, expected, harms=harms, checks=checks, note=note, canaries=canaries
    )


def answer_excerpt(result: HttpResult) -> str:
    """The start of the answer an exchange carried (a body's, a batch item's or a stream's final event's
    `answer`), for the report: a reader sees what the attacker was told."""
    found = ANSWER_FIELD.findall(result.text)
    if not found:
        return ""
    try:
        answer = str(json.loads(f'"{found[-1]}"'))
    except ValueError:
        answer = found[-1]
    return f"answered {answer[:ANSWER_GIST_CHARS]!r}"


def error_field(result: HttpResult) -> str:
    """The field an error answer names: its `field`, else the start of its `message` before a colon."""
    body = result.json()
    if not isinstance(body, dict):
        return ""
    if isinstance(body.get("field"), str) and body["field"]:
        return str(body["field"])
    message = str(body.get("message") or "")
    head, colon, _rest = message.partition(":")
    return head.strip() if colon and " " not in head.strip() else ""


def names_field(result: HttpResult, field: str) -> bool:
    """Whether an error answer names `field`: as its field (or a dotted path ending in it), or in its
    message."""
    named = error_field(result)
    body = result.json()
    message = str(body.get("message") or "") if isinstance(body, dict) else ""
    return named == field or named.split(".")[-1] == field or named.split(".")[0] == field or field in message


def validation_verdict(name: str, result: HttpResult, field: str | None) -> Probe:
    """Bad input: 422 naming `field` (None: any 422, as for JSON that does not parse), never a 500."""
    refused = result.status == 422
    return seeds_verdict(
        name,
        result,
        {422},
        harms={"crashes": result.status is not None and result.status >= 500},
        checks=[
            (
                f"the 422 does not name {field!r} (it names {error_field(result)!r})",
                refused and field is not None and not names_field(result, field),
            )
        ],
    )


def auth_verdict(name: str, result: HttpResult) -> Probe:
    """A request without a valid key: 401; anything answered 2xx was served to nobody in particular."""
    return seeds_verdict(name, result, {401}, harms={"unauthenticated_reads": result.ok})


def cap_refusal_verdict(name: str, result: HttpResult, size: int) -> Probe:
    """A body of `size` bytes over the JSON cap: 413 naming the setting. Any other answer, or a server still
    busy with the whole body it took, accepted it."""
    swallowed = result.hung and result.sent >= size
    return seeds_verdict(
        name,
        result,
        {413},
        harms={"oversize_accepted": (result.status is not None and result.status != 413) or swallowed},
        checks=[
            (
                f"the 413 does not name {JSON_CAP_SETTING}",
                result.status == 413 and JSON_CAP_SETTING not in result.text,
            )
        ],
        note=f"{result.sent / 1e6:.1f} of {size / 1e6:.1f} MB sent",
    )


def nothing_stored_verdict(name: str, messages: list[list[str]], memories: HttpResult) -> Probe:
    """After the oversized bodies: none of their threads holds a message, and no memory holds their canary
    (`memories`: the tenant's memory list, which must have answered)."""
    stored = leaked(memories.text, (CAP_CANARY,))
    problems = failed_checks(
        (f"{len(messages)} messages stored on an oversized body's conversation", messages),
        (f"the memory list did not answer: status {memories.status}", not memories.ok),
        ("an oversized memory was stored", stored),
    )
    return Probe(
        SUITE,
        name,
        not problems,
        "; ".join(problems),
        {"oversize_accepted": float(bool(messages) or bool(stored))},
    )


def log_verdict(log: str) -> Probe:
    """The server's log at the end holds no stack trace."""
    traces = log.count(TRACEBACK)
    first = ""
    if traces:
        lines = log[log.find(TRACEBACK) :].splitlines()[1:]
        first = next((line[:200] for line in lines if line and not line.startswith(" ")), "")
    return Probe(
        SUITE,
        "server log holds no stack trace",
        traces == 0,
        f"{traces} stack traces, the first ending {first!r}" if traces else "",
        {"traces": float(traces)},
    )


def alive(server: ApiServer) -> bool:
    """Whether the server still runs and answers GET /health with 200."""
    return server.process.poll() is None and http_request(server.port, "GET", "/health", timeout=10).ok
