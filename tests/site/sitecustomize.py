"""Test-only start-up hook: every Python process the tests start (a `rag serve` worker, `langgraph dev`, a
script in a fresh interpreter) judges answers with a calibrator that shows them as written, the one
tests/conftest.py installs in the test process, so a test's scripted answers do not depend on the committed
artifacts (answering/calibrators/*.json, refit whenever the readers change). tests/conftest.py puts this
folder on PYTHONPATH for the processes the tests start; the product never sees it."""

from __future__ import annotations

import math

try:
    from answering.calibrator import Calibrator, Thresholds, use_calibrator
except ImportError:  # a process that does not run the engine
    pass
else:
    #: The same figures as tests/helpers/calibrators.ALWAYS_CONFIDENT: every answer confident at 0.9.
    _PROBABILITY = 0.9
    # Kept for the life of the process: a collected generator would run its `finally` and uninstall it.
    _INSTALLED = use_calibrator(
        Calibrator(
            name="test-subprocess-confident",
            models=(),
            features=(),
            mean=(),
            scale=(),
            coef=(),
            intercept=math.log(_PROBABILITY / (1.0 - _PROBABILITY)),
            isotonic_x=(),
            isotonic_y=(),
            thresholds=Thresholds(confident=0.7, floor=0.3),
            fit={},
        )
    )
    _INSTALLED.__enter__()
