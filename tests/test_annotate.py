"""nsyswrap.annotate and mark: as a decorator with or without parentheses, on coroutines,
and a colour checked when the range is made."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_nsys, sql

import nsyswrap
from nsyswrap.instrument.annotate import COLOR_NAMES


def test_a_decorator_without_parentheses_keeps_the_function():
    @nsyswrap.annotate
    def bare(x):
        """Doubles."""
        return x * 2

    assert bare(3) == 6
    assert bare.__name__ == "bare" and bare.__doc__ == "Doubles."

    @nsyswrap.annotate(domain="d", color="green")
    def named(x):
        return x + 1

    assert named(1) == 2


def test_a_coroutine_function_stays_one():
    @nsyswrap.annotate
    async def fetch(x):
        await asyncio.sleep(0)
        return x

    @nsyswrap.annotate("load", domain="d")
    async def load():
        return "loaded"

    assert inspect.iscoroutinefunction(fetch) and inspect.iscoroutinefunction(load)
    assert asyncio.run(fetch(5)) == 5 and asyncio.run(load()) == "loaded"


@pytest.mark.parametrize("color", ["chartreuse", "", "0x00ff00", -1, 2**32, 1.5, True, [1]])
def test_a_bad_colour_is_refused_where_it_is_given(color):
    for make in (lambda: nsyswrap.annotate("x", color=color),
                 lambda: nsyswrap.mark("x", color=color)):
        with pytest.raises(ValueError) as e:
            make()
        message = str(e.value)
        assert "\n" not in message and repr(color) in message
        assert all(name in message for name in COLOR_NAMES) and "0xRRGGBB" in message


@pytest.mark.parametrize("color", [None, *COLOR_NAMES, 0, 0x76B900, 0xFF76B900])
def test_good_colours_are_taken(color):
    with nsyswrap.annotate("x", color=color):
        pass
    nsyswrap.mark("x", color=color)


@pytest.mark.nsys
@needs_nsys
def test_coroutines_that_interleave_keep_their_own_ranges(tmp_path):
    """Under nsys 2022.4: two coroutines on one thread, the first to start ending first.
    Each range lasts as long as its own coroutine (start/end ranges: a push/pop pair would
    have ended `short`'s range at 30 ms and `long`'s at 10); the bare decorator names the
    range after the function."""
    workload = Path(__file__).parent / "workloads" / "async_ranges.py"
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", tmp_path / "r",
                           "--trace", "nvtx", "--format", "json", workload],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "async_ranges: done" in proc.stderr
    rows = sql(tmp_path / "r" / "async_ranges.sqlite",
               "SELECT coalesce(e.text, s.value), e.eventType, e.end - e.start "
               "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
               "WHERE e.eventType IN (59, 60) ORDER BY e.start")
    ranges = {name: (kind, ns) for name, kind, ns in rows}
    assert ranges["short"][0] == ranges["long"][0] == 60  # start/end ranges
    assert 10e6 <= ranges["short"][1] < 25e6 and 30e6 <= ranges["long"][1] < 60e6
    assert ranges["bare"][0] == 59 and ranges["bare"][1] >= 5e6  # push/pop
