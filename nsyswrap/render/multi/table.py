"""The terminal view of ranks side by side and of a diff: tables, then the findings."""

from __future__ import annotations

from functools import cache

from rich.console import Console
from rich.text import Text

from ...common.names import printable
from ...common.units import fmt_ns
from ..base import Renderer
from ..grid import Grid, wrapped
from ..table import (
    DEFAULT_WIDTH,
    SEVERITY_STYLE,
    print_grid,
    terminal_console,
    terminal_text,
)
from .document import diff_section, ranks_section
from .views import (
    IDENTITY_COLUMNS,
    RANK_COLUMNS,
    diff_columns,
    diff_name,
    diff_names,
    family_rows,
)


def _findings(console: Console, findings: list[dict], title: str) -> None:
    if not findings:
        console.print(Text(f"{title}: none", style="green"))
        return
    console.print(Text(f"{title} ({len(findings)})", style="bold"))
    for f in findings:
        style = SEVERITY_STYLE.get(f["severity"], "")
        line = Text(f"  {f['severity']:<8}", style=style)
        line.append(f"{f['code']:<13}", style=style)
        line.append_text(terminal_text(f["message"]))
        console.print(line)
        if f.get("suggestion"):
            console.print(terminal_text(f"  {'':<21}→ {f['suggestion']}", style="dim"))


class RanksTable(Renderer):
    def render(self, a, *, color: bool = False, width: int | None = None, **_) -> str:
        width = width or DEFAULT_WIDTH
        console, buf = terminal_console(color, width)
        ranks = ranks_section(a, "ranks")
        console.print(terminal_text(f"nsyswrap: {len(ranks)} ranks side by side"
                                    + (f", step = {a.step_family}" if a.step_family else ""),
                                    style="bold"))
        print_grid(console, Grid("Ranks and how they were identified", IDENTITY_COLUMNS,
                                 ranks), width)
        if a.clock.get("checked"):
            console.print(Text(
                f"collectives matched by order per name; waits from durations; on "
                f"{a.clock['timebase']} matched collectives end "
                f"{fmt_ns(a.clock['end_skew_median_ns'])} apart (median)", style="dim"))
        for note in a.notes:
            console.print(terminal_text(f"note: {note}", style="dim"))
        print_grid(console, Grid("Per rank, per step (medians)", RANK_COLUMNS, ranks,
                                 optional=(("Overlap", "Exposed"), ("Compute", "Last"))),
                   width)
        cols, rows = family_rows(ranks_section(a, "families"), [r["rank"] for r in ranks])
        if rows:
            print_grid(console, Grid("Range families per rank (median per instance)", cols,
                                     rows), width)
        for doc in (s.document for s in a.summaries):
            codes = [f["code"] for f in doc["findings"]]
            if codes:
                counts = {c: codes.count(c) for c in dict.fromkeys(codes)}
                console.print(terminal_text(f"{doc['report']['source']}: " + ", ".join(
                    f"{c}×{n}" if n > 1 else c for c, n in counts.items()), style="dim"))
        _findings(console, ranks_section(a, "findings"), "Cross-rank findings")
        return buf.getvalue()


class DiffTable(Renderer):
    def render(self, d, *, color: bool = False, width: int | None = None, top: int = 0,
               full_names: bool = False, **_) -> str:
        width = width or DEFAULT_WIDTH
        console, buf = terminal_console(color, width)
        comp = d.comparability
        console.print(terminal_text(f"nsyswrap diff: {d.base.source} → {d.new.source}",
                                    style="bold"))
        style = {"comparable": "green", "not comparable": "bold red"}.get(comp["level"],
                                                                          "yellow")
        console.print(Text(f"comparability: {comp['level']}", style=style))
        for r in comp["reasons"] + comp["cautions"]:
            console.print(terminal_text(f"  - {r}", style=style))
        console.print(Text(f"verdicts: {comp['method']}, {comp['confidence']:.0%} interval; "
                           f"a change must clear the interval and {comp['noise_floor']:.0%}",
                           style="dim"))
        rows = diff_section(d, "rows")
        shown = rows[:top] if top else rows
        kind, name, *numbers, verdict = diff_columns(diff_names(rows, width, full_names))

        @cache  # the layout asks again for the same room
        def names(room: int, cut: bool) -> list[str]:
            named = diff_names(rows, room, full_names, cut)
            return [diff_name(r, named) for r in shown]

        # The name first: it is what a row is about, and where it does not fit beside the
        # numbers it goes on its own line.
        print_grid(console, Grid("Changes (ranges, your timings, benchmarks, kernels; "
                                 "biggest total first)", [name, kind, *numbers], shown,
                                 detail=verdict, names=names), width)
        changed = diff_section(d, "findings")
        if changed:
            console.print()
            console.print(Text("Findings", style="bold"))
            for f in changed:
                console.print(Text(f"  {f['change']}  {f['code']}"))
                for line in wrapped(printable(f["message"]), width, 4):
                    console.print(Text(line), no_wrap=True, overflow="ignore", crop=False)
        counts = d.rows["verdict"].value_counts()
        console.print(Text("; ".join(f"{int(n)} {v}" for v, n in counts.items()),
                           style="bold"))
        return buf.getvalue()
