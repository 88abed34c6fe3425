"""HTML (.html, .htm): the page's text without scripts, styles or navigation, in sections at h1-h3; the tree
is walked once and its nesting capped while parsed (`_GuardedSoup`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup, Tag
from bs4.element import CData, NavigableString, PageElement

from core.types import LoadedDocument
from retrieval.loaders.decoding import decode_text
from retrieval.loaders.guard import LoaderError, LoadGuard, StopRequested
from retrieval.loaders.sections import file_document, heading_sections

#: HTML elements whose text is never content.
HTML_DROPPED_TAGS = ["script", "style", "nav", "noscript", "template", "head"]
#: HTML heading levels that start a new section (deeper headings stay inside their section).
HTML_SECTION_HEADINGS = ["h1", "h2", "h3"]
#: HTML elements that end a paragraph, so their text is separated by a blank line.
HTML_BLOCK_TAGS = [
    "p", "div", "section", "article", "main", "aside", "header", "footer", "blockquote", "pre",
    "ul", "ol", "li", "dl", "dt", "dd", "table", "tr", "figure", "figcaption", "h4", "h5", "h6",
    "address", "form", "fieldset", "hr",
]  # fmt: skip
# Private-use characters stand in for structure while whitespace is collapsed.
_HTML_PARAGRAPH_MARK = "\ue000"
_HTML_LINE_MARK = "\ue001"
_HTML_HEADING_MARK = "\ue002"
#: The marker characters removed from the source text, so that only ours delimit structure.
_HTML_MARKS_REMOVED = str.maketrans("", "", _HTML_PARAGRAPH_MARK + _HTML_LINE_MARK + _HTML_HEADING_MARK)
#: bs4 string types that are content (comments, doctypes and processing instructions are not).
_HTML_TEXT_TYPES = frozenset({NavigableString, CData})
_HTML_HEADING_RE = re.compile(f"{_HTML_HEADING_MARK}(\\d)(.*?){_HTML_HEADING_MARK}", re.DOTALL)


class _GuardedSoup(BeautifulSoup):
    """BeautifulSoup (html.parser) that ticks a LoadGuard at every start tag and caps the nesting depth: at
    the cap the innermost open element is taken as closed (as HTML closes an open <p> at the next <p>), so
    text and order are kept and the tree stays at most `guard.max_depth` deep."""

    def __init__(self, markup: str, guard: LoadGuard) -> None:
        self._guard = guard  # set before parsing, which BeautifulSoup's constructor does
        super().__init__(markup, "html.parser")

    def handle_starttag(self, *args: Any, **kwargs: Any) -> Tag | None:
        """Open a tag (bs4's tree builder calls this for every start tag), under the guard's limits."""
        self._guard.tick()
        if len(self.tagStack) > self._guard.max_depth:
            self.endData()  # the text read so far belongs to the element being closed
            self.popTag()
        return super().handle_starttag(*args, **kwargs)


def load_html(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """HTML text without scripts, styles or navigation, split into sections at h1-h3."""
    text = decode_text(data)
    try:
        soup = _GuardedSoup(text, guard)
    except (LoaderError, StopRequested):
        raise
    except Exception as exc:  # html.parser is lenient, but bs4 may still reject pathological markup.
        raise LoaderError(f"unparsable HTML: {str(exc) or type(exc).__name__}") from exc
    title = _html_title(soup) or path.stem
    flat = re.sub(r"\s+", " ", _html_marked_text(soup, guard))
    flat = flat.replace(_HTML_LINE_MARK, "\n").replace(_HTML_PARAGRAPH_MARK, "\n\n")
    flat = re.sub(r"[ \t]*\n[ \t]*", "\n", flat)
    pieces = _HTML_HEADING_RE.split(flat)
    triples = [
        (int(pieces[index]), pieces[index + 1].strip(), pieces[index + 2])
        for index in range(1, len(pieces) - 2, 3)
    ]
    sections = heading_sections(triples, pieces[0])
    return [file_document(path, title, "html", sections)]


def _html_title(soup: BeautifulSoup) -> str:
    """The <title>, else the first <h1>, whitespace-collapsed."""
    for tag_name in ("title", "h1"):
        tag = soup.find(tag_name)
        if isinstance(tag, Tag):
            text = " ".join(tag.get_text(" ").split())
            if text:
                return text
    return ""


def _html_marked_text(soup: BeautifulSoup, guard: LoadGuard) -> str:
    """The page's text with marker characters standing for its structure (paragraphs, line breaks, headings,
    table cells), in one explicit-stack walk: bs4's insert_after re-walks subtrees (n^2 on nested pages) and
    recursion would overflow."""
    dropped = frozenset([*HTML_DROPPED_TAGS, "title"])
    headings = frozenset(HTML_SECTION_HEADINGS)
    blocks = frozenset(HTML_BLOCK_TAGS)
    out: list[str] = []
    heading_text: list[str] | None = None  # strings of the h1-h3 being read, else None
    heading_tag: Tag | None = None
    in_pre = 0
    stack: list[tuple[Tag, Iterator[PageElement]]] = [(soup, iter(soup.contents))]
    while stack:
        guard.tick()
        tag, children = stack[-1]
        child = next(children, None)
        if child is None:  # the element ends
            stack.pop()
            _html_close(tag, out, heading_tag, heading_text)
            if tag is heading_tag:
                heading_tag, heading_text = None, None
            elif heading_tag is None and tag.name in blocks:
                out.append(_HTML_PARAGRAPH_MARK)
            if tag.name == "pre":
                in_pre -= 1
            continue
        if isinstance(child, NavigableString):
            if type(child) in _HTML_TEXT_TYPES:
                string = str(child).translate(_HTML_MARKS_REMOVED)
                if heading_text is not None:
                    heading_text.append(string)
                else:
                    out.append(string.replace("\n", _HTML_LINE_MARK) if in_pre else string)
            continue
        if not isinstance(child, Tag) or child.name in dropped:
            continue
        if child.name == "br":  # a line break; in a heading, whose text is one line, a space
            if heading_text is not None:
                heading_text.append(" ")
            else:
                out.append(_HTML_LINE_MARK)
            continue
        if heading_tag is None and child.name in headings:
            heading_tag, heading_text = child, []
        elif heading_tag is None and child.name in blocks:
            out.append(_HTML_PARAGRAPH_MARK)
        if child.name == "pre":
            in_pre += 1
        stack.append((child, iter(child.contents)))
    return "".join(out)


def _html_close(tag: Tag, out: list[str], heading_tag: Tag | None, heading_text: list[str] | None) -> None:
    """What an element leaves at its end: a heading's marked text, or " | " after a cell another follows."""
    if tag is heading_tag and heading_text is not None:
        text = " ".join(" ".join(heading_text).split())
        level = tag.name[1]
        out.append(f"{_HTML_PARAGRAPH_MARK}{_HTML_HEADING_MARK}{level}{text}{_HTML_HEADING_MARK}")
        out.append(_HTML_PARAGRAPH_MARK)
    elif heading_tag is None and tag.name in ("td", "th"):
        # Cost: the siblings up to the next cell, each looked at by one cell only, so linear in all.
        for sibling in tag.next_siblings:
            if isinstance(sibling, Tag) and sibling.name in ("td", "th"):
                out.append(" | ")
                break
