"""The terminal view: the program's own timings, kernels, ranges, then the findings (the
verdict reads last)."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..compare import Comparison
from .names import printable
from .views import (
    BENCHMARK_COLUMNS,
    FINDING_COLUMNS,
    PROCESS_COLUMNS,
    RANGE_COLUMNS,
    TIMING_COLUMNS,
    TIMING_COLUMNS_NARROW,
    TIMINGS_TITLE,
    Column,
    attribution_line,
    cells,
    event_records_hint,
    header_lines,
    kernel_columns,
    legend,
    rows,
    timing_notes,
    timing_verdict,
)

SEVERITY_STYLE = {"warning": "bold yellow", "info": "cyan"}


def terminal_text(text: str, style: str = "") -> Text:
    """Text for the terminal: what came from the report (names, paths, messages that quote
    them) with its control characters as escapes, so no name can recolour, retitle or
    rewrite the terminal."""
    return Text(printable(str(text)), style=style)


class TableRenderer:
    def render(self, c: Comparison, *, color: bool = False, width: int | None = None,
               top: int = 10, **_) -> str:
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=color, no_color=not color,
                          width=width or 120, highlight=False, soft_wrap=False)
        lines = header_lines(c)
        console.print(terminal_text(lines[0], style="bold"))
        console.print(terminal_text(lines[1], style="dim"))
        for alert in c.info.alerts:
            console.print(terminal_text(f"WARNING: {alert}", style="bold yellow"))
        for note in c.info.notes:
            if note not in c.info.alerts:
                console.print(terminal_text(f"note: {note}", style="dim"))
        attribution = attribution_line(c)
        if attribution:
            console.print(terminal_text(attribution, style="dim"))

        # The program's own timings first: what the user came to check.
        timings = rows(c, "timings")
        if timings:
            console.print(_timings_table(timings, width or 120))
        if timings or c.analysis.user_timings:
            for line in timing_notes(c):
                console.print(terminal_text(line))
        hint = event_records_hint(c)
        if hint:
            console.print(terminal_text(hint, style="dim"))
        kernels = rows(c, "kernels")
        if kernels:
            shown = kernels[:top] if top else kernels
            title = f"GPU kernels (top {len(shown)} of {len(kernels)} by total time)"
            console.print(_table(title, kernel_columns(max(30, (width or 120) - 60)), shown))
        processes = rows(c, "processes")
        if len(processes) > 1:
            console.print(_table("Processes", PROCESS_COLUMNS, processes))
        benchmarks = rows(c, "benchmarks")
        if benchmarks:
            console.print(_table("Harness benchmarks: CUDA events against the kernels (per "
                                 "call; trust the kernels)", BENCHMARK_COLUMNS, benchmarks))
        ranges = rows(c, "ranges")
        if ranges:
            console.print(_table("NVTX ranges and the GPU work they launched", RANGE_COLUMNS,
                                 ranges))
        findings = rows(c, "findings")
        if findings:
            t = Table(title=f"Findings ({len(findings)})", box=box.SIMPLE_HEAD,
                      title_justify="left", show_lines=False)
            for col in FINDING_COLUMNS:
                t.add_column(col.header, overflow="fold")
            for f in findings:
                style = SEVERITY_STYLE.get(f["severity"], "")
                sev, code, rng, msg = cells(FINDING_COLUMNS, f)
                message = terminal_text(msg)
                message.append(printable(f"\n→ {f['suggestion']}"), style="dim")
                t.add_row(Text(sev, style=style), Text(code, style=style), terminal_text(rng),
                          message)
            console.print(t)
        else:
            console.print(Text("No findings: nothing distorts these timings at the current "
                               "thresholds.", style="green"))
        return buf.getvalue()


# Below this width the timings' verdicts go under their call sites, not in a column.
TIMINGS_WIDE = 100


def _timings_table(data: list[dict], width: int) -> Table:
    """The program's timings, one row per call-site pair. A call site ('file.py:37→39') is
    never folded where the width allows: the column is given a width of at least the
    longest word of any label."""
    wide = width >= TIMINGS_WIDE
    columns = TIMING_COLUMNS if wide else TIMING_COLUMNS_NARROW
    title = f"{TIMINGS_TITLE} against the kernels between the records (per call; trust the " \
        "kernels)"
    if wide:
        t = _table(title, columns, data)
    else:  # the verdict under the call site, indented past its arrow
        t = _table(title, columns, [])
        for r in data:
            verdict = Table.grid(padding=(0, 1))
            verdict.add_row("→", terminal_text(timing_verdict(r)))
            label, *numbers = cells(columns, r)
            t.add_row(Group(terminal_text(label), verdict),
                      *(terminal_text(x) for x in numbers))
    # The verdict column, where there is one, keeps 20.
    room = (width - cells_width([c for c in columns if c.numeric], data)
            - table_frame_width(columns) - (20 if wide else 0))
    words_fit(t, 0, [r["label"] for r in data], room if wide else None, room)
    return t


def table_frame_width(columns: list[Column]) -> int:
    """What `_table` adds around the cells of `columns`: each column's padding (none at the
    edges), a separator between columns and the two edges."""
    return 3 * len(columns) - 1


def cells_width(columns: list[Column], data: list[dict]) -> int:
    """What `columns` of `_table` take unwrapped (their widest cell or header), padding not
    included."""
    return sum(max([len(col.header)] + [len(col.cell(r)) for r in data]) for col in columns)


def words_fit(t: Table, index: int, texts: list[str], room: int | None, most: int) -> None:
    """Fix column `index`'s width so that no word of `texts` is folded, where the room
    allows: the longest text's width within `room` (None: `most`, all of it)."""
    longest_word = max((len(w) for x in texts for w in x.split()), default=0)
    if most < longest_word:
        return  # too narrow to keep them whole: rich folds as it must
    t.columns[index].width = most if room is None else max(
        longest_word, min(max(len(x) for x in texts), room))


def _table(title: str, columns: list[Column], data: list[dict]) -> Table:
    """Numbers never wrap and headers are never cut (their width is the least a column
    gets); text columns fold. Short headers are explained in a caption (the legend)."""
    t = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False,
              caption=legend(columns) or None, caption_justify="left", caption_style="dim")
    for col in columns:
        t.add_column(col.header, justify="right" if col.numeric else "left",
                     overflow="fold", no_wrap=col.numeric, min_width=len(col.header))
    for row in data:
        t.add_row(*(terminal_text(cell) for cell in cells(columns, row)))
    return t
