"""Tables for a terminal of a given width, from views' columns. Numbers never wrap; a row's
name (a kernel, a range, a call site) is never split across lines where the width allows:
it goes beside the numbers where it fits, else on a line of its own above them. A long
text column (a verdict) goes under its row, after '→', where it does not fit on one line
beside the others; optional columns are left out before that fails."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len as rich_cell_len
from rich.text import Text

from ..common.names import printable
from .views import Column, legend

GAP = 2  # spaces between columns
DETAIL_ROOM = 40  # the least width of a detail column whose texts wrap in it
MIN_FOLDED = 8  # the least width of a text column where nothing else fits


def cell_len(text: str) -> int:
    """Terminal cells of `text`, made printable (no control characters): one a character
    where all are ASCII (rich's own measure took a third of a 22 k-row table's layout)."""
    return len(text) if text.isascii() else rich_cell_len(text)


@dataclass
class Grid:
    title: str
    columns: list[Column]  # the first, where it is text, names the row
    rows: Iterable[dict[str, Any]]  # read once
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


def grid_lines(g: Grid, width: int) -> Iterator[Text | str]:
    """`g` as lines of at most `width` cells (all but a number wider than the terminal), as
    they are made: the styled ones (title, header, caption) as Text, the rows as plain text
    (a Text a line cost ~4 µs each in rich's checks of its text, whose control characters
    `printable` escaped already)."""
    lead = g.columns[0] if g.columns and not g.columns[0].numeric else None
    # The rows read once, as they come (a table of 222 k harness runs need not be held as
    # dicts: ~270 MB), each row's cells kept; equal cells share one text (numbers of three
    # digits and a unit, names and verdicts repeat over the rows).
    shown = [*g.columns, *([g.detail] if g.detail else [])]
    columns: list[list[str]] = [[] for _ in shown]
    shared: dict[str, str] = {}
    count = 0
    for r in g.rows:
        count += 1
        for column, c in zip(columns, shown, strict=True):
            text = printable(c.cell(r))
            column.append(shared.setdefault(text, text))
    del shared
    cells = {id(c): column for c, column in zip(shown, columns, strict=True)}
    layout = _lay_out(g, lead, cells, width)
    yield from (Text(line, style="bold") for line in _wrap(g.title, width))
    yield from _header(g, lead, layout, width)
    for i in range(count):
        yield from _row(lead, layout, cells, i)
        if layout.detail_under and g.detail is not None:
            yield from wrapped(f"→ {cells[id(g.detail)][i]}", width, 2, 2)
    caption = legend(layout.columns)
    if layout.detail_under and g.detail is not None:
        caption = " · ".join(x for x in (caption, f"→: {g.detail.long_header.lower()}") if x)
    if layout.left_out:
        caption = " · ".join(x for x in (caption, "not shown at this width: "
                                         + ", ".join(layout.left_out)) if x)
    yield from (Text(line, style="dim") for line in _wrap(caption, width))


def _lay_out(g: Grid, lead: Column | None, cells: dict[int, list[str]], width: int) -> _Layout:
    """The first layout that fits `width`, in order of preference: the name beside the
    numbers (the detail column beside them too, else under each row), then the name on a
    line of its own; each with every column at its natural width, then optional columns
    left out, a group at a time; then the same with text columns wrapped down to their
    longest word; last, whatever fits (`_Planner.last_resort`)."""
    plan = _Planner(g, lead, cells, width)
    for squeeze in (False, True):
        layout = plan.beside(squeeze)
        if layout is None and lead is not None and g.stack:
            layout = plan.stacked(squeeze)
        if layout is not None:
            return layout
    return plan.last_resort()


class _Planner:
    """The layouts `_lay_out` tries, one kind a method; each returns None where it does not
    fit."""

    def __init__(self, g: Grid, lead: Column | None, cells: dict[int, list[str]],
                 width: int):
        self.g, self.lead, self.cells, self.width = g, lead, cells, width
        self.rest = g.columns[1:] if lead else list(g.columns)
        # The headers left out at each step: none, then each optional group added in turn.
        self.drops: list[set[str]] = [set()]
        for group in g.optional:
            self.drops.append(self.drops[-1] | set(group))
        self.full_names = ((g.names(0, False) if g.names else cells[id(lead)]) if lead
                           else [])
        # The least room a name column takes: its longest name (shortened as far as it goes
        # uncut).
        self.need = max([cell_len(n) for n in self.full_names]
                        + [cell_len(lead.header) if lead else 0])

    def natural(self, c: Column, squeeze: bool) -> int:
        """The width of column `c` on one line (`squeeze`: a text column down to its
        longest word)."""
        texts = self.cells[id(c)]
        if squeeze and not c.numeric:
            return max([cell_len(c.header)] + [_longest_word(x) for x in texts])
        return max([cell_len(c.header)] + [cell_len(x) for x in texts])

    def kept(self, dropped: set[str]) -> tuple[list[Column], list[int]]:
        """The columns beside the name but `dropped`, with their natural widths."""
        cols = [c for c in self.rest if c.header not in dropped]
        return cols, [self.natural(c, False) for c in cols]

    def squeezed(self, cols: list[Column], widths: list[int], room: int) -> list[int] | None:
        return _shrink(cols, widths, [self.natural(c, True) for c in cols], room)

    def _gaps(self, cols: list[Column]) -> int:
        """The space between the columns beside the name (and the name)."""
        return GAP * (len(cols) - (0 if self.lead else 1))

    # -- the name beside the numbers, on one line (or wrapped at its spaces) --------------

    def beside(self, squeeze: bool) -> _Layout | None:
        """`squeeze`: text columns wrap, the widest first, down to their longest word (and
        the detail column goes under the rows)."""
        with_detail = [True, False] if self.g.detail is not None and not squeeze else [False]
        for dropped in self.drops:
            cols, widths = self.kept(dropped)
            folded: set[int] = set()
            if squeeze:
                widths = self.squeezed(cols, widths, self.width - self._gaps(cols)
                                       - (self.need if self.lead else 0))
                if widths is None:
                    continue
                folded = {i for i, c in enumerate(cols) if not c.numeric}
            room = self.width - sum(widths) - self._gaps(cols)
            for detail in with_detail:
                layout = self._beside(cols, widths, folded, room, detail)
                if layout is not None:
                    return layout
        return None

    def _beside(self, cols: list[Column], widths: list[int], folded: set[int], room: int,
                detail: bool) -> _Layout | None:
        """`room`: what the columns leave for the name (and the detail column, `detail`)."""
        name_room = room
        if detail:
            placed = self._detail_beside(cols, widths, folded, room)
            if placed is None:
                return None
            cols, widths, folded, name_room = placed
        under = self.g.detail is not None and not detail
        if self.lead is None:
            return (_Layout(cols, widths, None, folded=folded, detail_under=under)
                    if name_room >= 0 else None)
        return self._named(cols, widths, folded, name_room, under)

    def _detail_beside(self, cols: list[Column], widths: list[int], folded: set[int],
                       room: int) -> tuple[list[Column], list[int], set[int], int] | None:
        """The detail column added where each verdict fits on a line, or in one of
        DETAIL_ROOM they wrap in: the columns, widths, folded columns and the room left
        for the name."""
        detail = self.g.detail
        left = room - (self.need + GAP if self.lead else GAP)
        own = self.natural(detail, False)
        if own > left and left < DETAIL_ROOM:
            return None
        detail_width = min(own, left)
        return ([*cols, detail], [*widths, detail_width],
                folded | ({len(cols)} if detail_width < own else set()),
                room - detail_width - GAP)

    def _named(self, cols: list[Column], widths: list[int], folded: set[int],
               name_room: int, under: bool) -> _Layout | None:
        """The name column in `name_room` beside `cols`, where every name fits (uncut, or
        wrapped at its spaces where names do not stack)."""
        g = self.g
        if name_room < self.need:
            return None
        names = g.names(name_room, False) if g.names else self.full_names
        longest = max([cell_len(n) for n in names], default=0)
        if longest <= name_room or (not g.stack and max(
                [_longest_word(n) for n in names], default=0) <= name_room):
            return _Layout(cols, widths, names,
                           min(max(longest, cell_len(self.lead.header)), name_room),
                           folded=folded, detail_under=under)
        return None

    # -- the name on its own line, the numbers under it -----------------------------------

    def stacked(self, squeeze: bool) -> _Layout | None:
        g, width = self.g, self.width
        for dropped in self.drops:
            cols, widths = self.kept(dropped)
            if squeeze:
                widths = self.squeezed(cols, widths, width - GAP * len(cols))
                if widths is None:
                    continue
            numbers = sum(widths) + GAP * (len(cols) - 1)
            indent = cell_len(self.lead.header) + GAP
            if numbers + min(indent, GAP) <= width:
                names = g.names(width, True) if g.names else self.cells[id(self.lead)]
                return _Layout(cols, widths, names, width, stacked=True,
                               indent=min(indent, width - numbers),
                               folded={i for i, c in enumerate(cols)
                                       if squeeze and not c.numeric},
                               detail_under=g.detail is not None)
        return None

    # -- nothing fits ---------------------------------------------------------------------

    def last_resort(self) -> _Layout:
        """Text columns share what the numbers leave, folding words; where the numbers
        alone are still too wide, the last columns are left out, and said to be."""
        g, lead, width = self.g, self.lead, self.width
        cols, widths = self.kept(self.drops[-1])
        text_columns = [i for i, c in enumerate(cols) if not c.numeric]
        widths = _shrink(cols, widths, [MIN_FOLDED if i in text_columns else w
                                        for i, w in enumerate(widths)],
                         width - GAP * len(cols)) or widths
        left_out = []
        while len(cols) > 1 and sum(widths) + GAP * len(cols) > width:
            left_out.insert(0, cols.pop().header)
            widths.pop()
            text_columns = [i for i in text_columns if i < len(cols)]
        names = (g.names(width, True) if g.names else self.cells[id(lead)]) if lead else None
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
         i: int) -> list[str]:
    columns = []
    for k, (c, w) in enumerate(zip(layout.columns, layout.widths, strict=True)):
        text = cells[id(c)][i]
        lines = _wrap(text, w) if k in layout.folded and cell_len(text) > w else [text]
        columns.append([_pad(x, w, left=not c.numeric) for x in lines])
    out = []
    if layout.names is not None and layout.stacked:
        out += _wrap(layout.names[i], layout.name_width)
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
        out.append((prefix[0] + (" " * GAP).join(parts)).rstrip())
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
