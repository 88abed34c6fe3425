# Shell helpers the benchmark scripts source (run from the project root):
#   DATASETS       the development QA files by short name (squad, cmrc2018, hotpotqa); DATA = ../shared/data
#   start_rag_serve DATA_DIR LOG   start `rag serve` on a free loopback port over DATA_DIR, wait for /health;
#                  sets PORT and SERVER (its pid); exits with the log's tail when the server dies first.
#   serve_model_endpoint MODEL PORT LOG   serve the embedded MODEL with `rag model serve` (llama.cpp's
#                  OpenAI-compatible server) on loopback PORT as the reader's endpoint: killed on exit,
#                  waited for (/v1/models, 120 s), then RAG_LLM_PROVIDER/BASE_URL/MODEL exported to it.
DATA="${DATA:-../shared/data}"
declare -gA DATASETS=(
  [squad]="data/squad/squad2_dev_mixed400.json.gz"
  [cmrc2018]="$DATA/cmrc2018/cmrc2018_dev.json.gz"
  [hotpotqa]="$DATA/hotpotqa/hotpot_dev_distractor_sample500_amor.jsonl.gz"
)

start_rag_serve() {
  local data_dir="$1" log="$2"
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  RAG_DATA_DIR="$data_dir" .venv/bin/rag serve --port "$PORT" >"$log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0
    kill -0 "$SERVER" 2>/dev/null || { tail -n 30 "$log"; exit 1; }
    sleep 1
  done
  echo "rag serve did not answer /health within 300 s (log: $log)" >&2
  exit 1
}

serve_model_endpoint() {
  local model="$1" port="$2" log="$3"
  "${PYTHON:-.venv/bin/python}" -m service.cli model serve --model "$model" --port "$port" >"$log" 2>&1 &
  MODEL_SERVER=$!
  trap 'kill "$MODEL_SERVER" 2>/dev/null || true' EXIT
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break
    sleep 1
  done
  export RAG_LLM_PROVIDER=openai RAG_LLM_BASE_URL="http://127.0.0.1:$port/v1" RAG_LLM_MODEL="$model"
}
