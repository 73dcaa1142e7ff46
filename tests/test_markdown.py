"""Markdown output keeps hostile names as plain text (cpu2022_hostile.sqlite: range and domain
names with HTML, a closing </script>, quotes, newlines, pipes and Markdown syntax; a real
export made by scripts/make_fixtures_cpu.sh). GitHub renders raw HTML in comments, `|` ends a
table cell and a newline ends a row."""

from __future__ import annotations

import html
import re

from conftest import DATA, compared, sql

from nsyswrap.render import render

HOSTILE = DATA / "cpu2022_hostile.sqlite"
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _names() -> set[str]:
    return {n for (n,) in sql(HOSTILE, "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e "
                                       "LEFT JOIN StringIds s ON s.id = e.textId "
                                       "WHERE e.eventType = 59")}


def test_tables_keep_their_shape():
    text = render(compared(HOSTILE), "markdown")
    lines = text.splitlines()
    tables = 0
    for i, line in enumerate(lines):
        if re.fullmatch(r"\|(-+:?\|)+", line):  # the rule under a header
            tables += 1
            cells = len(UNESCAPED_PIPE.findall(line))
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert len(UNESCAPED_PIPE.findall(lines[j])) == cells, lines[j]
                j += 1
            assert j > i + 1  # the table has rows
    assert tables >= 2


def test_no_markup_and_every_name_recoverable():
    text = render(compared(HOSTILE), "markdown")
    assert "<img" not in text and "<script" not in text and "</script" not in text
    assert "<b " not in text
    # Undoing the escapes gives back every range name (control characters as \xNN, newlines
    # and tabs too; a counter-named range as its family `=step {n}`; without the zero-width
    # spaces that keep `@` from mentioning).
    plain = html.unescape(re.sub(r"\\(.)", r"\1", text)).replace("\u200b", "")
    for name in _names():
        shown = CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", name)
        assert shown in plain or re.sub(r"\d+$", "{n}", shown) in plain, name
    assert "\x1b" not in text
    # Suggestions are one list item per line.
    items = [ln for ln in text.splitlines() if ln.startswith("- **")]
    assert items and all("alert(" not in ln or "&lt;" in ln for ln in items)
