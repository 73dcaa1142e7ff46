"""The README tells the truth: what it quotes of nsyswrap's output is what nsyswrap prints
for the reports it names, its exit-code table is the code's, and it stays a page a
newcomer reads in minutes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nsyswrap.cli import EXIT_BROKEN_PIPE, EXIT_FINDINGS, EXIT_INTERRUPTED
from nsyswrap.common import errors

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# The width the quoted output was made at.
QUOTE_COLUMNS = "100"


def _blocks() -> list[list[str]]:
    """The fenced blocks' lines (a fence opens with ``` and an optional language)."""
    blocks, inside = [], None
    for line in README.splitlines():
        if line.startswith("```"):
            if inside is None:
                inside = []
            else:
                blocks.append(inside)
                inside = None
        elif inside is not None:
            inside.append(line)
    return blocks


def _quotes() -> list[list[str]]:
    return [b for b in _blocks() if b and b[0].startswith("$ nsyswrap compare")]


def test_the_readme_is_a_page_not_a_diary():
    assert len(README.splitlines()) <= 250
    assert "pip install . && nsyswrap compare" in README
    assert "bash scripts/test.sh" in README


@pytest.mark.parametrize("block", _quotes(), ids=lambda b: b[0])
def test_quoted_output_is_what_nsyswrap_prints(block):
    """Every quoted line, in order ('...' skips lines), as nsyswrap prints it today."""
    args = block[0].split()[2:]  # after "$ nsyswrap"
    out = subprocess.run([sys.executable, "-m", "nsyswrap", *args], cwd=ROOT,
                         capture_output=True, text=True,
                         env=dict(os.environ, COLUMNS=QUOTE_COLUMNS), check=True).stdout
    lines = [ln.rstrip() for ln in out.splitlines()]
    at = 0
    for quoted in block[1:]:
        if quoted.strip() == "...":
            continue
        assert quoted.rstrip() in lines[at:], f"not printed (in this order): {quoted!r}"
        at = lines.index(quoted.rstrip(), at) + 1


def test_the_seed_story_quotes_the_reports_numbers():
    """The numbers the 'Why' bullets give are the ones nsyswrap prints for the report."""
    why = README[README.index("Why, from the trace"):README.index("## Set-up")]
    out = subprocess.run([sys.executable, "-m", "nsyswrap", "compare",
                          "tests/data/h100_user_seed.sqlite"], cwd=ROOT, capture_output=True,
                         text=True, env=dict(os.environ, COLUMNS="200"), check=True).stdout
    quoted = set(re.findall(r"(?<![–\d.])\d+(?:\.\d+)? (?:µs|ms)", why))
    assert len(quoted) >= 6
    for number in quoted:
        assert number in out, number
    for code in re.findall(r"\(([A-Z_]+)\)", why):
        assert code in out, code


def test_the_exit_codes_table_is_the_codes():
    table = README[README.index("Exit codes"):]
    rows = re.findall(r"^\| *(\S+) *\|", table.split("\n\n")[1], re.M)
    codes = [r for r in rows if r != "code" and not r.startswith("---")]
    assert codes == ["0", "1", "2", "3", "130", "141", "N"]
    assert errors.NsysWrapError.exit_code == 1
    assert errors.BadInputError.exit_code == 2
    assert (EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE) == (3, 130, 141)
    # Each is exercised for real: tests/test_exit_codes.py (0, 1, 2, 3, 141),
    # tests/test_run.py (130, the workload's own code).
    tested = (ROOT / "tests" / "test_exit_codes.py").read_text() + \
        (ROOT / "tests" / "test_run.py").read_text()
    assert "EXIT_FINDINGS" in tested and "EXIT_BROKEN_PIPE" in tested and "130" in tested
