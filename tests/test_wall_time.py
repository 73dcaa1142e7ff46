"""A range's length on the host is wall time (sleeps and waits included), and every output
calls it that: the tables' column, the findings' words, diff's metric."""

from __future__ import annotations

import statistics

import pytest
from conftest import CPU_2022, sql

import nsyswrap
from nsyswrap.common.units import fmt_ns
from nsyswrap.comparison.single import compare
from nsyswrap.render import render


@pytest.fixture(scope="module")
def cpu():
    return compare(nsyswrap.load(CPU_2022))


def _lengths_ns(name: str) -> list[int]:
    return [e - s for s, e in sql(
        CPU_2022, "SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON "
        "s.id = e.textId WHERE coalesce(e.text, s.value) = ? AND e.eventType IN (59, 60) "
        "ORDER BY e.start", (name,))]


def test_a_sleeping_range_shows_its_wall_time(cpu):
    # `load` sleeps 1 ms (usleep) and does nothing else: all of its time is wall time.
    lengths = _lengths_ns("load")
    assert len(lengths) == 3 and min(lengths) >= 1_000_000
    table = render(cpu, "table", width=120)
    header = next(line for line in table.splitlines() if line.lstrip().startswith("Range"))
    assert header.split()[:3] == ["Range", "N", "Wall"] and "CPU" not in header
    row = next(line for line in table.splitlines() if line.lstrip().startswith("load "))
    assert row.split()[2:4] == fmt_ns(statistics.median(lengths)).split()
    assert "Wall: median wall time" in table
    assert "| median wall time |" in render(cpu, "markdown")


def test_findings_say_wall_time(cpu):
    cold = next(f for f in cpu.findings if f.code == "COLD_START")
    first = _lengths_ns("iteration")[0]
    assert f"took {fmt_ns(first)} of wall time" in cold.message
    assert not any("CPU time" in f.message for f in cpu.findings)


def test_the_trace_names_a_range_s_wall_time(cpu):
    import json

    doc = json.loads(render(cpu, "trace"))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    loads = [e["args"] for e in events if e.get("name") == "load" and e.get("ph") == "X"]
    assert sorted(a["wall_ns"] for a in loads) == sorted(_lengths_ns("load"))
    assert not any("cpu_ns" in a for a in loads)
