"""Read files of every supported format into `LoadedDocument`s.

Ingestion must survive whatever a user points it at: one corrupt PDF or a stray binary in a folder should
fail alone, with a short reason a person can act on, and never abort the batch. So every format reader
here raises only `LoaderError`, whose message is that reason; the raw exceptions of pypdf, python-docx
and json are wrapped. Each format keeps the structure the chunker and citations need (PDF page numbers,
markdown/HTML/DOCX headings as sections and chapters, JSON record ids and metadata).

Ingestion must also survive files built to be slow: a 1.1 MB HTML file of nested <div>s hung it (time grew
with the square of the depth). So nothing here re-walks a subtree per element, nesting is capped
(RAG_LOADER_MAX_DEPTH), and every parse runs under a `LoadGuard`: a per-file time budget
(RAG_LOADER_FILE_TIMEOUT_S) and the caller's stop hook, checked inside the parse loops (cooperatively: no
thread or signal, so nothing is left running when a file is given up).
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import logging
import os
import re
import stat
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

import docx
from bs4 import BeautifulSoup, Tag
from bs4.element import CData, NavigableString, PageElement
from docx.table import Table
from pypdf import PdfReader

from config.settings import Settings
from core.types import LoadedDocument, MetadataValue, Section, is_custom_metadata_key

__all__ = [
    "SUPPORTED_SUFFIXES",
    "LoadGuard",
    "LoaderError",
    "StopRequested",
    "ZipLimits",
    "discover_files",
    "ensure_regular",
    "ensure_supported",
    "load_bytes",
    "load_file",
    "read_regular_file",
    "safe_resolve",
]

#: Suffixes of gzip-compressed record files; the inner suffix picks the record format.
GZIP_SUFFIXES = frozenset({".json.gz", ".jsonl.gz"})
#: Zip-based formats: their directory is checked against ZipLimits before any parser inflates them.
ZIP_SUFFIXES = frozenset({".docx"})

#: Every suffix `load_file` understands (lower case; compound suffixes for gzip record files).
SUPPORTED_SUFFIXES = frozenset(
    {".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx", ".json", ".jsonl"} | GZIP_SUFFIXES
)

#: Bytes inspected to tell text from binary (enough to catch any real binary header).
BINARY_SNIFF_BYTES = 8192
#: Share of control characters above which a file is taken as binary rather than text.
MAX_CONTROL_RATIO = 0.30
#: Control bytes that plain text legitimately contains (tab, newline, vertical tab, form feed, CR, ESC).
TEXT_CONTROL_BYTES = frozenset(b"\t\n\v\f\r\x1b")

UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")

#: Record fields holding the text, in order of preference.
RECORD_TEXT_FIELDS = ("text", "content", "body", "page_content")
#: Record fields holding the id, in order of preference.
RECORD_ID_FIELDS = ("_id", "id", "doc_id")
#: Keys under which a JSON object may hold its list of records.
RECORD_LIST_KEYS = ("records", "data", "documents")
#: Record fields copied into metadata (scalars only, since Chroma accepts nothing else).
RECORD_METADATA_KEYS = (
    "chapter",
    "section",
    "conversation_id",
    "doc_type",
    "created_at",
    "level",
    "page",
    "category",
    "character_id",
    "background_id",
)
RECORD_DOC_TYPE = "record"
#: Record fields that are content or structure, not metadata (the rest of a record's scalars are kept).
RECORD_CONTENT_KEYS = frozenset({*RECORD_TEXT_FIELDS, *RECORD_ID_FIELDS, "title", "event", "unchunked"})

#: PDF titles that PDF writers fill in by default; they say nothing, so the file stem is used instead.
PLACEHOLDER_PDF_TITLES = frozenset({"", "untitled", "untitled document"})

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
# Private-use characters stand in for structure while BeautifulSoup flattens the tree to text, so that
# collapsing the source's insignificant whitespace does not erase paragraph breaks or headings.
_HTML_PARAGRAPH_MARK = "\ue000"
_HTML_LINE_MARK = "\ue001"
_HTML_HEADING_MARK = "\ue002"
#: The marker characters removed from the source text, so that only ours delimit structure.
_HTML_MARKS_REMOVED = str.maketrans("", "", _HTML_PARAGRAPH_MARK + _HTML_LINE_MARK + _HTML_HEADING_MARK)
#: bs4 string types that are content (comments, doctypes and processing instructions are not).
_HTML_TEXT_TYPES = frozenset({NavigableString, CData})
#: Bytes read per system call while reading a file (the size cap is checked after every read).
READ_BLOCK_BYTES = 1 << 20
#: Zip entries smaller than this are exempt from the compression-ratio check (tiny XML parts compress
#: extremely well and cannot hurt).
ZIP_RATIO_MIN_BYTES = 1 << 20
#: What a file that is not a regular one is, for the reason shown to the user.
_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)
_HTML_HEADING_RE = re.compile(f"{_HTML_HEADING_MARK}(\\d)(.*?){_HTML_HEADING_MARK}", re.DOTALL)

# The closing `#`s of a heading are removed in Python (`_markdown_heading_text`): a lazy group followed by
# optional spaces backtracked quadratically (a 20,000-space heading line took 5.7 s).
_MARKDOWN_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+)$")
_MARKDOWN_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")
_DOCX_HEADING_LEVEL_RE = re.compile(r"(\d+)")
_EXCESS_NEWLINES_RE = re.compile(r"\n{3,}")
# Matches only from the start of a run of spaces: without the look-behind, a long run inside a line was
# rescanned from each of its spaces (quadratic: 20,000 spaces before a word took 1.7 s).
_TRAILING_SPACE_RE = re.compile(r"(?<![ \t\u3000])[ \t\u3000]++$", re.MULTILINE)
# A JSON string, quotes included; possessive, and the closing quote optional, so that malformed input
# (an unterminated string, stray backslashes) is still scanned once, never backtracked over.
_JSON_STRING_RE = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
_JSON_NOT_BRACKET_RE = re.compile(r"[^\[\]{}]+")
_JSON_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
#: Parse-loop iterations between two checks of the time budget and the stop hook.
GUARD_CHECK_EVERY = 256


class LoaderError(Exception):
    """A file that cannot be loaded; the message is a short reason shown to the user as-is."""


class StopRequested(Exception):
    """`should_stop()` returned True: the parse was abandoned; the file neither loaded nor failed.

    Not a LoaderError, so that ingestion does not record it as the file's failure but stops the run.
    """


@dataclass
class LoadGuard:
    """Bounds of one file's parse: a nesting depth cap, a time budget and the caller's stop hook.

    Why cooperative: a thread cannot be killed and a signal only reaches the main thread (the API parses in
    worker threads), so the loaders call `tick()` in their loops instead. A step that is one call into C
    (json.loads, lxml) or one PDF page cannot be interrupted; `load_bytes` checks the budget after it, so a
    file over budget still fails. The clock starts when the guard is made: make one per file.
    """

    max_depth: int = Settings.model_fields["loader_max_depth"].default
    #: Seconds the parse may take (0 = no limit).
    timeout_s: float = Settings.model_fields["loader_file_timeout_s"].default
    #: Called at each check; True abandons the parse with StopRequested (a client that went away).
    should_stop: Callable[[], bool] | None = None
    _deadline: float | None = field(init=False, default=None)
    _countdown: int = field(init=False, default=GUARD_CHECK_EVERY)

    def __post_init__(self) -> None:
        if self.timeout_s > 0:
            self._deadline = time.monotonic() + self.timeout_s

    @classmethod
    def from_settings(cls, settings: Settings, should_stop: Callable[[], bool] | None = None) -> LoadGuard:
        """A guard with these settings' limits (RAG_LOADER_MAX_DEPTH, RAG_LOADER_FILE_TIMEOUT_S)."""
        return cls(settings.loader_max_depth, settings.loader_file_timeout_s, should_stop)

    def check(self) -> None:
        """StopRequested when the caller asked to stop; LoaderError when the time budget is spent."""
        if self.should_stop is not None and self.should_stop():
            raise StopRequested("ingestion stopped by the caller")
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise LoaderError(f"took longer than {self.timeout_s:g} s to parse (RAG_LOADER_FILE_TIMEOUT_S)")

    def tick(self) -> None:
        """`check()` every GUARD_CHECK_EVERY calls: cheap enough for a loop over every element."""
        self._countdown -= 1
        if self._countdown <= 0:
            self._countdown = GUARD_CHECK_EVERY
            self.check()

    def too_deep(self) -> LoaderError:
        """The reason for a file nested deeper than the cap."""
        return LoaderError(f"nested deeper than {self.max_depth} levels (RAG_LOADER_MAX_DEPTH)")


