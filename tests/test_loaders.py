"""Tests of retrieval.loaders: every format's structure, and a telling LoaderError for every bad file.

Fixtures are generated in tmp_path so each test states exactly the input it relies on; one test also
loads the shipped sample corpus, which the README's first command ingests.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import random
from pathlib import Path

import docx
import pytest
from reportlab.pdfgen import canvas

from core.types import LoadedDocument
from retrieval.loaders import SUPPORTED_SUFFIXES, LoaderError, discover_files, load_file

MAX_BYTES = 1_000_000
SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "samples" / "corpus"
PDF_LINE_Y = 720


def write(path: Path, content: str | bytes) -> Path:
    """Write text (UTF-8) or bytes to `path`, creating folders, and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def pdf_bytes(pages: list[str]) -> bytes:
    """A PDF with one page per entry; an empty entry makes a page with no text."""
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, invariant=1)
    for text in pages:
        if text:
            pdf.drawString(72, PDF_LINE_Y, text)
        else:
            pdf.rect(72, 72, 100, 100)
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def only(documents: list[LoadedDocument]) -> LoadedDocument:
    """The single document a whole-file loader returns."""
    assert len(documents) == 1
    return documents[0]


def load_error(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """The LoaderError reason for `path` (fails the test if it loads)."""
    with pytest.raises(LoaderError) as info:
        load_file(path, max_bytes)
    return str(info.value)


# --- markdown and text ---------------------------------------------------------------------------------


def test_markdown_splits_sections_at_headings_and_tracks_chapters(tmp_path: Path) -> None:
    path = write(
        tmp_path / "guide.md",
        "Intro before any heading.\n\n"
        "# Planets\n\nPlanets orbit stars.\n\n"
        "## Mars\n\nMars is red.   \n\n\n\n\nIt has two moons.\n\n"
        "```python\n# not a heading\nx = 1\n```\n\n"
        "# Moons\n\n## Titan\n\nTitan has lakes.\n",
    )
    document = only(load_file(path, MAX_BYTES))
    assert document.title == "Planets"
    assert document.doc_type == "md"
    assert document.doc_id == str(path)
    assert document.source == str(path)
    assert [(s.section, s.chapter) for s in document.sections] == [
        (None, None),
        ("Planets", "Planets"),
        ("Mars", "Planets"),
        ("Titan", "Moons"),
    ]
    mars = document.sections[2].text
    assert mars.startswith("Mars\n\nMars is red.\n\nIt has two moons.")
    assert "# not a heading" in mars
    assert "\n\n\n" not in document.text
    assert all(section.page is None for section in document.sections)


def test_markdown_without_level_one_heading_is_titled_by_stem(tmp_path: Path) -> None:
    document = only(load_file(write(tmp_path / "notes.markdown", "## Part\n\nSome text.\n"), MAX_BYTES))
    assert document.title == "notes"
    assert document.sections[0].section == "Part"
    assert document.sections[0].chapter is None


def test_text_file_is_one_section_with_paragraphs_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path / "story.txt", "First paragraph.  \r\nSame paragraph.\r\n\r\n\r\n\r\nSecond paragraph.\n"
    )
    document = only(load_file(path, MAX_BYTES))
    assert document.title == "story"
    assert document.doc_type == "txt"
    assert len(document.sections) == 1
    assert document.text == "First paragraph.\nSame paragraph.\n\nSecond paragraph."


@pytest.mark.parametrize(
    ("encoded", "label"),
    [
        ("\ufeffcafé au lait".encode(), "utf-8 BOM"),
        ("café au lait".encode("utf-16"), "utf-16 BOM"),
    ],
)
def test_text_with_bom_decodes(tmp_path: Path, encoded: bytes, label: str) -> None:
    document = only(load_file(write(tmp_path / "bom.txt", encoded), MAX_BYTES))
    assert document.text == "café au lait", label


def test_gb18030_chinese_text_decodes(tmp_path: Path) -> None:
    chinese = "长城是中国古代的军事防御工程。\n\n八达岭长城位于北京。"
    path = write(tmp_path / "great_wall.txt", chinese.encode("gb18030"))
    document = only(load_file(path, MAX_BYTES))
    assert document.text == chinese


# --- HTML ----------------------------------------------------------------------------------------------


