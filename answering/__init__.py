"""Answering: what the user sees and how sure the engine is of it.

One owner for the answer's judgement: the typed answer record (answering.record), the signals read from a
draft (answering.signals), the calibrated probability that its short answer is right (answering.calibrator)
and the decision that turns it into one of three outcomes, confident / tentative / not found
(answering.decision). Nodes call `answering.judge.judge_answer` and stay thin; no decision travels as text.
"""