@dataclass(frozen=True)
class ZipLimits:
    """Bounds on a zip-based file (.docx), enforced before any parser sees it (see `_inflate_zip`).

    Why before: python-docx inflates every part and lxml builds a tree ~20x the XML's size, so the only
    safe moment to refuse a zip bomb is before parsing.
    """

    max_unzipped_bytes: int = Settings.model_fields["max_unzipped_bytes"].default
    max_entries: int = Settings.model_fields["max_zip_entries"].default
    max_ratio: float = Settings.model_fields["max_zip_ratio"].default

    @classmethod
    def from_settings(cls, settings: Settings) -> ZipLimits:
        """The limits of these settings (RAG_MAX_UNZIPPED_BYTES, RAG_MAX_ZIP_ENTRIES, RAG_MAX_ZIP_RATIO)."""
        return cls(settings.max_unzipped_bytes, settings.max_zip_entries, settings.max_zip_ratio)


def safe_resolve(path: Path) -> Path:
    """`path` with symlinks resolved, or made absolute when they cannot be (a loop, a dangling link): the
    file then fails alone when it is read, instead of aborting discovery for every other file."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python 3.11's "Symlink loop from ..."
        return path.absolute()


def discover_files(paths: Iterable[Path]) -> list[Path]:
    """Expand folders into the supported files under them; keep explicitly named files as given.

    Folders are walked recursively in sorted order so ingestion is reproducible; hidden files and
    folders (`.git`, `.venv`...) are skipped, as are unsupported suffixes, and symlinked folders are not
    followed (a link to a parent would loop). A file named explicitly is kept even when unsupported or
    unreadable (a symlink loop), so the user gets its reason instead of silence.
    Raises FileNotFoundError naming the first path that does not exist.
    """
    found: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        try:
            os.lstat(path)
        except OSError:
            raise FileNotFoundError(f"no such file or directory: {path}") from None
        candidates = _walk_supported(path) if _is_directory(path) else [path]
        for candidate in candidates:
            key = safe_resolve(candidate)
            if key not in seen:
                seen.add(key)
                found.append(candidate)
    return found


def ensure_regular(path: Path) -> None:
    """LoaderError unless `path` is (or links to) a regular file; a cheap first check that reads nothing,
    so a device or a pipe is reported as such whatever its name (`read_regular_file` checks again)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _open_error(exc) from exc
    if not stat.S_ISREG(mode):
        raise LoaderError(f"not a regular file ({_file_kind(mode)})")


