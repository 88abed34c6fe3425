"""`python -m benchmarks <campaign>` from the repository root."""

from benchmarks.commands import app

app()
