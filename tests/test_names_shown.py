"""Names from a report as every format shows them, and nsyswrap's own messages:
a newline in a range name forges no table row, an escape sequence never reaches the
terminal, Markdown for a pull-request comment neither mentions (`@team`) nor links, and a
name of megabytes is cut where it is shown (its whole length said) and kept whole in JSON.

The report is the hostile-name export (cpu2022_hostile.sqlite: a real nsys 2022.4 capture of
scripts/workloads/cpu_hostile.c, whose names already hold a newline and escape sequences),
copied into tmp_path with two range names rewritten by sqlite3: one with a mention, a URL
and a `www.` name, and the cold-start family's (shown in the findings, the tables and a
timeline) as five million characters."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from browser import load_page
from conftest import CPU_HOSTILE, needs_browser, sql

import nsyswrap
from nsyswrap.common.progress import TerminalProgress
from nsyswrap.render import render

MENTION_NAME = "ping @team: see https://example.com/x and www.example.org"
BIG_PREFIX = "big"
NEWLINE_NAME = "line one\nline two\r\ttab"  # as cpu_hostile.c names it
NEWLINE_SHOWN = "line one\\x0aline two\\x0d\\x09tab"
TERMINAL_ACTIONS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # any control but tab


@pytest.fixture(scope="module")
def crafted(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("names") / "names.sqlite"
    shutil.copy2(CPU_HOSTILE, path)
    con = sqlite3.connect(path)
    with con:
        con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text = '@SUM(1+1)'", (MENTION_NAME,))
        # The cold-start family: its ranges in the hostile domain (eventType 59, push/pop).
        con.execute("UPDATE NVTX_EVENTS SET text = ? || replace(hex(zeroblob(2500000)), '00',"
                    " 'ab') WHERE text = '<img src=x onerror=alert(1)>' AND eventType = 59",
                    (BIG_PREFIX,))
    con.close()
    return path


@pytest.fixture(scope="module")
def big_length(crafted) -> int:
    (n,), = sql(crafted, "SELECT DISTINCT length(text) FROM NVTX_EVENTS WHERE text LIKE 'big%'")
    return n


@pytest.fixture(scope="module")
def label_length(crafted, big_length) -> int:
    """The length of the big range's label, DOMAIN:NAME."""
    (domain,), = sql(crafted, "SELECT DISTINCT d.text FROM NVTX_EVENTS d JOIN NVTX_EVENTS e "
                              "ON e.domainId = d.domainId WHERE d.eventType = 75 "
                              "AND e.text LIKE 'big%'")
    return len(domain) + 1 + big_length


@pytest.fixture(scope="module")
def comparison(crafted):
    return nsyswrap.compare(crafted)


@pytest.fixture(scope="module")
def shown(comparison) -> dict[str, str]:
    """Each format a person reads, and JSON."""
    return {"table": render(comparison, "table", width=160),
            "markdown": render(comparison, "markdown"),
            "csv": render(comparison, "csv", section="ranges"),
            "html": render(comparison, "html"),
            "json": render(comparison, "json")}


def test_a_newline_in_a_name_forges_no_table_row(shown):
    table = shown["table"].splitlines()
    assert not any(line.startswith("line two") for line in table)  # a row of its own
    row = next(line for line in table if line.startswith("line one"))
    assert row.startswith(NEWLINE_SHOWN)  # the whole name on its line
    markdown = shown["markdown"].splitlines()
    assert not any(line.startswith("line two") for line in markdown)
    assert any(NEWLINE_SHOWN.replace("\\", "\\\\") in line for line in markdown)
    cells = [cell for row in csv.reader(io.StringIO(shown["csv"])) for cell in row]
    assert NEWLINE_SHOWN in cells and not any("\n" in c or "\r" in c for c in cells)
    assert NEWLINE_SHOWN in shown["html"]
    names = {r["name"] for r in json.loads(shown["json"])["ranges"]}
    assert NEWLINE_NAME in names  # the data, whole


def test_markdown_neither_mentions_nor_links(shown):
    text = shown["markdown"]
    assert not re.search(r"@\w", text)  # every @name of the report, @dom and @SUM too
    assert not re.search(r"(?i)\b[a-z][a-z0-9+.-]*://", text)  # no bare URL
    assert not re.search(r"(?i)\bwww\.", text)
    # The text still reads the same: only zero-width spaces came in.
    plain = text.replace("&#8203;", "")
    assert "ping @team: see https://example.com/x and www.example.org" in plain


def test_a_name_of_megabytes_is_cut_where_shown_and_whole_in_json(shown, big_length,
                                                                   label_length):
    assert big_length == 5_000_003
    # Tables and pages name a range as domain:name; CSV has the name in a column of its own.
    for fmt in ("table", "markdown", "csv", "html"):
        assert len(shown[fmt]) < 1_000_000, fmt  # the page's Vega bundles are ~0.8 MB
        # Without white space: the terminal wraps a long word over lines.
        text = re.sub(r"\s+", "", shown[fmt])
        length = big_length if fmt == "csv" else label_length
        assert f"…({length:,}characters)" in text, fmt
        longest = max(len(run) for run in re.findall(r"big(?:ab)+", text))
        assert longest <= 4000, fmt
    names = [r["name"] for r in json.loads(shown["json"])["ranges"]]
    assert any(n.startswith(BIG_PREFIX) and len(n) == big_length for n in names)


@pytest.mark.browser
@needs_browser
def test_the_page_shows_the_names_cut_and_escaped_in_chromium(shown, tmp_path, label_length,
                                                              chromium):
    page = tmp_path / "names.html"
    page.write_text(shown["html"], encoding="utf-8")
    load = load_page(page, chromium=chromium)
    assert load.errors == [] and load.requests == [] and load.dialogs == []
    assert load.facts["failed"] == 0 and load.facts["timeline_drawn"] >= 1
    text = load.facts["text"]
    assert f"… ({label_length:,} characters)" in text and NEWLINE_SHOWN in text
    assert max(len(run) for run in re.findall(r"big(?:ab)+", text)) <= 4000


def _cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsyswrap", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_messages_on_stderr_show_control_characters_as_escapes(tmp_path):
    # A report named with an OSC sequence that retitles the terminal, and a newline.
    name = "r\x1b]0;pwned\x07\nforged.sqlite"
    shutil.copy2(CPU_HOSTILE, tmp_path / name)
    done = _cli("compare", name, "--format", "markdown", "-o", "out\x1b[31m.md", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    missing = _cli("compare", "gone\x1b]0;pwned\x07.sqlite", cwd=tmp_path)
    assert missing.returncode == 2
    for stderr in (done.stderr, missing.stderr):
        assert not TERMINAL_ACTIONS.search(stderr.rstrip("\n")), stderr
        assert all(line.startswith("nsyswrap: ") for line in stderr.splitlines()), stderr
    assert "wrote markdown to out\\x1b[31m.md" in done.stderr
    assert "gone\\x1b]0;pwned\\x07.sqlite" in missing.stderr


def test_progress_steps_show_file_names_as_text():
    from rich.console import Console

    buf = io.StringIO()
    steps = TerminalProgress(Console(file=buf, force_terminal=True, width=200))
    with steps.step("loading [bold]x\x1b]0;pwned\x07.sqlite"):
        pass
    out = buf.getvalue()
    assert "\x1b]0;pwned" not in out and "\\x1b]0;pwned\\x07" in out
    assert "[bold]x" in out  # as text, not rich's markup
