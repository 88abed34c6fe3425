#!/usr/bin/env bash
# Issue 19's answer-quality runs with evidence compression (the default RAG_EVIDENCE_TOKEN_BUDGET) and the
# confidence decline disabled, so `rag eval calibrate` can replay any threshold on the records:
#   SQuAD 2.0 mixed (answerable + unanswerable): the development half chooses the threshold, the test half
#   is reported; HotpotQA and CMRC 2018: the first N questions of each file (the questions the earlier
#   whole-chunk runs answered, so before/after compare question by question), naive and agentic.
# Resumable like scripts/qa_campaign.sh (per-question records under results/runs/).
#   LIMIT=60 bash scripts/answer_campaign.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${DATA:-../shared/data}"
SQUAD="data/squad/squad2_dev_mixed400.json.gz"
HOTPOTQA="$DATA/hotpotqa/hotpot_dev_distractor_sample500_amor.jsonl.gz"
CMRC="$DATA/cmrc2018/cmrc2018_dev.json.gz"
LIMIT="${LIMIT:-60}"
TAG="${TAG:-compressed}"
STEPS="${STEPS:-squad-dev-naive squad-test-naive squad-test-agentic hotpotqa-naive hotpotqa-agentic cmrc2018-naive cmrc2018-agentic}"
export RAG_CACHE_ENABLED=false
export RAG_ANSWER_CONFIDENCE_THRESHOLD=-1000

for step in $STEPS; do
  IFS=- read -r name split pipeline <<<"$step"
  if [ -z "$pipeline" ]; then pipeline="$split"; split=all; fi
  case "$name" in squad) dataset="$SQUAD" ;; hotpotqa) dataset="$HOTPOTQA" ;; cmrc2018) dataset="$CMRC" ;; esac
  out="$TAG-$name-$split-$pipeline"
  echo "== $(date -u +%H:%M:%S) $out --limit $LIMIT"
  .venv/bin/rag eval qa --dataset "$dataset" --pipeline "$pipeline" --split "$split" --limit "$LIMIT" \
    --pool all --results "results/runs/$out.jsonl" --json "results/qa_$out.json"
done