def test_html_drops_scripts_and_navigation_and_splits_sections(tmp_path: Path) -> None:
    path = write(
        tmp_path / "page.html",
        "<html><head><title>Coffee Guide</title><style>p {color: red}</style></head><body>"
        "<nav>Home | Menu</nav><script>var tracking = 1;</script>"
        "<h1>Coffee</h1><p>Coffee is\n   a drink.</p><p>It has caffeine.</p>"
        "<h2>Espresso</h2><p>Line one<br>line two</p><ul><li>Strong</li><li>Short</li></ul>"
        "<h4>Detail</h4><p>Still espresso.</p>"
        "<table><tr><td>Brazil</td><td>Arabica</td></tr></table>"
        "</body></html>",
    )
    document = only(load_file(path, MAX_BYTES))
    assert document.title == "Coffee Guide"
    assert document.doc_type == "html"
    for noise in ("tracking", "Home", "color: red"):
        assert noise not in document.text
    assert [(s.section, s.chapter) for s in document.sections] == [
        ("Coffee", "Coffee"),
        ("Espresso", "Coffee"),
    ]
    assert document.sections[0].text == "Coffee\n\nCoffee is a drink.\n\nIt has caffeine."
    espresso = document.sections[1].text
    assert "Line one\nline two" in espresso
    assert "Strong\n\nShort" in espresso
    assert "Detail\n\nStill espresso." in espresso
    assert "Brazil | Arabica" in espresso


def test_html_title_falls_back_to_first_h1(tmp_path: Path) -> None:
    path = write(tmp_path / "page.htm", "<body><h1>Tea Basics</h1><p>Tea is brewed.</p></body>")
    document = only(load_file(path, MAX_BYTES))
    assert document.title == "Tea Basics"
    assert document.sections[0].text == "Tea Basics\n\nTea is brewed."


def test_html_with_only_scripts_is_empty(tmp_path: Path) -> None:
    path = write(tmp_path / "blank.html", "<html><body><script>alert(1)</script></body></html>")
    assert "empty" in load_error(path)


# --- PDF -----------------------------------------------------------------------------------------------


def test_pdf_sections_keep_one_based_page_numbers_and_skip_blank_pages(tmp_path: Path) -> None:
    path = write(tmp_path / "leaf.pdf", pdf_bytes(["Chlorophyll absorbs light.", "", "The Calvin cycle."]))
    document = only(load_file(path, MAX_BYTES))
    assert document.doc_type == "pdf"
    assert document.title == "leaf"  # reportlab's placeholder title "untitled" is ignored
    assert [section.page for section in document.sections] == [1, 3]
    assert "Chlorophyll absorbs light." in document.sections[0].text
    assert "Calvin cycle" in document.sections[1].text


def test_pdf_without_text_layer_is_reported_as_scanned(tmp_path: Path) -> None:
    path = write(tmp_path / "scan.pdf", pdf_bytes(["", ""]))
    assert "no text layer" in load_error(path)


