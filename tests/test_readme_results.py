"""The README's and docs/benchmarks.md's router and QA tables say what the committed result files say.

Why: the numbers in the README and on its benchmarks page are the project's claims; they must come from
`rag eval ...` JSON files in results/, not be typed by hand. Each cell is compared with its JSON value rounded
to the decimals the document shows, so a re-run benchmark without a document update (or the reverse) fails
here. The benchmark tables live in docs/benchmarks.md (the README links to them); a table there is checked
exactly as one in the README.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any

import pytest

from evals.qa_scoring import current_names

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
#: The documents whose benchmark sections are checked, the README first.
DOCUMENTS = [README, BENCHMARKS]
RESULTS = ROOT / "results"

#: QA table column (lower case) -> key of a results/qa_<dataset>_<pipeline>.json report.
QA_COLUMNS = {
    "n": "n",
    "em": "em",
    "f1": "f1",
    "contains gold": "contains_gold",
    "accuracy": "contains_gold",
    "answer accuracy": "contains_gold",
    "acc.": "contains_gold",
    "short em": "short_em",
    "short f1": "short_f1",
    "short contains gold": "short_contains_gold",
    "short accuracy": "short_contains_gold",
    "short acc.": "short_contains_gold",
    "support r@5": "support_recall@5",
    "citation precision": "citation_precision",
    "not-found": "not_found_rate",
    "not found": "not_found_rate",
    "llm calls/q": "llm_calls_per_question",
    "tokens/q": "tokens_per_question",
    "p50 s": "latency_p50_s",
}
#: Columns every QA table must have (the rest are compared when present).
QA_REQUIRED = {"n", "em", "f1"}


def documents_text() -> str:
    """The checked documents, one after the other (each begins with its `# title`, so no section runs on
    from one document into the next's sections)."""
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)


