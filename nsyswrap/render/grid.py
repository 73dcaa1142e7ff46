"""Tables for a terminal of a given width, from views' columns. Numbers never wrap; a row's
name (a kernel, a range, a call site) is never split across lines where the width allows:
it goes beside the numbers where it fits, else on a line of its own above them. A long
text column (a verdict) goes under its row, after '→', where it does not fit on one line
beside the others; optional columns are left out before that fails."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len
from rich.text import Text

from ..common.names import printable
from .views import Column, legend

GAP = 2  # spaces between columns
DETAIL_ROOM = 40  # the least width of a detail column whose texts wrap in it
MIN_FOLDED = 8  # the least width of a text column where nothing else fits


@dataclass
class Grid:
    title: str
    columns: list[Column]  # the first, where it is text, names the row
    rows: list[dict[str, Any]]
    # A last column where each of its cells fits on one line beside the others, else a line
    # under each row after '→'.
    detail: Column | None = None
    # Headers of columns left out, a group at a time, where a row does not fit otherwise.
    optional: tuple[tuple[str, ...], ...] = ()
    # The name column's texts within a width (kernel signatures shortened to it), and
    # whether they may be cut to fit (else they leave out only what tells nothing apart,
    # and may stay longer); None: its cells as they are. Names go beside the numbers only
    # uncut.
    names: Callable[[int, bool], list[str]] | None = None
    # Where the name cannot go beside the numbers: on its own line above them (True), or
    # wrapped at its spaces in its column (False: call sites 'Timer(f(x)) at t.py:18').
    stack: bool = True


@dataclass
class _Layout:
    columns: list[Column]  # beside the name (or all of them, where no column names rows)
    widths: list[int]
    names: list[str] | None  # the name of each row, as shown; None: no name column
    name_width: int = 0
    stacked: bool = False
    detail_under: bool = False
    indent: int = 0  # of the numbers under a stacked name
    folded: set[int] = field(default_factory=set)  # columns whose cells may wrap
    left_out: list[str] = field(default_factory=list)  # columns no width could hold


def grid_lines(g: Grid, width: int) -> list[Text]:
    """`g` as lines of at most `width` cells (all but a number wider than the terminal)."""
    lead = g.columns[0] if g.columns and not g.columns[0].numeric else None
    cells = {id(c): [printable(c.cell(r)) for r in g.rows]
             for c in [*g.columns, *([g.detail] if g.detail else [])]}
    layout = _lay_out(g, lead, cells, width)
    out = [Text(line, style="bold") for line in _wrap(g.title, width)]
    out += _header(g, lead, layout, width)
    for i in range(len(g.rows)):
        out += _row(lead, layout, cells, i)
        if layout.detail_under and g.detail is not None:
            out += [Text(line) for line in wrapped(f"→ {cells[id(g.detail)][i]}", width, 2, 2)]
    caption = legend(layout.columns)
    if layout.detail_under and g.detail is not None:
        caption = " · ".join(x for x in (caption, f"→: {g.detail.long_header.lower()}") if x)
    if layout.left_out:
        caption = " · ".join(x for x in (caption, "not shown at this width: "
                                         + ", ".join(layout.left_out)) if x)
    out += [Text(line, style="dim") for line in _wrap(caption, width)]
    return out


def _lay_out(g: Grid, lead: Column | None, cells: dict[int, list[str]], width: int) -> _Layout:
    rest_all = g.columns[1:] if lead else list(g.columns)
    drops = [set()]
    for group in g.optional:
        drops.append(drops[-1] | set(group))
    details = [True, False] if g.detail is not None else [False]

    def natural(c: Column, squeeze: bool) -> int:
        texts = cells[id(c)]
        if squeeze and not c.numeric:  # down to its longest word
            return max([cell_len(c.header)] + [_longest_word(x) for x in texts])
        return max([cell_len(c.header)] + [cell_len(x) for x in texts])

    full_names = (g.names(0, False) if g.names else cells[id(lead)]) if lead else []
    # The least room a name column takes: its longest name (shortened as far as it goes
    # uncut).
    need = max([cell_len(n) for n in full_names] + [cell_len(lead.header) if lead else 0])
    for squeeze in (False, True):
        # The name beside the numbers, on one line (or wrapped at its spaces).
        for dropped in drops:
            cols = [c for c in rest_all if c.header not in dropped]
            widths = [natural(c, False) for c in cols]
            folded: set[int] = set()
            if squeeze:  # text columns wrap, the widest first, down to their longest word
                room = width - GAP * (len(cols) - (0 if lead else 1)) - (need if lead else 0)
                widths = _shrink(cols, widths, [natural(c, True) for c in cols], room)
                if widths is None:
                    continue
                folded = {i for i, c in enumerate(cols) if not c.numeric}
            room = width - sum(widths) - GAP * (len(cols) - (0 if lead else 1))
            for with_detail in details if not squeeze else [False]:
                name_room = room
                cols_here, widths_here, folded_here = cols, widths, folded
                if with_detail:
                    # A column where each verdict fits on a line, or one of DETAIL_ROOM
                    # they wrap in.
                    left = room - (need + GAP if lead else GAP)
                    own = natural(g.detail, False)
                    if own > left and left < DETAIL_ROOM:
                        continue
                    detail_width = min(own, left)
                    name_room = room - detail_width - GAP
                    cols_here = [*cols, g.detail]
                    widths_here = [*widths, detail_width]
                    folded_here = folded | ({len(cols)} if detail_width < own else set())
                under = g.detail is not None and not with_detail
                if lead is None:
                    if name_room >= 0:
                        return _Layout(cols_here, widths_here, None, folded=folded_here,
                                       detail_under=under)
                    continue
                if name_room < need:
                    continue
                names = g.names(name_room, False) if g.names else full_names
                longest = max([cell_len(n) for n in names], default=0)
                if longest <= name_room or (not g.stack and max(
                        [_longest_word(n) for n in names], default=0) <= name_room):
                    return _Layout(cols_here, widths_here, names,
                                   min(max(longest, cell_len(lead.header)), name_room),
                                   folded=folded_here, detail_under=under)
        if lead is None or not g.stack:
            continue
        # The name on its own line, the numbers under it.
        for dropped in drops:
            cols = [c for c in rest_all if c.header not in dropped]
            widths = [natural(c, False) for c in cols]
            if squeeze:
                widths = _shrink(cols, widths, [natural(c, True) for c in cols],
                                 width - GAP * len(cols))
                if widths is None:
                    continue
            numbers = sum(widths) + GAP * (len(cols) - 1)
            indent = cell_len(lead.header) + GAP
            if numbers + min(indent, GAP) <= width:
                names = g.names(width, True) if g.names else cells[id(lead)]
                return _Layout(cols, widths, names, width, stacked=True,
                               indent=min(indent, width - numbers),
                               folded={i for i, c in enumerate(cols)
                                       if squeeze and not c.numeric},
                               detail_under=g.detail is not None)
    # Nothing fits: text columns share what the numbers leave, folding words.
    cols = [c for c in rest_all if c.header not in drops[-1]]
    widths = [natural(c, False) for c in cols]
    text_columns = [i for i, c in enumerate(cols) if not c.numeric]
    widths = _shrink(cols, widths, [MIN_FOLDED if i in text_columns else w
                                    for i, w in enumerate(widths)],
                     width - GAP * len(cols)) or widths
    # Still too wide (numbers alone): the last columns are left out, and said to be.
    left_out = []
    while len(cols) > 1 and sum(widths) + GAP * len(cols) > width:
        left_out.insert(0, cols.pop().header)
        widths.pop()
        text_columns = [i for i in text_columns if i < len(cols)]
    names = (g.names(width, True) if g.names else cells[id(lead)]) if lead else None
    return _Layout(cols, widths, names, width, stacked=lead is not None, indent=GAP,
                   folded=set(text_columns), detail_under=g.detail is not None,
                   left_out=left_out)


def _shrink(cols: list[Column], widths: list[int], least: list[int],
            room: int) -> list[int] | None:
    """`widths` made to add up to `room` at most, taking from the widest text column
    first, none below its `least`; None where that is not enough."""
    widths = list(widths)
    text = [i for i, c in enumerate(cols) if not c.numeric]
    excess = sum(widths) - room
    while excess > 0:
        wide = [i for i in text if widths[i] > least[i]]
        if not wide:
            return None
        i = max(wide, key=lambda k: widths[k])
        widths[i] -= 1
        excess -= 1
    return widths


def _header(g: Grid, lead: Column | None, layout: _Layout, width: int) -> list[Text]:
    parts = []
    if lead is not None and not layout.stacked:
        parts.append(_pad(lead.header, layout.name_width, left=True))
    for c, w in zip(layout.columns, layout.widths, strict=True):
        parts.append(_pad(c.header, w, left=not c.numeric))
    line = (" " * GAP).join(parts)
    if layout.stacked:
        head = lead.header if lead is not None else ""
        line = (head.ljust(layout.indent) if cell_len(head) < layout.indent
                else " " * layout.indent) + line
    total = min(width, max(cell_len(line), max((cell_len(n) for n in layout.names or []),
                                               default=0)))
    out = []
    if layout.stacked and lead is not None and cell_len(lead.header) >= layout.indent:
        out.append(Text(lead.header, style="bold"))
    out.append(Text(line.rstrip(), style="bold"))
    out.append(Text("─" * total))
    return out


def _row(lead: Column | None, layout: _Layout, cells: dict[int, list[str]],
         i: int) -> list[Text]:
    columns = []
    for k, (c, w) in enumerate(zip(layout.columns, layout.widths, strict=True)):
        text = cells[id(c)][i]
        lines = _wrap(text, w) if k in layout.folded and cell_len(text) > w else [text]
        columns.append([_pad(x, w, left=not c.numeric) for x in lines])
    out = []
    if layout.names is not None and layout.stacked:
        out += [Text(x) for x in _wrap(layout.names[i], layout.name_width)]
        prefix = [" " * layout.indent]
    elif layout.names is not None:
        name = layout.names[i]
        lines = (_wrap(name, layout.name_width) if cell_len(name) > layout.name_width
                 else [name])
        columns.insert(0, [_pad(x, layout.name_width, left=True) for x in lines])
        prefix = [""]
    else:
        prefix = [""]
    height = max(len(c) for c in columns) if columns else 0
    for line in range(height):
        parts = [c[line] if line < len(c) else " " * cell_len(c[0]) for c in columns]
        out.append(Text((prefix[0] + (" " * GAP).join(parts)).rstrip()))
    return out


def _pad(text: str, width: int, left: bool) -> str:
    space = " " * max(0, width - cell_len(text))
    return text + space if left else space + text


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _wrap(text: str, width: int, later: int | None = None) -> list[str]:
    """`text` in lines of at most `width` (after the first: `later`), broken at spaces; a
    word longer than its line starts one and is folded (nothing else fits)."""
    lines: list[str] = []
    line = ""

    def room() -> int:
        return max(width if not lines or later is None else later, 1)

    for word in text.split():
        if line and cell_len(line) + 1 + cell_len(word) <= room():
            line += " " + word
            continue
        if line:
            lines.append(line)
        while cell_len(word) > room():
            cut = room()
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    if line:
        lines.append(line)
    return lines


def wrapped(text: str, width: int, indent: int = 0, hang: int = 0) -> list[str]:
    """`text` wrapped to `width` at spaces, indented by `indent` (later lines by `hang`
    more)."""
    lines = _wrap(text, max(width - indent, 10), max(width - indent - hang, 10))
    return [" " * (indent + (hang if i else 0)) + x for i, x in enumerate(lines)]
