"""The chaos benchmark's limits and targets: how long a probe may take before it counts as a hang, how big the
attacks are, and the figures a run must stay under. Named here, in one place, so a slower machine or a new
target changes one line, and so the tests can read the same targets the benchmark judges by."""

from __future__ import annotations

#: Seconds a single probe may run before it counts as a hang (real model turns take ~10 s on 2 cores).
PROBE_TIMEOUT_S = 120.0
#: Seconds the concurrent-turns suite may take for all of its turns together.
CONCURRENT_TIMEOUT_S = 900.0
#: Concurrent turns on one thread, as processes and as threads of one process.
CONCURRENT_TURNS = 8
#: Turns of the short storage figure (the one BYTES_PER_TURN_TARGET bounds), read during the long
#: conversation.
STORAGE_TURNS = 10
#: Turns of the long conversation the storage suite holds on one thread, in one process.
LONG_CONVERSATION_TURNS = 100
#: Seconds the long conversation may take (about 100 real-model turns, repeated questions from the cache).
LONG_CONVERSATION_TIMEOUT_S = 3600.0
#: Turns after which the long conversation reads the thread's bytes: the figures after turns 10 and 100, and
#: what turns 20 and 100 each added (the turn before is read too).
STORAGE_SNAPSHOTS = (STORAGE_TURNS, 19, 20, LONG_CONVERSATION_TURNS - 1, LONG_CONVERSATION_TURNS)
#: Flat storage: turn 100 may add at most this many times what turn 20 added (keeping every checkpoint, where
#: each holds the whole conversation, turn 100 adds about five times as much).
FLAT_GROWTH_RATIO = 1.5
#: Target for checkpoint storage per turn over the short figure's turns, in bytes.
BYTES_PER_TURN_TARGET = 50_000
#: Target for a long conversation: checkpoint bytes per turn at turn 100 (they must not grow with turns).
BYTES_PER_TURN_AT_100_TARGET = 20_000
#: A child process using more resident memory than this (ingesting a zip bomb) counts as a memory blow-up.
MEMORY_LIMIT_BYTES = 2 * 1024**3
#: Small model budgets keep every real-model turn short; they change no code path.
FAST_TURN_ENV = {"RAG_MAX_ITERATIONS": "1", "RAG_GENERATION_RESERVE": "48"}

# --- the REST API suite ---
#: Body caps the server runs with (RAG_API_MAX_JSON_BYTES / RAG_API_MAX_UPLOAD_BYTES): small, so the probes
#: send a few MB rather than the defaults' 10 MB / 100 MB; what is probed is that a cap is enforced unread.
JSON_CAP_BYTES = 1_000_000
UPLOAD_CAP_BYTES = 4_000_000
#: Body sent without a key: a server that reads it before refusing takes all of it.
UNAUTHENTICATED_BODY_BYTES = 20_000_000
#: Seconds a client waits after its headers for an answer before it sends the body: a server that decides
#: from the headers (no key, Content-Length over the cap) answers well within this.
HEADER_ANSWER_WAIT_S = 3.0
#: Seconds the server may take to start (it loads the models and measures their speed before it listens).
SERVER_START_TIMEOUT_S = 300.0
#: Seconds the server has to stop after SIGTERM before it is killed.
SERVER_STOP_TIMEOUT_S = 30.0
#: Seconds one answered request may take (real-model turns queue for the single embedded model).
API_TURN_TIMEOUT_S = 300.0
#: Seconds a refusal may take (no model involved).
REFUSAL_TIMEOUT_S = 60.0
#: Bytes written to the socket at a time.
SEND_BLOCK = 1 << 16
