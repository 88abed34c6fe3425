"""`python -m service.cli ...` runs the `rag` command line (the chaos benchmark starts it this way)."""

from service.cli import app

app()
