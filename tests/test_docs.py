"""The documentation describes the product as it is: no development diary in the README, the
docs or the code, every docs/*.md file that the code or the docs point to exists (with the
section they name), and the HTML pages point a reader who installed the package with pip to
what that reader has, not to the repository's docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import DATA, DEMO

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"

# "stop 14", "stops 19 and 20", "Since (stop 29)": the development sessions' numbering.
# (nsys's own `stop-shutdown` capture-range option is not one.)
STOPS = re.compile(r"(?<![-\w])stops? [0-9]+|\(stop\b(?!-)", re.IGNORECASE)

# A doc's path as the code and the README write it (docs/ and the file's name); not
# ../shared/docs/, which is outside the repository.
DOC_PATH = re.compile(r"(?<![\w./-])docs/([\w.-]+\.md)")
# Inside docs/, a sibling by its bare name: `performance.md`.
SIBLING = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")
# A doc's path, then "Section" after a comma or a space, the quote possibly wrapped onto a
# comment line of its own.
SECTION = re.compile(r'docs/([\w.-]+\.md)(?:,\s*|\s+)(?:#\s*)?"([^"]{1,80})"')


def _text_files() -> list[Path]:
    """README.md, every doc, and the code and scripts (text only: not the vendored bundles
    or the bundled report)."""
    files = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    files += sorted(p for p in (ROOT / "nsyswrap").rglob("*.py"))
    files += sorted(p for p in (ROOT / "scripts").rglob("*") if p.suffix in (".py", ".sh"))
    return files


def _referring_files() -> list[Path]:
    return [*_text_files(), *sorted((ROOT / "tests").glob("*.py")), ROOT / "pyproject.toml"]


def _headings(doc: Path) -> list[str]:
    """What a reference may name in a doc: its headings, and the bold words that open a
    paragraph or an item (architecture.md's sections, nsys-quirks.md's items)."""
    out = []
    for line in doc.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#+\s+(.*)", line)
        bold = re.match(r"(?:- )?\*\*(.+?)\*\*", line.strip())
        out += [m.group(1) for m in (heading, bold) if m]
    return out


def test_no_development_stops_in_readme_docs_or_code():
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
            for path in _text_files()
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if STOPS.search(line)]
    assert not hits, "development history (say what is, with its command):\n" + "\n".join(hits)


def test_the_regex_finds_the_ways_stops_were_written():
    for text in ("stop 14's code", "docs/performance.md, stop 17", "Since (stop 29)",
                 "(stops 19 and 20)", "measured at Stop 3"):
        assert STOPS.search(text), text
    for text in ("--capture-range-end=stop-shutdown", "(stop-shutdown, repeat-shutdown:N)",
                 "nsys stops the program", "stopped 8 s in", "a non-stop 5 s run"):
        assert not STOPS.search(text), text


def test_every_doc_the_code_and_the_docs_point_to_exists():
    missing = []
    for path in _referring_files():
        text = path.read_text(encoding="utf-8")
        names = set(DOC_PATH.findall(text))
        if path.parent == DOCS:
            names |= {n for n in SIBLING.findall(text) if n != "README.md"}
        missing += [f"{path.relative_to(ROOT)}: docs/{n}" for n in sorted(names)
                    if not (DOCS / n).is_file()]
    assert not missing, "\n".join(missing)


def test_every_section_named_in_a_doc_reference_exists():
    missing = []
    for path in _referring_files():
        for name, section in SECTION.findall(path.read_text(encoding="utf-8")):
            section = " ".join(re.sub(r"\n\s*#?\s*", " ", section).split())
            doc = DOCS / name
            if doc.is_file() and not any(h.startswith(section) for h in _headings(doc)):
                missing.append(f"{path.relative_to(ROOT)}: docs/{name}, \"{section}\"")
    assert not missing, "\n".join(missing)


def _footer(page: str) -> str:
    return re.search(r"<footer>(.*?)</footer>", page, re.S).group(1)


def test_the_pages_footers_explain_the_findings_and_name_no_repository_file():
    from nsyswrap.comparison.single import compare
    from nsyswrap.multi import compare_ranks, diff_reports
    from nsyswrap.render import render
    from nsyswrap.render.multi import render_diff, render_ranks

    ranks = [DATA / f"h200x2_ddp_straggler.rank{r}.sqlite" for r in (0, 1)]
    pages = {
        "compare": render(compare(DEMO), "html"),
        "ranks": render_ranks(compare_ranks(ranks, jobs=1), "html"),
        "diff": render_diff(diff_reports(DATA / "h100_diff_base.sqlite",
                                         DATA / "h100_diff_slow.sqlite", jobs=1), "html"),
    }
    for kind, page in pages.items():
        footer = _footer(page)
        assert "docs/" not in footer and ".md" not in footer, kind
        command = "diff" if kind == "diff" else "compare"
        assert f"<code>nsyswrap {command} --help</code> lists the thresholds" in footer, kind
    assert "A finding names what distorts a timing" in _footer(pages["compare"])


@pytest.mark.parametrize("doc", sorted(p.name for p in DOCS.glob("*.md")))
def test_docs_have_no_diary_words(doc):
    """Docs say what is: no "Since (...)" sections, no "previously", no "used to"."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    found = re.findall(r"^#+ Since\b.*|\bpreviously\b|\bused to\b|\bno longer\b(?! than)",
                       text, re.IGNORECASE | re.MULTILINE)
    assert not found, found
