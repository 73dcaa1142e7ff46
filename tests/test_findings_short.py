"""Findings say it short: at 80 columns no finding of any fixture takes more than 8 lines
(its head and subject, the message, the suggestion), and a finding about many values or
places lists a handful and counts the rest."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from conftest import compared
from rich.console import Console

from nsyswrap.render.table import print_findings

DATA = Path(__file__).parent / "data"
FIXTURES = sorted(p for p in [*DATA.glob("*.sqlite"), *DATA.glob("holdout/*.sqlite")])
MOST_LINES = 8


def _blocks(path: Path) -> list[str]:
    c = compared(path)
    console = Console(file=io.StringIO(), width=80, color_system=None)
    print_findings(console, c, 80)
    return [b for b in console.file.getvalue().split("\n\n")[1:] if b.strip()]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_no_finding_is_longer_than_eight_lines_at_80_columns(path):
    for block in _blocks(path):
        lines = block.strip("\n").splitlines()
        assert len(lines) <= MOST_LINES, block
        assert all(len(line) <= 80 for line in lines), block


def test_cold_start_lists_a_handful_of_values_and_counts_the_rest():
    from nsyswrap.common.units import listed

    assert listed([str(i) for i in range(120)]) == "0, 1, 2, 3 and 116 more"
    assert listed(["a", "b"]) == "a, b"