def _file_kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "a special file")


def _open_error(exc: OSError) -> LoaderError:
    if exc.errno == errno.ELOOP:
        return LoaderError("symlink loop: the path never reaches a file")
    return LoaderError(f"unreadable file: {exc.strerror or exc}")


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of `path`, which must be (or link to) a regular file of at most `max_bytes` bytes.

    Why this care: a `.txt` symlink to /dev/zero or a named pipe made ingestion hang forever. The file is
    opened non-blocking (opening a pipe with no writer would block), its type is checked on the open
    descriptor (no race with a swapped path), and the size cap is enforced while reading: st_size is 0 for
    devices and may grow as we read, so it is only a first check.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _open_error(exc) from exc
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise LoaderError(f"not a regular file ({_file_kind(info.st_mode)})")
        if info.st_size > max_bytes:
            raise LoaderError(f"file too large: {info.st_size} bytes > {max_bytes}")
        os.set_blocking(descriptor, True)
        blocks: list[bytes] = []
        total = 0
        while block := os.read(descriptor, min(READ_BLOCK_BYTES, max_bytes + 1 - total)):
            total += len(block)
            if total > max_bytes:
                raise LoaderError(f"file too large: more than {max_bytes} bytes (it grew while read)")
            blocks.append(block)
        return b"".join(blocks)
    except OSError as exc:
        raise LoaderError(f"unreadable file: {exc.strerror or exc}") from exc
    finally:
        os.close(descriptor)


def load_file(
    path: Path, max_bytes: int, zip_limits: ZipLimits | None = None, guard: LoadGuard | None = None
) -> list[LoadedDocument]:
    """Read `path` into documents (one per file, or one per record for JSON/JSONL).

    Raises LoaderError for any file that cannot be loaded: not a regular file, too large, unsupported,
    unreadable, corrupt, a zip bomb, binary, undecodable, without text, nested too deeply or over its time
    budget; and StopRequested, only, when `guard.should_stop()` asked to stop. `guard` defaults to the
    default limits, with its clock started here.
    """
    ensure_supported(path)
    guard = guard or LoadGuard()
    return load_bytes(path, read_regular_file(path, max_bytes), max_bytes, zip_limits, guard)


