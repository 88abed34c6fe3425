"""Read files of every supported format into `LoadedDocument`s.

Ingestion must survive whatever a user points it at: one corrupt PDF or a stray binary in a folder should
fail alone, with a short reason a person can act on, and never abort the batch. So every format reader
here raises only `LoaderError`, whose message is that reason; the raw exceptions of pypdf, python-docx
and json are wrapped. Each format keeps the structure the chunker and citations need (PDF page numbers,
markdown/HTML/DOCX headings as sections and chapters, JSON record ids and metadata).
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
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docx
from bs4 import BeautifulSoup, NavigableString, Tag
from docx.table import Table
from pypdf import PdfReader

from config.settings import Settings
from core.types import LoadedDocument, MetadataValue, Section, is_custom_metadata_key

__all__ = [
    "SUPPORTED_SUFFIXES",
    "LoaderError",
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

_MARKDOWN_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_MARKDOWN_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")
_DOCX_HEADING_LEVEL_RE = re.compile(r"(\d+)")
_EXCESS_NEWLINES_RE = re.compile(r"\n{3,}")
_TRAILING_SPACE_RE = re.compile(r"[ \t\u3000]+$", re.MULTILINE)


class LoaderError(Exception):
    """A file that cannot be loaded; the message is a short reason shown to the user as-is."""


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


def load_file(path: Path, max_bytes: int, zip_limits: ZipLimits | None = None) -> list[LoadedDocument]:
    """Read `path` into documents (one per file, or one per record for JSON/JSONL).

    Raises LoaderError, and nothing else, for any file that cannot be loaded: not a regular file, too
    large, unsupported, unreadable, corrupt, a zip bomb, binary, undecodable or without text.
    """
    ensure_supported(path)
    return load_bytes(path, read_regular_file(path, max_bytes), max_bytes, zip_limits)


def load_bytes(
    path: Path, data: bytes, max_bytes: int, zip_limits: ZipLimits | None = None
) -> list[LoadedDocument]:
    """Documents from the bytes of `path` already read (ingestion hashes and parses one read)."""
    loader = _loader_for(path)
    if _suffix_of(path) in GZIP_SUFFIXES:
        data = _gunzip(data, max_bytes)
    if not data.strip():
        raise LoaderError("empty document: no text")
    if _suffix_of(path) in ZIP_SUFFIXES:
        data = _inflate_zip(data, zip_limits or ZipLimits(), _suffix_of(path).lstrip(".").upper())
    return loader(path, data)


def ensure_supported(path: Path) -> None:
    """LoaderError when no loader reads `path`'s suffix: reported without reading the file."""
    _loader_for(path)


def _loader_for(path: Path) -> Callable[[Path, bytes], list[LoadedDocument]]:
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


def _load_txt(path: Path, data: bytes) -> list[LoadedDocument]:
    """Plain text is one section; the chunker splits it by paragraphs."""
    text = _normalise(_decode_text(data))
    return [_file_document(path, path.stem, "txt", [Section(text=text)])]


def _load_markdown(path: Path, data: bytes) -> list[LoadedDocument]:
    """Markdown split at ATX headings (outside code fences); title is the first level-1 heading."""
    lines = _normalise(_decode_text(data)).split("\n")
    preamble: list[str] = []
    parts: list[tuple[int, str, list[str]]] = []
    in_fence = False
    for line in lines:
        if _MARKDOWN_FENCE_RE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _MARKDOWN_HEADING_RE.match(line)
        if match:
            parts.append((len(match.group(1)), match.group(2).strip(), []))
        elif parts:
            parts[-1][2].append(line)
        else:
            preamble.append(line)
    title = next((heading for level, heading, _ in parts if level == 1), path.stem)
    triples = [(level, heading, "\n".join(body)) for level, heading, body in parts]
    sections = _heading_sections(triples, "\n".join(preamble))
    return [_file_document(path, title, "md", sections)]


# --- HTML ----------------------------------------------------------------------------------------------


def _load_html(path: Path, data: bytes) -> list[LoadedDocument]:
    """HTML text without scripts, styles or navigation, split into sections at h1-h3."""
    text = _decode_text(data)
    try:
        soup = BeautifulSoup(text, "html.parser")
    except Exception as exc:  # html.parser is lenient, but bs4 may still reject pathological markup.
        raise LoaderError(f"unparsable HTML: {str(exc) or type(exc).__name__}") from exc
    title = _html_title(soup) or path.stem
    for tag in soup.find_all(HTML_DROPPED_TAGS):
        tag.decompose()
    for title_tag in soup.find_all("title"):
        title_tag.decompose()
    _mark_html_structure(soup)
    flat = re.sub(r"\s+", " ", soup.get_text())
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


