#!/usr/bin/env bash
# The large `rag eval qa` run of the README (>= 300 HotpotQA and >= 100 CMRC 2018 questions, naive / agentic /
# no-retrieval, the default embedded model), in stages that any later call resumes.
#
# Why stages: on 2 cores the whole run takes many hours. Each stage raises --limit for every pipeline in turn
# (HotpotQA then CMRC), so whenever the run stops the three pipelines have answered the same questions and
# their numbers compare. The corpus is fixed from the start (--pool all: every question's paragraphs of the
# file), so a stage only answers new questions; finished questions are read back from results/runs/.
# The answer cache is off: each question is answered on its own, never from a similar earlier question.
#
#   bash benchmarks/qa_campaign.sh            # all stages (resumes; stops after the last one)
#   STAGES="25 50" bash benchmarks/qa_campaign.sh
#   DATASETS=cmrc2018 STAGES=100 bash benchmarks/qa_campaign.sh   # one dataset only
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${DATA:-../shared/data}"
HOTPOTQA="$DATA/hotpotqa/hotpot_dev_distractor_sample500_amor.jsonl.gz"
CMRC="$DATA/cmrc2018/cmrc2018_dev.json.gz"
STAGES="${STAGES:-25 50 100 150 200 250 300}"
CMRC_MAX="${CMRC_MAX:-100}"
DATASETS="${DATASETS:-hotpotqa cmrc2018}"
export RAG_CACHE_ENABLED=false

run() {  # run NAME DATASET LIMIT
  local name="$1" dataset="$2" limit="$3" pipeline
  for pipeline in naive agentic no-retrieval; do
    echo "== $(date -u +%H:%M:%S) $name $pipeline --limit $limit"
    .venv/bin/rag eval qa --dataset "$dataset" --pipeline "$pipeline" --limit "$limit" --pool all \
      --results "results/runs/pooled-$name-$pipeline.jsonl" --json "results/qa_pooled_${name}_$pipeline.json"
  done
}

wants() { [[ " $DATASETS " == *" $1 "* ]]; }

for stage in $STAGES; do
  if wants hotpotqa; then
    run hotpotqa "$HOTPOTQA" "$stage"
  fi
  if wants cmrc2018 && [ "$stage" -le "$CMRC_MAX" ]; then
    run cmrc2018 "$CMRC" "$stage"
  fi
done