def load_bytes(
    path: Path,
    data: bytes,
    max_bytes: int,
    zip_limits: ZipLimits | None = None,
    guard: LoadGuard | None = None,
) -> list[LoadedDocument]:
    """Documents from the bytes of `path` already read (ingestion hashes and parses one read).

    The parse runs under `guard` (default limits if None); its budget is checked once more at the end, so
    a file whose parse outran it in a step that cannot be interrupted fails too.
    """
    loader = _loader_for(path)
    guard = guard or LoadGuard()
    if _suffix_of(path) in GZIP_SUFFIXES:
        data = _gunzip(data, max_bytes)
    if not data.strip():
        raise LoaderError("empty document: no text")
    if _suffix_of(path) in ZIP_SUFFIXES:
        data = _inflate_zip(data, zip_limits or ZipLimits(), _suffix_of(path).lstrip(".").upper())
    guard.check()
    documents = loader(path, data, guard)
    guard.check()
    return documents


def ensure_supported(path: Path) -> None:
    """LoaderError when no loader reads `path`'s suffix: reported without reading the file."""
    _loader_for(path)


def _loader_for(path: Path) -> Callable[[Path, bytes, LoadGuard], list[LoadedDocument]]:
    suffix = _suffix_of(path)
    loader = _LOADERS.get(suffix)
    if loader is None:
        raise LoaderError(f"unsupported file type: {suffix or '(no suffix)'}")
    return loader


def _inflate_zip(data: bytes, limits: ZipLimits, kind: str) -> bytes:
    """The zip `data` rewritten with every entry stored uncompressed, inflated here under `limits`.

    Why a copy and not only a look at the directory: the sizes in the directory are the attacker's to
    write. Python's zipfile returns no more than an entry's declared size, but `read()` of a whole entry
    (what python-docx does) first inflates everything the compressed stream holds and only then truncates:
    a 340 KB .docx declaring 1,000 bytes took 630 MB. Here each entry is inflated 1 MiB at a time, which
    zipfile bounds, the bytes actually produced are counted against RAG_MAX_UNZIPPED_BYTES, and the parser
    then reads stored entries that inflate nothing.
    """
    _check_zip_directory(data, limits, kind)
    inflated = 0
    copy = io.BytesIO()
    try:
        with (
            zipfile.ZipFile(io.BytesIO(data)) as archive,
            zipfile.ZipFile(copy, "w", compression=zipfile.ZIP_STORED) as stored,
        ):
            for entry in archive.infolist():
                if entry.is_dir():
                    continue
                with (
                    archive.open(entry) as source,
                    stored.open(entry.filename, "w", force_zip64=True) as target,
                ):
                    while block := source.read(READ_BLOCK_BYTES):
                        inflated += len(block)
                        if inflated > limits.max_unzipped_bytes:
                            raise LoaderError(
                                f"zip bomb refused: inflates to more than {limits.max_unzipped_bytes} bytes "
                                "(RAG_MAX_UNZIPPED_BYTES)"
                            )
                        target.write(block)
    except LoaderError:
        raise
    except Exception as exc:  # noqa: BLE001 - bad CRC, encryption, unknown methods, truncation: all corrupt
        raise LoaderError(f"corrupt {kind}: {str(exc) or type(exc).__name__}") from exc
    return copy.getvalue()


def _check_zip_directory(data: bytes, limits: ZipLimits, kind: str) -> None:
    """Refuse a zip whose directory promises too many entries, too many bytes or a bomb's ratio (cheap, and
    the reason names the setting; `_inflate_zip` still counts what is really inflated)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise LoaderError(f"corrupt {kind}: {exc}") from exc
    if len(entries) > limits.max_entries:
        raise LoaderError(
            f"zip bomb refused: {len(entries)} entries > {limits.max_entries} (RAG_MAX_ZIP_ENTRIES)"
        )
    total = sum(entry.file_size for entry in entries)
    if total > limits.max_unzipped_bytes:
        raise LoaderError(
            f"zip bomb refused: inflates to {total} bytes > {limits.max_unzipped_bytes} "
            "(RAG_MAX_UNZIPPED_BYTES)"
        )
    for entry in entries:
        ratio = entry.file_size / max(entry.compress_size, 1)
        if entry.file_size > ZIP_RATIO_MIN_BYTES and ratio > limits.max_ratio:
            raise LoaderError(
                f"zip bomb refused: {entry.filename} inflates {ratio:.0f}x > {limits.max_ratio:g}x "
                "(RAG_MAX_ZIP_RATIO)"
            )


# --- discovery -----------------------------------------------------------------------------------------


def _suffix_of(path: Path) -> str:
    """Lower-case suffix, compound for gzip files (`.jsonl.gz`) so the inner format is known."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if len(suffixes) >= 2 and suffixes[-1] == ".gz":
        return "".join(suffixes[-2:])
    return suffixes[-1] if suffixes else ""


