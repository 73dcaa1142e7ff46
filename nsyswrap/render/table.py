"""The terminal view: kernels, ranges, then the findings (the verdict reads last)."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..compare import Comparison
from .names import printable
from .views import (
    BENCHMARK_COLUMNS,
    FINDING_COLUMNS,
    PROCESS_COLUMNS,
    RANGE_COLUMNS,
    Column,
    attribution_line,
    cells,
    header_lines,
    kernel_columns,
    legend,
    rows,
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
