#!/usr/bin/env bash
# The server set-up's half of the side-by-side benchmarks: the same `rag eval retrieval`
# (BEIR SciFact) and `rag eval load` that benchmarks/run_benchmarks.sh runs on the embedded set-up, with every
# store shared through a throwaway PostgreSQL (RAG_DATABASE_URL: catalog, keyword index, checkpoints, tables)
# and a Chroma server (RAG_CHROMA_HOST/PORT), both started by scripts/servers.sh and stopped at the end.
#
#   bash benchmarks/bench_servers.sh                 # both; ONLY=retrieval or ONLY=load for one
#
# RAG_LOCAL_MODEL=qwen2.5-coder-0.5b OUT=results/load_servers_qwen.json (and SETUP=embedded
# OUT=results/load_embedded_rerun_qwen.json) measure today's default model the same way.
# Writes results/retrieval_scifact_servers.json and results/load_servers.json (beside retrieval_scifact.json
# and load.json); SETUP=embedded runs the same on the embedded stores (*_embedded_rerun.json), for a side by
# side taken on the same machine state. `rag eval load` takes one URL, so the load runs against one `rag serve` worker; its data
# folder is empty: the corpus is ingested by another process into the shared stores first.
# The SciFact ingest embeds 12k chunks again (the embedding cache lives in the fresh database): ~10 min.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${DATA_DIR:-../shared/data}"
RESULTS=results
RAG=.venv/bin/rag
source benchmarks/lib.sh  # start_rag_serve
ONLY="${ONLY:-retrieval load}"
WORK=$(mktemp -d /tmp/rag-bench-servers.XXXXXX)
SERVER=""
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  bash scripts/servers.sh stop "$WORK/servers"
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ "${SETUP:-servers}" != embedded ]; then  # the embedded set-up needs no servers
  eval "$(bash scripts/servers.sh start "$WORK/servers")"
  export RAG_DATABASE_URL="$RAG_TEST_DATABASE_URL"
  export RAG_CHROMA_HOST="$RAG_TEST_CHROMA_HOST" RAG_CHROMA_PORT="$RAG_TEST_CHROMA_PORT"
else
  unset RAG_DATABASE_URL RAG_CHROMA_HOST RAG_CHROMA_PORT
fi

if [[ " $ONLY " == *" retrieval "* ]]; then
  # SETUP=embedded: the same run on the embedded stores, back to back, into retrieval_scifact_embedded_rerun.json.
  RETRIEVAL_OUT="$RESULTS/retrieval_scifact_servers.json"
  if [ "${SETUP:-servers}" = embedded ]; then RETRIEVAL_OUT="$RESULTS/retrieval_scifact_embedded_rerun.json"; fi
  RAG_DATA_DIR="$WORK/eval" $RAG eval retrieval --dataset "$DATA/beir-scifact" --json "$RETRIEVAL_OUT"
fi

if [[ " $ONLY " == *" load "* ]]; then
  # Same corpus, clients, sizes and embedded model (SmolLM2-135M, the default when load.json was measured) as
  # load.json (benchmarks/run_benchmarks.sh, which runs this block with SETUP=embedded OUT=results/load.json), so
  # the set-ups compare; RAG_LOCAL_MODEL=qwen2.5-coder-0.5b measures today's default (results/load_qwen.json).
  # SETUP=embedded runs the load on the embedded set-up (no servers) into load_embedded_rerun.json unless OUT
  # names a file.
  export RAG_LOCAL_MODEL="${RAG_LOCAL_MODEL:-smollm2-135m}"
  OUT="${OUT:-$RESULTS/load_servers.json}"
  if [ "${SETUP:-servers}" = embedded ]; then
    OUT="${OUT/load_servers.json/load_embedded_rerun.json}"
  fi
  INGEST_DIR="$WORK/ingest"
  if [ "${SETUP:-servers}" = embedded ]; then INGEST_DIR="$WORK/worker"; fi  # embedded: the worker's folder
  RAG_DATA_DIR="$INGEST_DIR" $RAG ingest samples/corpus
  start_rag_serve "$WORK/worker" "$WORK/serve.log"  # sets PORT and SERVER
  $RAG eval load --url "http://127.0.0.1:$PORT" --clients 16 --requests 32 --uncached-requests 16 \
    --max-tokens 96 --json "$OUT"
fi
