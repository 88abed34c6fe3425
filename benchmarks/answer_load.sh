#!/usr/bin/env bash
# The README's sample questions through the REST API at 1 and 4 clients, every route (generate =
# JSON, stream = SSE read to its done event, batch = one question per batch request), the embedded default
# model, automatic API time limits. One fresh `rag serve` over a fresh copy of samples/corpus per route, so a
# route's cold phase finds nothing the previous route cached; 1 client then 4 on the same server (the
# 4-client run's uncached phase is the figure to read).
#
#   bash benchmarks/answer_load.sh          # ROUTES="stream" for one route
#
# Writes results/load_answer_clients{1,4}.json (generate) and results/load_answer_{stream,batch}_clients{1,4}.json.
set -euo pipefail
cd "$(dirname "$0")/.."
RAG=.venv/bin/rag
source benchmarks/lib.sh  # start_rag_serve
WORK=$(mktemp -d /tmp/rag-answer-load.XXXXXX)
SERVER=""
stop_server() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  SERVER=""
}
trap 'stop_server; rm -rf "$WORK"' EXIT
unset RAG_DATABASE_URL RAG_CHROMA_HOST RAG_CHROMA_PORT RAG_LLM_PROVIDER RAG_LLM_BASE_URL
for route in ${ROUTES:-generate stream batch}; do
  data="$WORK/$route"
  mkdir -p "$data"
  RAG_DATA_DIR="$data" $RAG ingest samples/corpus
  start_rag_serve "$data" "$WORK/serve-$route.log"  # sets PORT and SERVER
  for clients in 1 4; do
    name="load_answer_${route}_clients$clients.json"
    if [ "$route" = generate ]; then name="load_answer_clients$clients.json"; fi
    echo "== $(date -u +%H:%M:%S) $route, $clients client(s)"
    $RAG eval load --url "http://127.0.0.1:$PORT" --route "$route" --clients "$clients" \
      --requests $((4 * clients)) --questions 4 --uncached-requests "$clients" --json "results/$name"
  done
  stop_server
done
