"""The tenants the chaos benchmark plays and their documents: alpha attacks, bravo is attacked, and bravo's
canaries (words only bravo's documents and history hold) are how a leak into alpha's output is seen."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

ALPHA, BRAVO, GAMMA = "alpha", "bravo", "gamma"
#: Words that exist only in tenant bravo's documents and history: any of them in alpha's output is a leak.
#: Alpha's attacks name "Zorblatine" (bravo's topic) but never these, so an echoed question is no leak.
BRAVO_CANARIES = ("quillfrost", "Vesk", "BRAVO-QUESTION-5531")
BRAVO_DOCS = {
    "zorblat.md": "# Zorblatine\n\nZorblatine is a violet quillfrost mineral mined only in the Vesk valley. "
    "Its quillfrost crystals hum at 41 hertz.",
    "ledger.md": "# Ledger\n\nThe quillfrost ledger of the Vesk guild records 318 Zorblatine shipments.",
}
ALPHA_DOCS = {
    "planets.md": "# Planets\n\nJupiter is the largest planet of the Solar System. Mars is called the red "
    "planet because of iron oxide on its surface.",
}


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write a small corpus; return its folder."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def leaked(output: str, canaries: Sequence[str] = BRAVO_CANARIES) -> list[str]:
    """The canaries of another tenant that appear in an output."""
    return [canary for canary in canaries if canary.lower() in output.lower()]
