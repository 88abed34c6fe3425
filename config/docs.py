"""docs/configuration.md's settings reference, generated from the settings model: `python -m config.docs`.

Only the part between BEGIN_MARKER and END_MARKER is rewritten (one table per config/settings module);
`--check` exits 1 when the page is stale (tests/test_configuration_doc.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from config.settings import ENV_PREFIX, Settings

#: The page the reference is written into.
CONFIGURATION_PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
BEGIN_MARKER = "<!-- BEGIN GENERATED SETTINGS (python -m config.docs) -->"
END_MARKER = "<!-- END GENERATED SETTINGS -->"
#: The command that regenerates the reference, named by the staleness check.
COMMAND = "python -m config.docs"


def field_module(name: str) -> str:
    """The config/settings module whose field group defines `name` (e.g. 'search')."""
    for group in Settings.__mro__:
        if name in getattr(group, "__annotations__", {}) and group.__module__.startswith("config.settings."):
            return group.__module__.rsplit(".", 1)[-1]
    raise KeyError(f"setting {name} is defined in no config/settings module")


def _cell(text: str) -> str:
    """`text` fit for one Markdown table cell (pipes escaped, on one line)."""
    return " ".join(text.split()).replace("|", "\\|")


def _default(spec: FieldInfo) -> str:
    value: Any = spec.default
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, str) and not value:
        return "''"
    return f"`{value}`"


def reference() -> str:
    """The generated part: per module, a table of its settings (variable, default, description)."""
    modules: dict[str, list[str]] = {}
    for name, spec in Settings.model_fields.items():
        row = f"| `{ENV_PREFIX}{name.upper()}` | {_default(spec)} | {_cell(spec.description or '')} |"
        modules.setdefault(field_module(name), []).append(row)
    total = sum(len(rows) for rows in modules.values())
    parts = [f"{total} settings, one table per module of `config/settings/` that defines them."]
    for module, rows in modules.items():
        parts.append(
            f"### `config/settings/{module}.py`\n\n| Variable | Default | Description |\n|---|---|---|\n"
            + "\n".join(rows)
        )
    return "\n\n".join(parts)


def render(page: str) -> str:
    """`page` with the generated part replaced; ValueError without both markers, in order."""
    start, end = page.find(BEGIN_MARKER), page.find(END_MARKER)
    if start < 0 or end < start:
        raise ValueError(f"{CONFIGURATION_PAGE.name} lacks the markers {BEGIN_MARKER!r} ... {END_MARKER!r}")
    return page[: start + len(BEGIN_MARKER)] + "\n\n" + reference() + "\n\n" + page[end:]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the page (or, with --check, say whether it is current: exit 1 when stale)."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale, writing nothing")
    args = parser.parse_args(argv)
    page = CONFIGURATION_PAGE.read_text(encoding="utf-8")
    try:
        fresh = render(page)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.check:
        if fresh != page:
            print(f"{CONFIGURATION_PAGE} is stale: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    if fresh != page:
        CONFIGURATION_PAGE.write_text(fresh, encoding="utf-8")
    print(f"wrote {CONFIGURATION_PAGE}" if fresh != page else f"{CONFIGURATION_PAGE} is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
