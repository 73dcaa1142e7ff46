"""Readable names: C++ demangled kernel names run to hundreds of characters, and any name
from a report may hold control characters."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable

# Characters a terminal, a spreadsheet or an editor acts on rather than shows: C0 controls
# (ESC starts the sequences that recolour a terminal, retitle its window or move its
# cursor; a newline in a name would start a row of its own in a table, a forged one), DEL,
# C1 controls (U+009B is a one-character CSI), Unicode's line separators and the
# bidirectional marks that reorder the text around them.
# (As the body of a regular expression's character class.)
CONTROL_CHARACTERS = "\x00-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[{CONTROL_CHARACTERS}]")
# The most characters of one text shown: a name of millions of characters (a range named
# from a buffer) would make each table row, page and cell that shows it as long. Real names
# stay whole: demangled kernel names reach 1,400 characters (the H100 fixtures' CUTLASS and
# PyTorch kernels), and --full-names shows them so. JSON and the trace keep names whole.
SHOWN_LIMIT = 4000


def capped(text: str, limit: int = SHOWN_LIMIT) -> str:
    """`text`, or where it is longer than `limit` characters its first `limit` and its whole
    length ('abc… (5,000,000 characters)'): for names that travel as data into a page's
    charts, as they are otherwise."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}{ELLIPSIS} ({len(text):,} characters)"


def printable(text: str, limit: int = SHOWN_LIMIT) -> str:
    """`text` as it may be shown to a person, in every format a person reads (the terminal,
    Markdown, CSV, HTML, nsyswrap's messages): its control characters as escapes (ESC as
    `\\x1b`, a newline as `\\x0a`, U+202E as `\\u202e`), and capped at `limit`
    characters (`capped`; the length counts the text's own characters, not its escapes)."""
    return _CONTROLS.sub(_escape_control, capped(text, limit))