def _mark_html_structure(soup: BeautifulSoup) -> None:
    """Replace structure with marker characters so it survives flattening the tree to one string."""
    for pre in soup.find_all("pre"):
        for string in list(pre.find_all(string=True)):
            string.replace_with(NavigableString(str(string).replace("\n", _HTML_LINE_MARK)))
    for br in soup.find_all("br"):
        br.replace_with(NavigableString(_HTML_LINE_MARK))
    for heading in soup.find_all(HTML_SECTION_HEADINGS):
        level = heading.name[1]
        text = " ".join(heading.get_text(" ").split())
        marker = f"{_HTML_PARAGRAPH_MARK}{_HTML_HEADING_MARK}{level}{text}{_HTML_HEADING_MARK}"
        heading.replace_with(NavigableString(marker + _HTML_PARAGRAPH_MARK))
    for block in soup.find_all(HTML_BLOCK_TAGS):
        block.insert_before(NavigableString(_HTML_PARAGRAPH_MARK))
        block.insert_after(NavigableString(_HTML_PARAGRAPH_MARK))
    for cell in soup.find_all(["td", "th"]):
        if cell.find_next_sibling(["td", "th"]) is not None:
            cell.insert_after(NavigableString(" | "))


# --- PDF -----------------------------------------------------------------------------------------------


def _load_pdf(path: Path, data: bytes) -> list[LoadedDocument]:
    """One section per PDF page that has text, with its 1-based page number for citations."""
    # pypdf logs a warning for every recoverable defect; the outcome is reported through LoaderError.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            _decrypt_without_password(reader)
        pages = [_normalise(page.extract_text() or "") for page in reader.pages]
        metadata_title = (reader.metadata.title if reader.metadata else None) or ""
    except LoaderError:
        raise
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


def _load_docx(path: Path, data: bytes) -> list[LoadedDocument]:
    """DOCX paragraphs and tables in document order, split into sections at Heading styles."""
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = [
            (_docx_table_text(block), None) if isinstance(block, Table) else _docx_paragraph(block)
            for block in document.iter_inner_content()
        ]
        core_title = document.core_properties.title or ""
    except Exception as exc:  # python-docx and its zip/XML layers raise many types on damaged files.
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


def _docx_table_text(table: Any) -> str:
    """Table rows as lines of ' | '-joined cells; merged cells (repeated objects) appear once."""
    lines: list[str] = []
    for row in table.rows:
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
    return "\n".join(lines)


# --- JSON / JSONL records ------------------------------------------------------------------------------


def _load_json(path: Path, data: bytes) -> list[LoadedDocument]:
    """A JSON array of records, an object holding one under records/data/documents, or one record."""
    parsed = _parse_json(_decode_text(data), line_number=None)
    if isinstance(parsed, dict):
        listed = next((parsed[key] for key in RECORD_LIST_KEYS if isinstance(parsed.get(key), list)), None)
        records: list[Any] = listed if listed is not None else [parsed]
    elif isinstance(parsed, list):
        records = parsed
    else:
        raise LoaderError("invalid JSON records: expected an array or an object")
    return _record_documents(path, records)


def _load_jsonl(path: Path, data: bytes) -> list[LoadedDocument]:
    """One JSON record per line; one malformed line fails the whole file so nothing half-loads."""
    records: list[Any] = []
    for number, line in enumerate(_decode_text(data).splitlines(), start=1):
        if not line.strip():
            continue
        records.append(_parse_json(line, line_number=number))
    return _record_documents(path, records)


def _parse_json(text: str, line_number: int | None) -> Any:
    """Parsed JSON; the error names the line (of the file, for a JSONL line) so the user can fix it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        reason = exc.msg
        line = line_number if line_number is not None else exc.lineno
    except (ValueError, RecursionError) as exc:  # over-long integers, absurd nesting
        reason = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        line = line_number if line_number is not None else 1
    raise LoaderError(f"invalid JSON on line {line}: {reason}")


def _record_documents(path: Path, records: list[Any]) -> list[LoadedDocument]:
    """Documents for the records that have text; a file where none has text is an error."""
    documents = [
        document
        for index, record in enumerate(records)
        if isinstance(record, dict) and (document := _record_document(path, index, record)) is not None
    ]
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


_LOADERS: dict[str, Callable[[Path, bytes], list[LoadedDocument]]] = {
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
