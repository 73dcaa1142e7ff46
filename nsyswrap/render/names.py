"""Readable names: C++ demangled kernel names run to hundreds of characters, and any name
from a report may hold control characters."""

from __future__ import annotations

import re

# Characters a terminal, a spreadsheet or an editor acts on rather than shows: C0 controls
# (ESC starts the sequences that recolour a terminal, retitle its window or move its
# cursor), DEL, C1 controls (U+009B is a one-character CSI), Unicode's line separators and
# the bidirectional marks that reorder the text around them. Newline and tab stay: each
# format deals with those.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e"
                       "\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with its control characters shown as escapes (ESC as `\\x1b`, U+202E as
    `\\u202e`), for every format a person reads: the terminal, Markdown, CSV, HTML."""
    return _CONTROLS.sub(_escape_control, text)


def _escape_control(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_NOISE = (
    (re.compile(r"^void "), ""),
    (re.compile(r"\(anonymous namespace\)::|<unnamed>::"), ""),
    (re.compile(r"\bat::native::|\bc10::|\bstd::"), ""),
    (re.compile(r"\[lambda\([^)]*\) \(instance \d+\)\]"), "λ"),
    (re.compile(r"\(int\)|\(unsigned long\)|\(bool\)"), ""),
    (re.compile(r"::operator \(\)\(\) const"), ""),
)
_PARENS = re.compile(r"\([^()]*\)")
_LAMBDAS = re.compile(r"(?:::λ)+")


def shorten(name: str, width: int = 60) -> str:
    """'void at::native::vectorized_elementwise_kernel<(int)4, FillFunctor<float>, ...>(int, T2)'
    -> 'vectorized_elementwise_kernel<4, FillFunctor<…>, array<…>>' within `width`."""
    s = _strip_params(printable(name))  # escaped first: `width` counts what is shown
    for pattern, repl in _NOISE:
        s = pattern.sub(repl, s)
    while _PARENS.search(s):  # nested signatures inside template arguments
        s = _PARENS.sub("", s)
    s = _LAMBDAS.sub("::λ", s)
    s = _collapse_templates(s, keep_depth=1)
    if len(s) > width:
        s = s[: width - 1] + "…"
    return s


def _strip_params(name: str) -> str:
    """Drop a trailing '(...)' parameter list, balancing parentheses from the end."""
    s = name.rstrip()
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        if s[i] == ")":
            depth += 1
        elif s[i] == "(":
            depth -= 1
            if depth == 0:
                return s[:i] if i > 0 else s
    return s


def _collapse_templates(s: str, keep_depth: int) -> str:
    """Replace template arguments nested deeper than `keep_depth` with '…'."""
    out = []
    depth = 0
    for ch in s:
        if ch == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("<…")
            if depth <= keep_depth:
                out.append(ch)
            continue
        if ch == ">":
            if depth <= keep_depth:
                out.append(ch)
            elif depth == keep_depth + 1:
                out.append(">")
            depth = max(depth - 1, 0)
            continue
        if depth <= keep_depth:
            out.append(ch)
    return "".join(out)