def test_corrupt_pdfs_are_reported_without_pypdf_log_noise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    junk = write(tmp_path / "junk.pdf", random.Random(7).randbytes(4096))
    real = pdf_bytes(["Page one text.", "Page two text."])
    truncated = write(tmp_path / "truncated.pdf", real[: len(real) // 2])
    assert load_error(junk).startswith("corrupt PDF")
    assert load_error(truncated).startswith("corrupt PDF")
    assert not [record for record in caplog.records if record.name.startswith("pypdf")]


# --- DOCX ----------------------------------------------------------------------------------------------


def test_docx_headings_make_sections_and_tables_are_kept(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("Opening words.")
    document.add_heading("Green Tea", level=1)
    document.add_paragraph("Green tea is not oxidised.")
    document.add_heading("Matcha", level=2)
    document.add_paragraph("Matcha is powdered.")
    table = document.add_table(rows=2, cols=2)
    for row, values in zip(table.rows, [("Tea", "Temperature"), ("Green", "75 C")], strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_heading("Black Tea", level=1)
    document.add_paragraph("Black tea is oxidised.")
    path = tmp_path / "tea.docx"
    document.save(str(path))

    loaded = only(load_file(path, MAX_BYTES))
    assert loaded.doc_type == "docx"
    assert loaded.title == "Green Tea"
    assert [(s.section, s.chapter) for s in loaded.sections] == [
        (None, None),
        ("Green Tea", "Green Tea"),
        ("Matcha", "Green Tea"),
        ("Black Tea", "Black Tea"),
    ]
    assert loaded.sections[2].text == "Matcha\n\nMatcha is powdered.\n\nTea | Temperature\nGreen | 75 C"


def test_docx_title_prefers_document_properties(tmp_path: Path) -> None:
    document = docx.Document()
    document.core_properties.title = "Handbook"
    document.add_heading("Chapter", level=1)
    document.add_paragraph("Body.")
    path = tmp_path / "book.docx"
    document.save(str(path))
    assert only(load_file(path, MAX_BYTES)).title == "Handbook"


def test_corrupt_docx_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "broken.docx", b"PK\x03\x04 this is not really a zip archive")
    assert load_error(path).startswith("corrupt DOCX")


# --- JSON and JSONL records ----------------------------------------------------------------------------


def jsonl(records: list[object]) -> str:
    """JSON Lines text of `records`."""
    return "\n".join(json.dumps(record) for record in records) + "\n"


RECORDS: list[object] = [
    {"_id": 7, "title": "Mars", "text": "Mars is red.", "chapter": "Planets", "page": 4, "tags": ["x"]},
    {"id": "b", "content": "Saturn has rings.", "conversation_id": "c1", "level": None},
    {"title": "No text here"},
    {"body": "Event happened.", "event": True, "doc_type": "event", "created_at": "2024-01-01"},
    "not a record",
]


def test_jsonl_records_become_documents_with_ids_titles_and_metadata(tmp_path: Path) -> None:
    path = write(tmp_path / "records.jsonl", jsonl(RECORDS[:2]) + "\n   \n" + jsonl(RECORDS[2:]))
    documents = load_file(path, MAX_BYTES)
    assert [document.doc_id for document in documents] == ["7", "b", "3"]
    mars, saturn, event = documents
    assert mars.title == "Mars"
    assert mars.text == "Mars\n\nMars is red."
    assert mars.metadata == {"chapter": "Planets", "page": 4}
    assert (mars.sections[0].page, mars.sections[0].chapter) == (4, "Planets")
    assert mars.doc_type == "record"
    assert not mars.unchunked
    assert saturn.title == "records"
    assert saturn.text == "Saturn has rings."
    assert saturn.metadata == {"conversation_id": "c1"}
    assert event.unchunked
    assert event.doc_type == "event"
    assert event.metadata == {"doc_type": "event", "created_at": "2024-01-01"}
    assert all(document.source == str(path) for document in documents)


@pytest.mark.parametrize(
    "payload",
    [
        [{"text": "One."}, {"text": "Two."}],
        {"records": [{"text": "One."}, {"text": "Two."}]},
        {"documents": [{"text": "One."}, {"text": "Two."}]},
    ],
)
def test_json_record_lists(tmp_path: Path, payload: object) -> None:
    documents = load_file(write(tmp_path / "data.json", json.dumps(payload)), MAX_BYTES)
    assert [(document.doc_id, document.text) for document in documents] == [("0", "One."), ("1", "Two.")]


def test_json_single_object_is_one_record(tmp_path: Path) -> None:
    path = write(tmp_path / "one.json", json.dumps({"doc_id": "x1", "page_content": "Alone.", "data": 3}))
    document = only(load_file(path, MAX_BYTES))
    assert (document.doc_id, document.text) == ("x1", "Alone.")


def test_records_without_text_are_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "empty_records.jsonl", jsonl([{"title": "a"}, {"text": "  "}]))
    assert "no records with text" in load_error(path)


def test_malformed_jsonl_line_fails_the_whole_file(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.jsonl", '{"text": "fine"}\n{"text": broken\n{"text": "fine"}\n')
    assert load_error(path).startswith("invalid JSON on line 2:")
    nested = write(tmp_path / "nested.json", "[" * 100_000)
    assert load_error(nested) == "invalid JSON on line 1: nested deeper than 512 levels (LOADER_MAX_DEPTH)"


def test_gzip_record_files_load(tmp_path: Path) -> None:
    lines = jsonl([{"_id": "d1", "text": "Compressed record."}, {"_id": "d2", "text": "Another."}])
    gz_lines = write(tmp_path / "corpus.jsonl.gz", gzip.compress(lines.encode()))
    assert [document.doc_id for document in load_file(gz_lines, MAX_BYTES)] == ["d1", "d2"]
    gz_json = write(tmp_path / "corpus.JSON.GZ", gzip.compress(json.dumps([{"text": "Array."}]).encode()))
    assert only(load_file(gz_json, MAX_BYTES)).text == "Array."


def test_corrupt_or_oversized_gzip_is_reported(tmp_path: Path) -> None:
    assert "corrupt gzip" in load_error(write(tmp_path / "bad.jsonl.gz", b"\x1f\x8b\x08\x00garbage"))
    bomb = write(tmp_path / "bomb.jsonl.gz", gzip.compress(jsonl([{"text": "x" * 5000}]).encode()))
    assert "too large" in load_error(bomb, max_bytes=1000)


# --- failures common to every format -------------------------------------------------------------------


def test_binary_text_files_are_rejected(tmp_path: Path) -> None:
    assert load_error(write(tmp_path / "nul.txt", b"MZ\x90\x00\x03\x00\x00\x00 program")) == (
        "binary file (not text)"
    )
    controls = bytes([1, 2, 3, 4, 5, 6, 7, 8]) * 50 + b"some words"
    assert "binary" in load_error(write(tmp_path / "controls.md", controls))


def test_undecodable_text_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "latin.txt", b"caf\xe9 au lait \xff\xfe\xfd")
    assert load_error(path).startswith("undecodable text")


@pytest.mark.parametrize("suffix", [".txt", ".md", ".html", ".pdf", ".docx", ".json", ".jsonl"])
@pytest.mark.parametrize("content", [b"", b"  \n\t\n  "])
def test_empty_files_are_rejected(tmp_path: Path, suffix: str, content: bytes) -> None:
    assert load_error(write(tmp_path / f"empty{suffix}", content)) == "empty document: no text"


def test_oversized_file_is_rejected_before_reading(tmp_path: Path) -> None:
    path = write(tmp_path / "big.txt", "word " * 300)
    assert load_error(path, max_bytes=1000) == "file too large: 1500 bytes > 1000"


def test_unsupported_suffix_is_rejected(tmp_path: Path) -> None:
    assert load_error(write(tmp_path / "image.xyz", b"data")) == "unsupported file type: .xyz"
    assert load_error(write(tmp_path / "README", "text")) == "unsupported file type: (no suffix)"


def test_missing_file_is_a_loader_error(tmp_path: Path) -> None:
    assert load_error(tmp_path / "gone.txt").startswith("unreadable file")


@pytest.mark.parametrize("suffix", sorted(SUPPORTED_SUFFIXES))
def test_random_bytes_raise_only_loader_errors(tmp_path: Path, suffix: str) -> None:
    """Whatever the bytes, a loader fails with LoaderError, never a library's own exception."""
    generator = random.Random(suffix)
    for attempt in range(5):
        path = write(tmp_path / f"noise{attempt}{suffix}", generator.randbytes(2048))
        assert load_error(path)


# --- discovery -----------------------------------------------------------------------------------------


def test_discover_files_recurses_sorted_and_skips_hidden_and_unsupported(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    expected = [
        write(root / "a.md", "a"),
        write(root / "b" / "c.pdf", b"%PDF"),
        write(root / "b" / "d" / "e.jsonl.gz", b""),
        write(root / "z.TXT", "z"),
    ]
    write(root / ".hidden.md", "secret")
    write(root / ".git" / "config.txt", "git")
    write(root / "b" / ".cache" / "x.md", "cache")
    write(root / "image.png", b"png")
    write(root / "archive.tar.gz", b"tar")
    explicit = write(tmp_path / "other.xyz", "x")

    found = discover_files([root, explicit, root / "a.md"])
    assert found == [*expected, explicit]


def test_discover_files_raises_for_missing_paths(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        discover_files([missing])


# --- the shipped sample corpus -------------------------------------------------------------------------


def test_sample_corpus_loads_without_errors() -> None:
    files = discover_files([SAMPLE_CORPUS])
    suffixes = {path.suffix for path in files}
    assert {".md", ".txt", ".html", ".pdf", ".docx", ".jsonl"} <= suffixes
    documents = [document for path in files for document in load_file(path, MAX_BYTES)]
    assert all(document.text.strip() for document in documents)
    by_title = {document.title: document for document in documents}
    assert [section.page for section in by_title["Photosynthesis"].sections] == [1, 2, 3]
    assert "Mars" in {section.section for section in by_title["The Solar System"].sections}
    assert "长城" in by_title
    assert sum(document.unchunked for document in documents) == 1