def _escape_control(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_NOISE = (
    (re.compile(r"^void "), ""),
    (re.compile(r"\(anonymous namespace\)::|<unnamed>::"), ""),
    (re.compile(r"\bat::native::|\bc10::|\bstd::|\btemplates::cuda::"), ""),
    (re.compile(r"(?<=[<,] )void |(?<=<)void "), ""),  # a function template's, as an argument
    (re.compile(r"\[lambda\([^)]*\) \(instance \d+\)\]"), "λ"),
    (re.compile(r"\(int\)|\(unsigned long\)|\(bool\)"), ""),
    (re.compile(r"::operator \(\)\(\) const"), ""),
)
_PARENS = re.compile(r"\([^()]*\)")
_LAMBDAS = re.compile(r"(?:::λ)+")
ELLIPSIS = "…"
_MIDDLE_CUT_HEAD = 16  # characters a name cut in the middle keeps of its start, at least


def short_names(names: Iterable[str], width: int = 60, cut: bool = True) -> dict[str, str]:
    """Each of `names` (C++ kernel signatures) shortened ('void at::native::vectorized_
    elementwise_kernel<(int)4, at::native::FillFunctor<float>, std::array<char *, (unsigned
    long)1>>(int, T2, T3)' -> 'vectorized_elementwise_kernel<4, FillFunctor<…>,
    array<…>>': no return type, namespaces of PyTorch and the standard library, casts or
    parameters; templates nested deeper than one level as '<…>') and told apart: no
    shortened name could stand for another of `names` (each '…' read as any text), so
    distinct names stay distinct. Where two read alike, the template arguments that tell
    them apart are shown ('vectorized_elementwise_kernel<4, FillFunctor<float>, …>' and
    '...<4, FillFunctor<signed char>, …>'). Within `width` by leaving out arguments, from
    the end, then (`cut`) by cutting the end (or the middle, where the end tells it
    apart); a name that cannot be told apart within `width` stays longer. Names that
    differ only in what shortening drops get their parameter lists, else ' [2]', ' [3]'."""
    parsed = [_Name(n) for n in dict.fromkeys(names)]
    index = _Index([n.whole_text for n in parsed])
    shown = {n.full: _fit(n, index, width, cut) for n in parsed}
    return _numbered(shown, {n.full: n for n in parsed})


class _Index:
    """The names' whole texts (every template open), sorted, to ask which ones a shortened
    text could stand for."""

    def __init__(self, texts: list[str]):
        self.texts = sorted(set(texts))

    def ambiguous(self, shown: str, own: str) -> bool:
        """Whether `shown` (its '…' read as any text) could stand for a whole text other
        than `own`."""
        pieces = shown.split(ELLIPSIS)
        if len(pieces) == 1:
            return shown != own and shown in self.texts
        start, end = pieces[0], pieces[-1]
        middle = [p for p in pieces[1:-1] if p]
        pattern = None
        for text in self.texts[bisect_left(self.texts, start):]:
            if not text.startswith(start):
                break
            # Cheap tests first: most texts fail them and never reach the pattern.
            if text == own or not text.endswith(end) or not all(p in text for p in middle):
                continue
            pattern = pattern or re.compile(".*".join(map(re.escape, pieces)), re.DOTALL)
            if pattern.fullmatch(text):
                return True
        return False


def _fit(name: _Name, index: _Index, width: int, cut: bool) -> str:
    """`name` shortened and told apart (short_names): open the templates that tell it
    apart, leave out arguments from the end while it stays told apart, then (`cut`)
    cut."""
    own = name.whole_text
    text = name.text()
    while index.ambiguous(text, own):
        closed = name.closed_templates()
        if not closed:
            break
        name.opened.add(closed[0])
        text = name.text()
    # Again while it helps: an argument left out may make its neighbour's loss shorten.
    changed = True
    while changed and len(text) > width:
        changed = False
        for path in name.arguments():
            if len(text) <= width:
                return text
            if any(path[:len(p)] == p for p in name.elided):
                continue  # left out already, or inside one that is
            name.elided.add(path)
            shorter = name.text()
            if len(shorter) < len(text) and not index.ambiguous(shorter, own):
                text, changed = shorter, True
            else:
                name.elided.discard(path)
    if len(text) <= width or not cut or width < 2:
        return text
    end = text[: width - 1] + ELLIPSIS
    if not index.ambiguous(end, own):
        return end
    # The middle, keeping as much of the end as a start of the name leaves room for.
    head = min(_MIDDLE_CUT_HEAD, width // 3)
    for tail in range(width - 1 - head, 0, -1):
        middle = text[: width - 1 - tail] + ELLIPSIS + text[-tail:]
        if not index.ambiguous(middle, own):
            return middle
    return text


def _numbered(shown: dict[str, str], parsed: dict[str, _Name]) -> dict[str, str]:
    """Names still shown alike (they differ only in what shortening drops: a parameter
    list, a lambda's number) get their parameter lists where those tell them apart, else
    ' [2]', ' [3]' in the order of their full names."""
    by_text: dict[str, list[str]] = {}
    for full, text in shown.items():
        by_text.setdefault(text, []).append(full)
    for text, fulls in by_text.items():
        if len(fulls) < 2:
            continue
        params = {f: parsed[f].params for f in fulls}
        if len(set(params.values())) == len(fulls):
            for f in fulls:
                shown[f] = text + params[f]
            continue
        for i, f in enumerate(sorted(fulls)):
            if i:
                shown[f] = f"{text} [{i + 1}]"
    return shown


class _Unbalanced(Exception):
    pass


# A name as text and templates: a list of parts, each a str or a template (a list of
# arguments, each itself a list of parts).
Parts = list


def _parse(s: str) -> Parts:
    return _parse_sequence(s, 0, inside=False)[0]


def _parse_sequence(s: str, i: int, inside: bool) -> tuple[Parts, int]:
    parts: Parts = []
    text: list[str] = []
    while i < len(s):
        ch = s[i]
        if ch == "<":
            if text:
                parts.append("".join(text))
                text = []
            arguments, i = _parse_arguments(s, i + 1)
            parts.append(arguments)
            continue
        if inside and ch in ",>":
            break
        text.append(ch)
        i += 1
    if text:
        parts.append("".join(text))
    return parts, i


def _parse_arguments(s: str, i: int) -> tuple[list[Parts], int]:
    arguments = []
    while True:
        while i < len(s) and s[i] == " ":
            i += 1
        argument, i = _parse_sequence(s, i, inside=True)
        arguments.append(argument)
        if i >= len(s):
            raise _Unbalanced
        i += 1
        if s[i - 1] == ">":
            return arguments, i


class _All:
    """Every path: every template open."""

    def __contains__(self, _) -> bool:
        return True


_EVERY = _All()


class _Name:
    """One kernel name: its full text, its parts, which nested templates are shown whole
    (`opened`) and which arguments are left out (`elided`), each by path (the index of each
    part and argument down to it). The outermost templates are always open."""

    def __init__(self, full: str):
        self.full = full
        text = printable(full)  # escaped first: widths count what is shown
        signature = _strip_params(text)
        self.params = _clean(text[len(signature):], nested=False)
        cleaned = _clean(signature)
        try:
            self.parts: Parts = _parse(cleaned)
        except _Unbalanced:  # a '<' of an operator's name, not a template's
            self.parts = [cleaned]
        self.opened: set[tuple] = set()
        self.elided: set[tuple] = set()
        self.whole_text = _render(self.parts, (), _EVERY, set())

    def text(self) -> str:
        return _render(self.parts, (), self.opened, self.elided)

    def closed_templates(self) -> list[tuple]:
        """The paths of the templates shown as '<…>', in reading order."""
        out: list[tuple] = []
        _walk_templates(self.parts, (), 1, self.opened, self.elided, out)
        return out

    def arguments(self) -> list[tuple]:
        """The paths of the arguments of open templates: the outermost template's first,
        the last first; then those nested in them, likewise. The order in which they are
        left out to fit a width."""
        out: list[tuple] = []
        _walk_arguments(self.parts, (), 1, self.opened, out)
        return out


def _render(parts: Parts, path: tuple, opened, elided, depth: int = 1) -> str:
    out = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            out.append(part)
            continue
        here = path + (i,)
        if depth > 1 and here not in opened:
            out.append("<" + ELLIPSIS + ">")
            continue
        shown: list[str] = []
        for k, argument in enumerate(part):
            if here + (k,) in elided:
                if not shown or shown[-1] != ELLIPSIS:
                    shown.append(ELLIPSIS)
            else:
                shown.append(_render(argument, here + (k,), opened, elided, depth + 1).strip())
        out.append("<" + ", ".join(shown) + ">")
    return "".join(out)


def _walk_templates(parts: Parts, path: tuple, depth: int, opened, elided, out: list) -> None:
    for i, part in enumerate(parts):
        if isinstance(part, str):
            continue
        here = path + (i,)
        if depth > 1 and here not in opened:
            out.append(here)
            continue
        for k, argument in enumerate(part):
            if here + (k,) not in elided:
                _walk_templates(argument, here + (k,), depth + 1, opened, elided, out)


def _walk_arguments(parts: Parts, path: tuple, depth: int, opened, out: list) -> None:
    nested = []
    for i, part in enumerate(parts):
        here = path + (i,)
        if isinstance(part, str) or (depth > 1 and here not in opened):
            continue
        out.extend(here + (k,) for k in reversed(range(len(part))))
        nested.extend((here + (k,), argument) for k, argument in enumerate(part))
    for argument_path, argument in reversed(nested):
        _walk_arguments(argument, argument_path, depth + 1, opened, out)


def _clean(s: str, nested: bool = True) -> str:
    """A signature without what reads as noise: 'void ', the namespaces of PyTorch and the
    standard library, '(int)' casts, lambdas as 'λ', and (`nested`) the signatures inside
    template arguments."""
    for pattern, repl in _NOISE:
        s = pattern.sub(repl, s)
    while nested and _PARENS.search(s):
        s = _PARENS.sub("", s)
    return _LAMBDAS.sub("::λ", s)


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
