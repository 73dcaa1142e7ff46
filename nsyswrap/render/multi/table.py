"""The terminal view of ranks side by side and of a diff: tables, then the findings."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from ...multi.diff import SAME
from ...units import fmt_ns
from ..table import (
    SEVERITY_STYLE,
    _table,
    cells_width,
    table_frame_width,
    terminal_text,
    words_fit,
)
from ..views import Column
from .document import diff_section, ranks_section
from .views import IDENTITY_COLUMNS, RANK_COLUMNS, diff_columns, family_rows

VERDICT_STYLE = {"slower": "bold red", "faster": "green", "inconclusive": "yellow"}


def _console(color: bool, width: int | None) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=color, no_color=not color, width=width or 120,
                   highlight=False, soft_wrap=False), buf


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


class RanksTable:
    def render(self, a, *, color: bool = False, width: int | None = None, **_) -> str:
        console, buf = _console(color, width)
        ranks = ranks_section(a, "ranks")
        console.print(terminal_text(f"nsyswrap: {len(ranks)} ranks side by side"
                                    + (f", step = {a.step_family}" if a.step_family else ""),
                                    style="bold"))
        console.print(_table("Ranks and how they were identified", IDENTITY_COLUMNS, ranks))
        if a.clock.get("checked"):
            console.print(Text(
                f"collectives matched by order per name; waits from durations; on "
                f"{a.clock['timebase']} matched collectives end "
                f"{fmt_ns(a.clock['end_skew_median_ns'])} apart (median)", style="dim"))
        for note in a.notes:
            console.print(terminal_text(f"note: {note}", style="dim"))
        console.print(_table("Per rank, per step (medians)", RANK_COLUMNS, ranks))
        cols, rows = family_rows(ranks_section(a, "families"), [r["rank"] for r in ranks])
        if rows:
            console.print(_table("Range families per rank (median per instance)", cols, rows))
        for doc in (s.document for s in a.summaries):
            codes = [f["code"] for f in doc["findings"]]
            if codes:
                counts = {c: codes.count(c) for c in dict.fromkeys(codes)}
                console.print(terminal_text(f"{doc['report']['source']}: " + ", ".join(
                    f"{c}×{n}" if n > 1 else c for c, n in counts.items()), style="dim"))
        _findings(console, ranks_section(a, "findings"), "Cross-rank findings")
        return buf.getvalue()


class DiffTable:
    def render(self, d, *, color: bool = False, width: int | None = None, top: int = 0,
               **_) -> str:
        console, buf = _console(color, width)
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
        cols: list[Column] = diff_columns(max(30, (width or 120) - 90))
        shown = rows[:top] if top else rows
        table = _table("Changes (ranges, your timings, benchmarks, kernels; biggest total "
                       "first)", cols, shown)
        # A timing's call sites ('file.py:37→39') are not folded, where the width allows;
        # the verdict keeps room for "no significant change".
        sites = [cols[1].cell(r) for r in shown if r["kind"] == "timing"]
        if sites:
            others = [c for i, c in enumerate(cols) if i != 1 and c.header != "Verdict"]
            room = ((width or 120) - cells_width(others, shown) - table_frame_width(cols)
                    - len(SAME))
            words_fit(table, 1, sites, room, room)
        console.print(table)
        changed = diff_section(d, "findings")
        if changed:
            console.print(Text("Findings", style="bold"))
            for f in changed:
                console.print(terminal_text(f"  {f['change']:<12}{f['code']:<20}{f['message']}"))
        counts = d.rows["verdict"].value_counts()
        console.print(Text("; ".join(f"{int(n)} {v}" for v, n in counts.items()),
                           style="bold"))
        return buf.getvalue()
