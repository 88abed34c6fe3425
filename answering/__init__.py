"""Answering: what the user sees and how sure the engine is of it (signals -> calibrator -> decision); nodes
call `answering.judge.judge_answer` and stay thin."""