def _is_hidden(name: str) -> bool:
    """Dot-files and dot-folders are tool state (.git, .venv, .DS_Store), never user content."""
    return name.startswith(".")


def _is_directory(path: Path) -> bool:
    """A folder (or a link to one); False for anything unreadable, which then fails as a file."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _walk_supported(root: Path) -> list[Path]:
    """Supported, non-hidden files under `root`, sorted by their path parts (`a.md`, `b/c.md`, `z.md`)."""
    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = [name for name in dirnames if not _is_hidden(name)]
        for name in filenames:
            candidate = Path(folder) / name
            if not _is_hidden(name) and _suffix_of(candidate) in SUPPORTED_SUFFIXES:
                found.append(candidate)
    return sorted(found, key=lambda path: path.relative_to(root).parts)


# --- shared text handling ------------------------------------------------------------------------------


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    """Decompress, refusing output beyond `max_bytes` so a small gzip cannot expand without bound."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            raw = stream.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise LoaderError(f"corrupt gzip: {exc}") from exc
    if len(raw) > max_bytes:
        raise LoaderError(f"file too large: decompressed size > {max_bytes} bytes")
    return raw


def _looks_binary(data: bytes) -> bool:
    """NUL bytes or a high share of control characters in the first bytes mean a binary file."""
    head = data[:BINARY_SNIFF_BYTES]
    if not head:
        return False
    if b"\x00" in head:
        return True
    controls = sum(1 for byte in head if (byte < 0x20 or byte == 0x7F) and byte not in TEXT_CONTROL_BYTES)
    return controls / len(head) > MAX_CONTROL_RATIO


