#!/usr/bin/env bash
# The development run behind nodes/turn.py AUTO_MODE: the agentic graph with RAG_MODE=auto (then: the
# short-answer template for factoid query types) against RAG_MODE=advanced, the first LIMIT development
# questions of SQuAD 2.0 (mixed), HotpotQA and CMRC 2018, each dataset's paragraphs pooled, embedded
# Qwen2.5-Coder-0.5B, answer cache off. Records: results/runs/dev-agentic-template-<mode>-<dataset>.jsonl;
# table: python -m benchmarks.answer_table results/runs/dev-agentic-template-*.jsonl
# Since AUTO_MODE is "advanced" for every type, rerunning the auto arm now measures the advanced template.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT="${LIMIT:-40}"
source benchmarks/lib.sh  # DATASETS
export RAG_CACHE_ENABLED=false RAG_LOCAL_MODEL=qwen2.5-coder-0.5b
for name in hotpotqa squad cmrc2018; do
  for mode in auto advanced; do
    echo "== $(date -u +%H:%M:%S) $name $mode"
    RAG_MODE=$mode .venv/bin/rag eval qa --dataset "${DATASETS[$name]}" --pipeline agentic --split dev \
      --limit "$LIMIT" --pool all --results "results/runs/dev-agentic-template-$mode-$name.jsonl"
  done
done
