"""The terminal tables fit the terminal: at 100 and 120 columns no line is longer than the
width and no column header is cut (numbers never wrap; short headers have a legend)."""

from __future__ import annotations

import pytest
from conftest import DATA

import nsyswrap
from nsyswrap.render import render
from nsyswrap.render.views import BENCHMARK_COLUMNS, FINDING_COLUMNS, RANGE_COLUMNS

REPORTS = [DATA / "h100_torch_train.sqlite", DATA / "h100_harness_clock.sqlite",
           DATA / "cpu2022_families.sqlite", DATA / "h100_interrupted_lost.sqlite",
           DATA.parents[1] / "examples" / "reports" / "scenarios-h100.sqlite"]


def _header_lines(text: str, columns) -> list[str]:
    first = columns[0].header
    return [ln for ln in text.splitlines() if ln.lstrip().startswith(first + " ")]


@pytest.mark.parametrize("width", [100, 120])
@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_fits_and_headers_whole(path, width):
    text = render(nsyswrap.compare(path), "table", width=width)
    too_long = [ln for ln in text.splitlines() if len(ln) > width]
    assert not too_long, too_long[:3]
    headers = 0
    for columns in (RANGE_COLUMNS, BENCHMARK_COLUMNS, FINDING_COLUMNS):
        for line in _header_lines(text, columns):
            headers += 1
            words = line.split()
            for col in columns:  # each header appears whole, in order
                for w in col.header.split():
                    assert w in words, (col.header, line)
    assert headers >= 2  # the ranges table and the findings at least