def _decode_text(data: bytes) -> str:
    """Decode bytes as UTF-8 (BOM optional), UTF-16 (BOM required) or, failing those, GB18030.

    GB18030 is the fallback because it covers Chinese files saved by Windows tools; it is only tried on
    bytes that are not binary and decode without a single error, so it never turns garbage into text.
    """
    if data.startswith(UTF8_BOM):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise LoaderError("undecodable text: UTF-8 BOM but invalid UTF-8") from exc
    if data.startswith(UTF16_BOMS):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise LoaderError("undecodable text: UTF-16 BOM but invalid UTF-16") from exc
    if _looks_binary(data):
        raise LoaderError("binary file (not text)")
    for encoding in ("utf-8", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise LoaderError("undecodable text: not UTF-8 / UTF-16 / GB18030")


def _normalise(text: str) -> str:
    """Light clean-up that keeps paragraph breaks, since chunking splits on blank lines first."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING_SPACE_RE.sub("", text)
    text = _EXCESS_NEWLINES_RE.sub("\n\n", text)
    return text.strip()


def _require_text(sections: list[Section]) -> list[Section]:
    """Drop empty sections; a document left with none is an error, not a silent skip."""
    kept = [section for section in sections if section.text]
    if not kept:
        raise LoaderError("empty document: no text")
    return kept


def _heading_sections(parts: list[tuple[int, str, str]], preamble: str) -> list[Section]:
    """Sections from (level, heading, body) triples; the heading text leads its section's text.

    `section` is the nearest heading and `chapter` the nearest level-1 heading. A section that is only a
    heading (a title directly followed by a sub-heading) is dropped: it would be a chunk with no content.
    """
    sections = [Section(text=_normalise(preamble))]
    chapter: str | None = None
    for level, heading, body in parts:
        if level == 1:
            chapter = heading
        body = _normalise(body)
        if body:
            sections.append(Section(text=f"{heading}\n\n{body}", section=heading, chapter=chapter))
    kept = [section for section in sections if section.text]
    if kept:
        return kept
    # Only headings: keep them as text rather than calling the document empty.
    headings = "\n\n".join(heading for _, heading, _ in parts)
    return _require_text([Section(text=_normalise(headings))])


def _file_document(path: Path, title: str, doc_type: str, sections: list[Section]) -> LoadedDocument:
    """A document that is a whole file: its id is the path."""
    return LoadedDocument(
        source=str(path),
        title=title or path.stem,
        doc_type=doc_type,
        sections=_require_text(sections),
        doc_id=str(path),
    )


# --- plain text and markdown ---------------------------------------------------------------------------


def _load_txt(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """Plain text is one section; the chunker splits it by paragraphs."""
    text = _normalise(_decode_text(data))
    return [_file_document(path, path.stem, "txt", [Section(text=text)])]


def _load_markdown(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """Markdown split at ATX headings (outside code fences); title is the first level-1 heading.

    Read line by line, never as a tree: nested lists and quotes cost nothing, so no depth cap applies.
    """
    lines = _normalise(_decode_text(data)).split("\n")
    preamble: list[str] = []
    parts: list[tuple[int, str, list[str]]] = []
    in_fence = False
    for line in lines:
        guard.tick()
        if _MARKDOWN_FENCE_RE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _MARKDOWN_HEADING_RE.match(line)
        if match:
            parts.append((len(match.group(1)), _markdown_heading_text(match.group(2)), []))
        elif parts:
            parts[-1][2].append(line)
        else:
            preamble.append(line)
    title = next((heading for level, heading, _ in parts if level == 1), path.stem)
    triples = [(level, heading, "\n".join(body)) for level, heading, body in parts]
    sections = _heading_sections(triples, "\n".join(preamble))
    return [_file_document(path, title, "md", sections)]


def _markdown_heading_text(rest: str) -> str:
    """A heading's text without its optional closing `#`s (`## Title ##`), which must follow a space."""
    text = rest.rstrip(" \t")
    body = text.rstrip("#")
    if body != text and body and body[-1] in " \t":
        text = body
    return text.strip()


# --- HTML ----------------------------------------------------------------------------------------------


class _GuardedSoup(BeautifulSoup):
    """BeautifulSoup (html.parser) that ticks a LoadGuard at every start tag and caps the nesting depth.

    At the cap, the innermost open element is taken as closed before the new one opens, as HTML's own
    rules close an open <p> at the next <p>: html.parser nests every unclosed tag, so a legacy page of
    unclosed <p>s would otherwise be thousands deep. Text and its order are kept; only the structure beyond
    the cap is flattened, and the tree stays at most `guard.max_depth` deep whatever the markup.
    """

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


def _load_html(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """HTML text without scripts, styles or navigation, split into sections at h1-h3."""
    text = _decode_text(data)
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
    sections = _heading_sections(triples, pieces[0])
    return [_file_document(path, title, "html", sections)]


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
    """The page's text, with marker characters standing for its structure, in one walk of the tree.

    Paragraph marks around block elements, line marks for <br> and the newlines of <pre>, heading marks
    around the collapsed text of h1-h3, " | " between table cells; dropped elements (scripts, navigation,
    titles) are skipped. Why one explicit-stack walk: marking the tree with bs4's insert_after/decompose
    re-walks the subtree of every element (insert_after looks for the element's last descendant), so a
    page of n nested elements cost n^2 (8,000 nested <div>s: 12 s), and recursion would overflow.
    """
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


# --- PDF -----------------------------------------------------------------------------------------------


def _load_pdf(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """One section per PDF page that has text, with its 1-based page number for citations.

    The guard is checked between pages: one page's extraction is a single pypdf call (giving pypdf a
    per-operator hook would make it parse the content of pages without text, which it otherwise skips).
    pypdf walks nested objects recursively, so their depth is capped by Python's recursion limit.
    """
    # pypdf logs a warning for every recoverable defect; the outcome is reported through LoaderError.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            _decrypt_without_password(reader)
        pages: list[str] = []
        for page in reader.pages:
            guard.check()
            pages.append(_normalise(page.extract_text() or ""))
        metadata_title = (reader.metadata.title if reader.metadata else None) or ""
    except (LoaderError, StopRequested):
        raise
    except RecursionError as exc:
        raise LoaderError("corrupt PDF: objects nested too deeply") from exc
    except Exception as exc:  # pypdf raises many types on damaged files; all mean the same to the user.
        raise LoaderError(f"corrupt PDF: {str(exc) or type(exc).__name__}") from exc
    sections = [Section(text=text, page=number) for number, text in enumerate(pages, start=1) if text]
    if not sections:
        raise LoaderError("PDF has no text layer (scanned?)")
    title = str(metadata_title).strip()
    if title.lower() in PLACEHOLDER_PDF_TITLES:
        title = path.stem
    return [_file_document(path, title, "pdf", sections)]


def _decrypt_without_password(reader: PdfReader) -> None:
    """Open PDFs encrypted only against editing (empty user password); others need a password."""
    try:
        opened = reader.decrypt("")
    except Exception as exc:  # e.g. AES without the optional cryptography package.
        raise LoaderError(f"encrypted PDF: {str(exc) or type(exc).__name__}") from exc
    if not opened:
        raise LoaderError("encrypted PDF: a password is required")


# --- DOCX ----------------------------------------------------------------------------------------------


def _load_docx(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """DOCX paragraphs and tables in document order, split into sections at Heading styles.

    Nesting: libxml2 refuses XML deeper than 256 elements, and only the body's blocks and their tables'
    cells are read (no recursion here), so RAG_LOADER_MAX_DEPTH has nothing more to cap.
    """
    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[tuple[str, int | None]] = []
        for block in document.iter_inner_content():
            guard.tick()
            blocks.append(
                _docx_table_text(block, guard) if isinstance(block, Table) else _docx_paragraph(block)
            )
        core_title = document.core_properties.title or ""
    except (LoaderError, StopRequested):
        raise
    except Exception as exc:  # python-docx and its zip/XML layers raise many types on damaged files.
        if "Excessive depth" in str(exc):  # lxml's XMLSyntaxError, in libxml2's words
            raise LoaderError(
                "corrupt DOCX: XML nested deeper than 256 levels (the XML parser's limit)"
            ) from exc
        raise LoaderError(f"corrupt DOCX: {str(exc) or type(exc).__name__}") from exc
    preamble: list[str] = []
    parts: list[tuple[int, str, list[str]]] = []
    title_style_text = ""
    for text, level in blocks:
        if level == 0:
            title_style_text = title_style_text or text
            level = None
        if level is not None:
            parts.append((level, text, []))
        elif parts:
            parts[-1][2].append(text)
        else:
            preamble.append(text)
    first_chapter = next((heading for level, heading, _ in parts if level == 1), "")
    title = core_title.strip() or title_style_text or first_chapter or path.stem
    triples = [(level, heading, "\n\n".join(body)) for level, heading, body in parts]
    sections = _heading_sections(triples, "\n\n".join(preamble))
    return [_file_document(path, title, "docx", sections)]


def _docx_paragraph(paragraph: Any) -> tuple[str, int | None]:
    """Paragraph text and its heading level: 0 for the Title style, None for body text."""
    text = paragraph.text.strip()
    style_name = (paragraph.style.name if paragraph.style is not None else "") or ""
    lowered = style_name.lower()
    if not text:
        return "", None
    if lowered == "title":
        return text, 0
    if lowered.startswith("heading"):
        match = _DOCX_HEADING_LEVEL_RE.search(style_name)
        return text, int(match.group(1)) if match else 1
    return text, None


def _docx_table_text(table: Any, guard: LoadGuard) -> tuple[str, None]:
    """Table rows as lines of ' | '-joined cells; merged cells (repeated objects) appear once."""
    lines: list[str] = []
    for row in table.rows:
        guard.tick()
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cell_text = " ".join(cell.text.split())
            if cell_text:
                cells.append(cell_text)
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines), None


# --- JSON / JSONL records ------------------------------------------------------------------------------


def _load_json(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """A JSON array of records, an object holding one under records/data/documents, or one record."""
    parsed = _parse_json(_decode_text(data), line_number=None, guard=guard)
    if isinstance(parsed, dict):
        listed = next((parsed[key] for key in RECORD_LIST_KEYS if isinstance(parsed.get(key), list)), None)
        records: list[Any] = listed if listed is not None else [parsed]
    elif isinstance(parsed, list):
        records = parsed
    else:
        raise LoaderError("invalid JSON records: expected an array or an object")
    return _record_documents(path, records, guard)


def _load_jsonl(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """One JSON record per line; one malformed line fails the whole file so nothing half-loads."""
    records: list[Any] = []
    for number, line in enumerate(_decode_text(data).splitlines(), start=1):
        guard.tick()
        if not line.strip():
            continue
        records.append(_parse_json(line, line_number=number, guard=guard))
    return _record_documents(path, records, guard)


def _parse_json(text: str, line_number: int | None, guard: LoadGuard) -> Any:
    """Parsed JSON; the error names the line (of the file, for a JSONL line) so the user can fix it.

    The nesting depth is measured first: json.loads recurses in C, bounded only by the interpreter's
    recursion limit, which a process may raise far enough to overflow the C stack.
    """
    line = line_number if line_number is not None else 1
    if _json_depth(text, guard.max_depth) > guard.max_depth:
        raise LoaderError(f"invalid JSON on line {line}: {guard.too_deep()}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        reason = exc.msg
        line = line_number if line_number is not None else exc.lineno
    except ValueError as exc:  # over-long integers
        reason = str(exc)
    except RecursionError:  # a recursion limit below the cap, or a deep stack already
        reason = str(guard.too_deep())
    raise LoaderError(f"invalid JSON on line {line}: {reason}")


def _json_depth(text: str, cap: int) -> int:
    """The deepest bracket nesting of JSON `text` outside strings, in a few passes of C code (linear even
    for malformed text); 0 without counting when the text has too few brackets to exceed `cap`."""
    if text.count("[") + text.count("{") <= cap:
        return 0
    brackets = _JSON_NOT_BRACKET_RE.sub("", _JSON_STRING_RE.sub("", text))
    return max(accumulate(map(_JSON_DEPTH_STEP.__getitem__, brackets)), default=0)


def _record_documents(path: Path, records: list[Any], guard: LoadGuard) -> list[LoadedDocument]:
    """Documents for the records that have text; a file where none has text is an error."""
    documents: list[LoadedDocument] = []
    for index, record in enumerate(records):
        guard.tick()
        if isinstance(record, dict) and (document := _record_document(path, index, record)) is not None:
            documents.append(document)
    if not documents:
        raise LoaderError("no records with text (expected a 'text' or 'content' field)")
    return documents


def _record_document(path: Path, index: int, record: dict[str, Any]) -> LoadedDocument | None:
    """One record as a document, or None when it has no text.

    The title is prepended to the text because BEIR-style corpora put key terms only in titles.
    """
    body = next(
        (value for key in RECORD_TEXT_FIELDS if isinstance(value := record.get(key), str) and value.strip()),
        None,
    )
    if body is None:
        return None
    raw_title = record.get("title")
    title = " ".join(raw_title.split()) if isinstance(raw_title, str) else ""
    text = _normalise(f"{title}\n\n{body}" if title else body)
    record_id = next(
        (str(value) for key in RECORD_ID_FIELDS if (value := record.get(key)) is not None and value != ""),
        str(index),
    )
    metadata: dict[str, MetadataValue] = {
        key: value for key in RECORD_METADATA_KEYS if isinstance(value := record.get(key), str | int | float)
    }
    metadata |= {  # the record's own keys (category, session_id, ...): kept and filterable, never dropped
        key: value
        for key, value in record.items()
        if isinstance(value, str | int | float)
        and key not in RECORD_CONTENT_KEYS
        and is_custom_metadata_key(key)
    }
    doc_type = record.get("doc_type")
    page = metadata.get("page")
    section = metadata.get("section")
    chapter = metadata.get("chapter")
    return LoadedDocument(
        source=str(path),
        title=title or path.stem,
        doc_type=doc_type if isinstance(doc_type, str) and doc_type else RECORD_DOC_TYPE,
        sections=[
            Section(
                text=text,
                page=page if isinstance(page, int) and not isinstance(page, bool) else None,
                section=section if isinstance(section, str) and section else None,
                chapter=chapter if isinstance(chapter, str) and chapter else None,
            )
        ],
        doc_id=record_id,
        unchunked=bool(record.get("event")) or bool(record.get("unchunked")),
        metadata=metadata,
    )


_LOADERS: dict[str, Callable[[Path, bytes, LoadGuard], list[LoadedDocument]]] = {
    ".md": _load_markdown,
    ".markdown": _load_markdown,
    ".txt": _load_txt,
    ".html": _load_html,
    ".htm": _load_html,
    ".pdf": _load_pdf,
    ".docx": _load_docx,
    ".json": _load_json,
    ".jsonl": _load_jsonl,
    ".json.gz": _load_json,
    ".jsonl.gz": _load_jsonl,
}
