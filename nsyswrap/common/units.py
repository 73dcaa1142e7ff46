"""Readable numbers for messages and tables."""

from __future__ import annotations

import math


def fmt_ns(ns: float | None) -> str:
    """1234 -> '1.23 µs'; None/NaN -> '–'."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "–"
    ns = float(ns)
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{sign}{_three_digits(ns / scale)} {unit}"
    return f"{sign}{ns:.0f} ns"


def _three_digits(x: float) -> str:
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_bytes(n: float | None) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "–"
    n = float(n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{_three_digits(n / scale)} {unit}"
    return f"{n:.0f} B"


def fmt_share(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.1f}%"


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural_word or word + 's')}"


# Values a message lists at most: the rest are counted (the evidence holds them all).
LISTED_VALUES = 4


def listed(texts: list[str], most: int = LISTED_VALUES) -> str:
    """'a, b, c, d and 116 more': a message's example values, a handful at most."""
    if len(texts) <= most:
        return ", ".join(texts)
    return f"{', '.join(texts[:most])} and {len(texts) - most} more"
