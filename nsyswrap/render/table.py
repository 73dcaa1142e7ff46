"""The terminal view: the verdict first (the findings, then the program's own timings),
then the tables: kernels, processes, harness benchmarks, NVTX ranges. Laid out for the
width it is given (grid.py): no line longer, no name split across lines."""

from __future__ import annotations

import io
import itertools
from functools import cache

from rich.console import Console
from rich.control import strip_control_codes
from rich.text import Text

from ..common.names import printable
from ..comparison.document import section_chunks
from ..comparison.result import Comparison
from .base import Renderer
from .grid import GAP, Grid, grid_lines, wrapped
from .views import (
    BENCHMARK_COLUMNS,
    PROCESS_COLUMNS,
    RANGE_COLUMNS,
    TIMING_COLUMNS,
    TIMINGS_TITLE,
    attribution_line,
    event_records_hint,
    finding_message,
    finding_subject,
    header_lines,
    kernel_columns,
    kernel_names,
    line_hint,
    line_section,
    no_findings_line,
    range_rows,
    rows,
    summary_sections,
    timing_notes,
)

SEVERITY_STYLE = {"warning": "bold yellow", "info": "cyan"}
PLAIN_AT_ONCE = 4096  # plain lines written in one piece, at most
DEFAULT_WIDTH = 120


def terminal_text(text: str, style: str = "") -> Text:
    """Text for the terminal: what came from the report (names, paths, messages that quote
    them) with its control characters as escapes, so no name can recolour, retitle or
    rewrite the terminal."""
    return Text(printable(str(text)), style=style)


def terminal_console(color: bool, width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=color, no_color=not color, width=width,
                   highlight=False, soft_wrap=False), buf


def print_grid(console: Console, grid: Grid, width: int) -> None:
    console.print()
    _print_lines(console, grid_lines(grid, width))


class TableRenderer(Renderer):
    def render(self, c: Comparison, *, color: bool = False, width: int | None = None,
               top: int = 10, full_names: bool = False, instances: bool = False, **_) -> str:
        width = width or DEFAULT_WIDTH
        console, buf = terminal_console(color, width)
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

        # The verdict first: what distorts the timings, then the program's own timings.
        print_findings(console, c, width)
        timings = rows(c, "timings")
        if timings:
            *numbers, verdict = TIMING_COLUMNS
            print_grid(console, Grid(f"{TIMINGS_TITLE} against the kernels between the "
                                     "records (per call; trust the kernels)", numbers,
                                     timings, detail=verdict, stack=False), width)
        if timings or c.analysis.user_timings:
            for line in timing_notes(c):
                console.print(terminal_text(line))
        hint = event_records_hint(c)
        if hint:
            console.print()
            console.print(terminal_text(hint, style="dim"))
        print_lines(console, c, width, top)

        kernels = rows(c, "kernels")
        if kernels:
            shown = kernels[:top] if top else kernels

            @cache  # the layout asks again for the same room
            def names(room: int, cut: bool) -> list[str]:  # told apart from those shown
                named = kernel_names(shown, room, full_names, cut)
                return [named[r["name"]] for r in shown]

            print_grid(console, Grid(
                f"GPU kernels (top {len(shown)} of {len(kernels)} by total time)",
                kernel_columns(kernel_names(shown, width, full_names)), shown,
                optional=(("Min", "Max"),), names=names), width)
        processes = rows(c, "processes")
        if len(processes) > 1:
            print_grid(console, Grid("Processes", PROCESS_COLUMNS, processes), width)
        # Read as the grid lays them out: a row per harness run, 222 k in a report with a
        # run in every training step.
        chunks = section_chunks(c, "benchmarks")
        first = next(chunks, [])
        if first:
            benchmarks = itertools.chain(first, (row for chunk in chunks for row in chunk))
            *numbers, verdict = BENCHMARK_COLUMNS
            print_grid(console, Grid("Harness benchmarks: CUDA events against the kernels "
                                     "(per call; trust the kernels)", numbers, benchmarks,
                                     detail=verdict), width)
        ranges, left_out = range_rows(c, every=instances)
        if ranges:
            print_grid(console, Grid("NVTX ranges and the GPU work they launched",
                                     RANGE_COLUMNS, ranges, optional=(("Lat",), ("Span",))),
                       width)
        if left_out:
            _print_lines(console, (Text(line, style="dim")
                                   for line in wrapped(left_out, width)))
        print_summaries(console, c, width, top)
        return buf.getvalue()


def print_lines(console: Console, c: Comparison, width: int, top: int) -> None:
    """The By line table (views.line_section), or the line that says why there is none."""
    s = line_section(c, top)
    if s is not None:
        print_grid(console, Grid(s.title, s.columns, s.rows, optional=s.optional), width)
        if s.note:
            _print_lines(console, (Text(line, style="dim") for line in wrapped(s.note, width)))
        return
    console.print()
    _print_lines(console, (Text(line, style="dim") for line in wrapped(line_hint(c), width)))


def print_summaries(console: Console, c: Comparison, width: int, top: int) -> None:
    """The call summaries and the program's marks (views.summary_sections), after the
    other tables."""
    for s in summary_sections(c, top):
        print_grid(console, Grid(s.title, s.columns, s.rows, optional=s.optional), width)
        if s.note:
            _print_lines(console, (Text(line, style="dim") for line in wrapped(s.note, width)))


def print_findings(console: Console, c: Comparison, width: int) -> None:
    """The findings as a list over the whole width: severity, code and the ranges they
    concern on a line (the ranges on the next where they do not fit), the message, and the
    suggestion after '→'."""
    findings = rows(c, "findings")
    console.print()
    if not findings:
        console.print(Text(no_findings_line(c), style="green"))
        return
    console.print(Text(f"Findings ({len(findings)})", style="bold"))
    for f in findings:
        console.print()
        style = SEVERITY_STYLE.get(f["severity"], "")
        head = Text(f"{f['severity']}{' ' * GAP}{f['code']}", style=style)
        subject = printable(finding_subject(f))
        if len(head) + GAP + len(subject) <= width:
            head.append(" " * GAP + subject)
            _print_lines(console, [head])
        else:
            _print_lines(console, [head, *map(Text, wrapped(subject, width, 2, 2))])
        _print_lines(console, map(Text, wrapped(printable(finding_message(f)), width, 2)))
        _print_lines(console, (Text(line, style="dim") for line in wrapped(
            printable(f"→ {f['suggestion']}"), width, 2, 2)))


def _print_lines(console: Console, lines) -> None:
    """Lines laid out already (Text, or plain text), printed as they are: the styled ones
    by rich, a run of plain ones written at once (rich's print of a line costs ~25 µs,
    ~1 s at 44 k lines), without the control characters rich would strip."""
    plain: list[str] = []
    for line in lines:
        if isinstance(line, str):
            plain.append(line)
            if len(plain) == PLAIN_AT_ONCE:  # a table of 222 k rows is ~40 MB of text
                _write_plain(console, plain)
                plain = []
            continue
        _write_plain(console, plain)
        plain = []
        console.print(line, no_wrap=True, overflow="ignore", crop=False)
    _write_plain(console, plain)


def _write_plain(console: Console, lines: list[str]) -> None:
    if lines:
        console.file.write(strip_control_codes("\n".join(lines)) + "\n")