def section(text: str, heading: str) -> str:
    """The text under the `### <heading>...` line, up to the next heading of level 1, 2 or 3."""
    match = re.search(rf"^### {re.escape(heading)}.*$", text, re.MULTILINE)
    assert match, f"neither the README nor docs/benchmarks.md has a '### {heading}' section"
    rest = text[match.end() :]
    end = re.search(r"^#{1,3} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Markdown tables of a text: (header cells lower-cased, rows of cells), cells stripped of ** marks."""
    found: list[tuple[list[str], list[list[str]]]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        if (
            lines[index].startswith("|")
            and index + 1 < len(lines)
            and re.match(r"^\|[-| :]+\|$", lines[index + 1])
        ):
            header = [cell.lower() for cell in _cells(lines[index])]
            rows: list[list[str]] = []
            index += 2
            while index < len(lines) and lines[index].startswith("|"):
                rows.append(_cells(lines[index]))
                index += 1
            found.append((header, rows))
        else:
            index += 1
    return found


def _cells(line: str) -> list[str]:
    return [cell.strip().replace("**", "") for cell in line.strip().strip("|").split("|")]


def matches(cell: str, value: Any) -> bool:
    """A README cell equals a JSON value at the README's own precision ("-" or "–" for a missing value)."""
    if cell in ("-", "–"):
        return value is None
    if value is None:
        return False
    decimals = len(cell.split(".", 1)[1]) if "." in cell else 0
    return abs(float(cell.replace(",", "")) - float(value)) <= 0.5 * 10**-decimals + 1e-9


def test_cells_compare_at_the_readme_precision() -> None:
    assert matches("0.073", 0.0727) and not matches("0.074", 0.0727)
    assert matches("1068", 1068.0) and matches("10.5", 10.495) and not matches("10.4", 10.495)
    assert matches("-", None) and not matches("-", 0.0) and not matches("0.000", None)
    header, rows = tables("x\n| a | **b** |\n|---|---|\n| 1 | **2** |\n\ny")[0]
    assert header == ["a", "b"] and rows == [["1", "2"]]


def test_readme_router_table_matches_results_router_json() -> None:
    """The router section names its file and has one row per half and source, each equal to the JSON."""
    text = section(documents_text(), "Router")
    assert "results/router.json" in text, "the README's router section must name results/router.json"
    report = json.loads((RESULTS / "router.json").read_text(encoding="utf-8"))
    candidates = [table for table in tables(text) if table[0][:2] == ["half", "source"]]
    assert candidates, "the README's router section has no '| half | source | label | n | accuracy |' table"
    header, rows = candidates[0]
    column = {name: position for position, name in enumerate(header)}
    seen: set[tuple[str, str]] = set()
    for row in rows:
        half, source = row[column["half"]], row[column["source"]]
        figures = report if half == "test" else report["dev"] if half.startswith("dev") else None
        assert figures is not None, f"unknown half {half!r} in the README's router table"
        if source == "all":
            expected = {"n": figures["n"], "accuracy": figures["heuristic_accuracy"]}
        elif source.endswith(", long with two names"):
            expected = figures["heuristic"]["long_two_names"][source.split(",")[0]]
        else:
            expected = figures["heuristic"]["per_source"][source]
        for name in ("n", "accuracy"):
            assert matches(row[column[name]], expected[name]), (
                f"README router row {half}/{source}: {name} {row[column[name]]} != {expected[name]}"
            )
        seen.add((half.split()[0], source))
    wanted = {("test", "all")} | {("test", source) for source in report["heuristic"]["per_source"]}
    assert wanted <= seen, f"README router table lacks {sorted(wanted - seen)}"


def qa_sections(text: str) -> list[str]:
    """Every section of the text whose heading starts with "### Question answering"."""
    starts = [match.end() for match in re.finditer(r"^### Question answering.*$", text, re.MULTILINE)]
    assert starts, "neither the README nor docs/benchmarks.md has a '### Question answering' section"
    found = []
    for start in starts:
        rest = text[start:]
        end = re.search(r"^#{1,3} ", rest, re.MULTILINE)
        found.append(rest[: end.start()] if end else rest)
    return found


def test_readme_qa_tables_match_results_qa_json() -> None:
    """Every row of each QA table is results/qa_<dataset>_<pipeline>.json, cell by cell."""
    for text in qa_sections(documents_text()):
        candidates = [table for table in tables(text) if table[0][:2] == ["dataset", "pipeline"]]
        assert candidates, "a README QA section has no '| dataset | pipeline | ...' table"
        header, rows = candidates[0]
        assert QA_REQUIRED <= set(header), f"QA table lacks {sorted(QA_REQUIRED - set(header))}"
        assert rows
        for row in rows:
            dataset, pipeline = row[0], row[1]
            path = RESULTS / f"qa_{dataset}_{pipeline}.json"
            assert path.is_file(), f"README QA row {dataset}/{pipeline}: no {path.relative_to(ROOT)}"
            # current_names: older files name the gold containment "accuracy"
            report = current_names(json.loads(path.read_text(encoding="utf-8")))
            for name, cell in zip(header[2:], row[2:], strict=True):
                key = QA_COLUMNS.get(name)
                if key is None:
                    continue
                assert key in report, f"{path.name} has no {key!r} for the README column {name!r}"
                assert matches(cell, report[key]), (
                    f"README QA {dataset}/{pipeline} {name}: {cell} != {report[key]}"
                )


def test_readme_qa_at_scale_table_is_generated_from_its_files() -> None:
    """The large-run table is `python -m benchmarks.report_tables <its rows' files>`, line for line
    (formatting included), so it is regenerated rather than edited after each stage."""
    from benchmarks.report_tables import readme_qa_table

    scale = next(section for section in qa_sections(documents_text()) if "pooled" in section)
    lines = [line.strip() for line in scale.splitlines() if line.startswith("| ")]
    rows = [_cells(line) for line in lines[1:] if not line.startswith("|---")]
    files = [RESULTS / f"qa_{row[0]}_{row[1]}.json" for row in rows]
    assert lines == [line for line in readme_qa_table(files) if line.startswith("| ")]


def test_the_readme_qa_table_labels_rows_by_file_name(tmp_path: Path) -> None:
    from benchmarks.report_tables import readme_qa_table

    report = {"pipeline": "no-retrieval", "n": 4, "em": 0.25, "f1": 0.5, "accuracy": 0.5}
    report |= {"short_accuracy": 0.25, "support_recall@5": None, "citation_precision": None}
    report |= {"not_found_rate": 0.0, "llm_calls_per_question": 1.0, "tokens_per_question": 99.6}
    report |= {"latency_p50_s": 1.04}
    path = tmp_path / "qa_pooled_demo_no-retrieval.json"
    path.write_text(json.dumps(report))
    header, rows = tables("\n".join(readme_qa_table([path])))[0]
    assert header[:3] == ["dataset", "pipeline", "n"]
    assert rows == [
        ["pooled_demo", "no-retrieval", "4", "0.250", "0.500", "0.500", "0.250", "–", "–", "0.000"]
        + ["1.00", "100", "1.0"]
    ]


@pytest.mark.parametrize("name", ["router.json", "model_choice.json"])
def test_the_compared_result_files_are_committed_json(name: str) -> None:
    assert isinstance(json.loads((RESULTS / name).read_text(encoding="utf-8")), dict)


def test_readme_model_table_is_the_one_of_results_models_json() -> None:
    """The embedded-model table is `python -m benchmarks.models_report results/models.json`, row for row, and
    the README names as default the model the results file chose."""
    from benchmarks.models_report import markdown_table
    from config.settings import DEFAULT_LOCAL_MODEL

    report = json.loads((RESULTS / "models.json").read_text(encoding="utf-8"))
    text = section(documents_text(), "The embedded model")
    lines = set(text.splitlines())
    missing = [line for line in markdown_table(report) if line not in lines]
    assert not missing, f"README model table lacks {missing}"
    assert report["default"] == DEFAULT_LOCAL_MODEL
    assert f"**Default: `{DEFAULT_LOCAL_MODEL}`" in text


def test_readme_prompt_table_is_the_one_of_results_prompts_json() -> None:
    from benchmarks.prompt_ablation import markdown_table

    report = json.loads((RESULTS / "prompts.json").read_text(encoding="utf-8"))
    lines = set(section(documents_text(), "Answer prompt and decoding").splitlines())
    missing = [line for line in markdown_table(report) if line not in lines]
    assert not missing, f"README prompt table lacks {missing}"


def headline_section(text: str) -> str:
    """The README's `## Headline numbers` section, up to the next heading of level 1 or 2."""
    match = re.search(r"^## Headline numbers.*$", text, re.MULTILINE)
    assert match, "the README has no '## Headline numbers' section"
    rest = text[match.end() :]
    end = re.search(r"^#{1,2} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def value_at(report: Any, key: str) -> Any:
    """The value under a dotted key of a JSON report (`modes.hybrid.ndcg@10`; a number indexes a list)."""
    for part in key.split("."):
        report = report[int(part)] if isinstance(report, list) else report[part]
    return report


def test_readme_headline_numbers_are_values_of_their_result_files() -> None:
    """The README's first screen claims only what a committed result file shows: every row of its headline
    table names a results/*.json file and a key, and the value cell is that key's value (a number at the
    README's precision, a text exactly)."""
    text = headline_section(README.read_text(encoding="utf-8"))
    candidates = [table for table in tables(text) if table[0] == ["measured", "value", "result file", "key"]]
    assert candidates, "the README's headline section has no '| measured | value | result file | key |' table"
    rows = candidates[0][1]
    assert len(rows) >= 5
    for measured, cell, file_cell, key_cell in rows:
        path = ROOT / file_cell.strip("`")
        assert path.parent == RESULTS and path.is_file(), f"headline {measured!r}: no result file {file_cell}"
        value = value_at(json.loads(path.read_text(encoding="utf-8")), key_cell.strip("`"))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert matches(cell, value), f"README headline {measured!r}: {cell} != {value} ({path.name})"
        else:
            assert cell == str(value), f"README headline {measured!r}: {cell} != {value} ({path.name})"


def test_the_benchmark_tables_are_on_the_page_the_readme_links() -> None:
    """The tables the README no longer holds are on docs/benchmarks.md, and the README links that page."""
    assert "(docs/benchmarks.md)" in README.read_text(encoding="utf-8")
    page = BENCHMARKS.read_text(encoding="utf-8")
    for heading in ("Router", "The embedded model", "Answer prompt and decoding", "Question answering"):
        assert f"### {heading}" in page, f"docs/benchmarks.md has no '### {heading}' section"


# --------------------------------------------------------------------------------------------------------
# results/ holds what the documents cite, and the documents cite only what results/ holds

#: The pages whose results/ paths must exist and which, together, cite every file of results/.
CITING_DOCUMENTS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
#: A results/ path in a page: a file, a glob (`*`), a brace list (`{stream,batch}`) or a placeholder
#: (`<dataset>`), up to the first character no such path has.
RESULT_PATH = re.compile(r"results/[\w.@{},*<>/-]*[\w*}>/]")
#: Files no page names on purpose, each with the reason it stays.
UNCITED_EXCEPTIONS = {
    "results/README.md": "the folder's own index, generated by `python -m benchmarks report`",
    "results/retrieval_ndcg.png": "drawn by `python -m benchmarks report` for results/README.md",
}


def brace_expanded(path: str) -> list[str]:
    """`a_{x,y}.json` -> [`a_x.json`, `a_y.json`] (nested lists expand one after the other)."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [
        expanded
        for choice in match.group(1).split(",")
        for expanded in brace_expanded(path[: match.start()] + choice + path[match.end() :])
    ]


def named_patterns(text: str) -> set[str]:
    """The results/ paths a page names, as fnmatch patterns (placeholders become `*`)."""
    return {
        re.sub(r"<[^<>]*>", "*", path)
        for match in RESULT_PATH.finditer(text)
        for path in brace_expanded(match.group(0))
    }


def table_run_files(text: str) -> set[str]:
    """Files a page's tables name by their run: a `| dataset | pipeline |` row is
    results/qa_<dataset>_<pipeline>.json (test_readme_qa_tables_match_results_qa_json reads them), a `| run |`
    row the run's records results/runs/<run>.jsonl and its report results/qa_<run>.json."""
    files: set[str] = set()
    for header, rows in tables(text):
        if header[:2] == ["dataset", "pipeline"]:
            files |= {f"results/qa_{row[0]}_{row[1]}.json" for row in rows}
        elif header[:1] == ["run"]:
            files |= {f"results/runs/{row[0]}.jsonl" for row in rows} | {
                f"results/qa_{row[0]}.json" for row in rows
            }
    return files


def result_files() -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in RESULTS.rglob("*") if path.is_file())


def cited_files() -> set[str]:
    """Every file of results/ a page cites: by path or pattern, by a table row, or as the records of a cited
    QA report (its `results_file`) or the QA report of cited records."""
    files = result_files()
    patterns: set[str] = set()
    cited: set[str] = set()
    for path in CITING_DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        patterns |= named_patterns(text)
        cited |= table_run_files(text)
    cited |= {name for name in files if any(fnmatch.fnmatch(name, pattern) for pattern in patterns)}
    for name in files:
        if not (name.startswith("results/qa_") and name.endswith(".json")):
            continue
        records = json.loads((ROOT / name).read_text(encoding="utf-8")).get("results_file")
        if name in cited and records:
            cited.add(records)
        elif records in cited:
            cited.add(name)
    return cited


def test_brace_lists_and_placeholders_become_patterns() -> None:
    text = (
        "see `results/load_answer_{stream,batch}_clients{1,4}.json` and results/qa_<dataset>_<pipeline>.json."
    )
    assert named_patterns(text) == {
        "results/load_answer_stream_clients1.json",
        "results/load_answer_stream_clients4.json",
        "results/load_answer_batch_clients1.json",
        "results/load_answer_batch_clients4.json",
        "results/qa_*_*.json",
    }


def test_every_results_path_the_documents_name_exists() -> None:
    files = result_files()
    missing = []
    for path in CITING_DOCUMENTS:
        for pattern in sorted(named_patterns(path.read_text(encoding="utf-8"))):
            if pattern.rstrip("/") in ("results", "results/runs") or (ROOT / pattern).is_dir():
                continue
            if not any(fnmatch.fnmatch(name, pattern) for name in files):
                missing.append(f"{path.relative_to(ROOT)}: {pattern}")
    assert not missing, f"results/ paths named in the documents that match no file: {missing}"


def test_results_holds_no_file_no_document_cites() -> None:
    uncited = [
        name for name in result_files() if name not in cited_files() and name not in UNCITED_EXCEPTIONS
    ]
    assert not uncited, (
        f"results/ files no README/docs page cites (cite them, delete them, or list them in "
        f"UNCITED_EXCEPTIONS with a reason): {uncited}"
    )
