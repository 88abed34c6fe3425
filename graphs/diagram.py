"""The Mermaid diagrams of the compiled graphs, kept in docs/design.md between marker comments.

`python -m graphs.diagram` rewrites every `<!-- graph:NAME -->` ... `<!-- /graph:NAME -->` block with the
diagram LangGraph draws from graph NAME; `--check` writes nothing and exits 1 naming the stale blocks;
`--print NAME` writes one graph's diagram to stdout. Compiling loads no model, so this needs no data folder.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from graphs.baseline import build_baseline_graph
from graphs.direct import build_direct_graph
from graphs.rag import build_graph
from graphs.types import GraphType

#: The graphs a document can show, by the name its markers use (the names langgraph.json serves them under).
GRAPH_BUILDERS: Mapping[str, Callable[[], GraphType]] = {
    "rag": build_graph,
    "baseline": build_baseline_graph,
    "direct": build_direct_graph,
}
#: The document whose marked blocks are generated.
DESIGN_DOC = Path(__file__).resolve().parents[1] / "docs" / "design.md"
#: The command that regenerates the blocks (named in the stale-block messages).
REFRESH_COMMAND = "python -m graphs.diagram"
#: An opening marker; its name is the graph it shows.
OPENING = re.compile(r"<!-- graph:(?P<name>[\w-]+) -->")
#: A whole marked block, markers included.
BLOCK = re.compile(r"<!-- graph:(?P<name>[\w-]+) -->\n.*?<!-- /graph:(?P=name) -->", re.DOTALL)
#: Exit codes of the command: stale blocks found by --check; a document or graph name that is wrong.
EXIT_STALE = 1
EXIT_BAD_INPUT = 2


def mermaid(name: str) -> str:
    """The Mermaid flowchart of graph `name`, compiled without a checkpointer."""
    if name not in GRAPH_BUILDERS:
        raise ValueError(f"unknown graph {name!r}; the graphs are {', '.join(GRAPH_BUILDERS)}")
    return GRAPH_BUILDERS[name]().get_graph().draw_mermaid()


def diagram_block(name: str, diagram: str) -> str:
    """The marked block that shows `diagram` as graph `name`: markers around a ```mermaid fence."""
    return f"<!-- graph:{name} -->\n```mermaid\n{diagram.rstrip()}\n```\n<!-- /graph:{name} -->"


def documented_graphs(text: str) -> list[str]:
    """The graph names of the document's marked blocks, in order; ValueError for a bad marker."""
    names = [match.group("name") for match in BLOCK.finditer(text)]
    opened = [match.group("name") for match in OPENING.finditer(text)]
    if opened != names:
        unclosed = sorted(set(opened) - set(names)) or opened
        raise ValueError(f"a graph marker is not closed by <!-- /graph:NAME -->: {', '.join(unclosed)}")
    unknown = sorted(set(names) - set(GRAPH_BUILDERS))
    if unknown:
        raise ValueError(
            f"unknown graph in a marker: {', '.join(unknown)}; the graphs are {', '.join(GRAPH_BUILDERS)}"
        )
    return names


def refreshed(text: str, diagrams: Mapping[str, str]) -> str:
    """`text` with each marked block replaced by the block of its graph's diagram in `diagrams`."""
    documented_graphs(text)
    return BLOCK.sub(lambda match: diagram_block(match.group("name"), diagrams[match.group("name")]), text)


def stale_graphs(text: str, diagrams: Mapping[str, str]) -> list[str]:
    """The names of the marked blocks of `text` that differ from their graph's diagram in `diagrams`."""
    return [
        match.group("name")
        for match in BLOCK.finditer(text)
        if match.group(0) != diagram_block(match.group("name"), diagrams[match.group("name")])
    ]


def current_diagrams(names: Sequence[str]) -> dict[str, str]:
    """{name: diagram} of the named graphs, drawn now from the code."""
    return {name: mermaid(name) for name in dict.fromkeys(names)}


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate (or with --check, compare) the document's marked blocks; --print shows one diagram."""
    parser = argparse.ArgumentParser(prog=REFRESH_COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--doc", type=Path, default=DESIGN_DOC, help="the markdown file (default: %(default)s)"
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a block is stale")
    parser.add_argument(
        "--print", dest="show", choices=sorted(GRAPH_BUILDERS), help="print one graph's diagram"
    )
    args = parser.parse_args(argv)
    if args.show:
        print(mermaid(args.show))
        return 0
    try:
        text = args.doc.read_text(encoding="utf-8")
        names = documented_graphs(text)
    except (OSError, ValueError) as error:
        print(f"error: {args.doc}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not names:
        print(f"error: {args.doc}: no <!-- graph:NAME --> block to fill", file=sys.stderr)
        return EXIT_BAD_INPUT
    diagrams = current_diagrams(names)
    stale = stale_graphs(text, diagrams)
    if args.check:
        if stale:
            print(
                f"{args.doc}: stale graph diagrams: {', '.join(stale)}; run `{REFRESH_COMMAND}`",
                file=sys.stderr,
            )
            return EXIT_STALE
        return 0
    if stale:
        args.doc.write_text(refreshed(text, diagrams), encoding="utf-8")
    rewritten = ", ".join(stale) or "none"
    print(f"{args.doc}: {len(names) - len(stale)} diagrams current, {len(stale)} rewritten ({rewritten})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
