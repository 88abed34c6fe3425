#!/usr/bin/env bash
# The development run for the term checks' name matching (retrieval.grounding loose_form and
# titled_text, retrieval.answerability name_in and compared numbers): the agentic graph on the same first
# LIMIT development questions as benchmarks/template_choice.sh's advanced arm (SQuAD 2.0 mixed, HotpotQA,
# CMRC 2018; each dataset's paragraphs pooled; embedded Qwen2.5-Coder-0.5B; answer cache off), so the
# records compare question by question with results/runs/dev-agentic-template-advanced-<dataset>.jsonl.
# ARM names the records (default term-checks; ARM=explanation-short after nodes.extractive.explanation_short).
# Records: results/runs/dev-<ARM>-<dataset>.jsonl; table:
# python -m benchmarks.answer_table results/runs/dev-agentic-template-advanced-*.jsonl results/runs/dev-term-checks-*.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT="${LIMIT:-40}"
source benchmarks/lib.sh  # DATASETS
export RAG_CACHE_ENABLED=false RAG_LOCAL_MODEL=qwen2.5-coder-0.5b RAG_MODE=advanced
for name in ${DATASET_NAMES:-hotpotqa squad cmrc2018}; do
  echo "== $(date -u +%H:%M:%S) $name"
  .venv/bin/rag eval qa --dataset "${DATASETS[$name]}" --pipeline agentic --split dev \
    --limit "$LIMIT" --pool all --results "results/runs/dev-${ARM:-term-checks}-$name.jsonl"
done
