"""`python -m benchmarks chaos`: attack the engine the way a hostile tenant or a careless operator would, and
count harm.

Why a benchmark and not only tests: the tests pin each fix; this command measures the whole product as shipped
(the real CLI and REST API in subprocesses, the real embedding model and the embedded LLM, a fresh data
folder) and prints figures that can be compared across versions: tenant leaks, lost / duplicated / mixed
turns, injections obeyed, answers suppressed by planted text, stack traces, hangs, wrong exit codes and HTTP
statuses, oversize bodies accepted, unauthenticated reads, checkpoint bytes per turn (after 10 and after 100
turns) and the peak memory of the hostile inputs. Every figure's target is 0 except bytes per turn (<=
`BYTES_PER_TURN_TARGET`, and `BYTES_PER_TURN_AT_100_TARGET` at turn 100).

The modules, one concern each:
- `run`: the suites by name and `run_chaos`, the run; `report`: the report's figures.
- `runner`: the child processes every probe runs in; `probe`: a probe's verdict; `limits`: every limit and
  target; `corpora`: the tenants, their documents and canaries; `threads`: reading a tenant's stored thread.
- The suites: `tenants`, `turns`, `injection`, `hostile` (with `damaged_catalog`), `ingest_race`, `storage`,
  and `api_suite` over `http_client` (raw sockets), `api_server` (`rag serve` in a child), `api_probes` (keys,
  caps, tenants) and `api_disconnect`; `bounds` (wide filters, too many metadata keys, inputs that overflowed
  into 500s, a restart over the same data) and `sharing` (what tenants and keyless callers learn through
  shared caches, counters, health, paths and the embedded model server) over the same server, each with its
  attacks' pure verdicts beside it (`bounds_verdicts`, `sharing_verdicts`); `seeds` (the seed contract's
  routes, memories and summaries under attack: `seeds_memory`, `seeds_streams`, `seeds_verdicts`); `fairness`
  (one tenant flooding while another asks: the fairness benchmark of the checkout under attack, in a child
  process).

This package re-exports what the CLI and the tenant and storage tests use; the rest is imported from its
module.
"""

from __future__ import annotations

from benchmarks.chaos.corpora import ALPHA, ALPHA_DOCS, BRAVO, BRAVO_CANARIES, BRAVO_DOCS, leaked
from benchmarks.chaos.limits import BYTES_PER_TURN_AT_100_TARGET, BYTES_PER_TURN_TARGET
from benchmarks.chaos.run import SUITES, run_chaos
from benchmarks.chaos.runner import REPO_ROOT

__all__ = [
    "ALPHA",
    "ALPHA_DOCS",
    "BRAVO",
    "BRAVO_CANARIES",
    "BRAVO_DOCS",
    "BYTES_PER_TURN_AT_100_TARGET",
    "BYTES_PER_TURN_TARGET",
    "REPO_ROOT",
    "SUITES",
    "leaked",
    "run_chaos",
]
