"""Markdown, for pull-request comments and notebooks."""

from __future__ import annotations

import re

from ..common.names import printable
from ..comparison.result import Comparison
from .base import Renderer
from .views import (
    BENCHMARK_COLUMNS,
    FINDING_COLUMNS,
    PROCESS_COLUMNS,
    RANGE_COLUMNS,
    TIMING_COLUMNS,
    TIMINGS_TITLE,
    Column,
    attribution_line,
    cells,
    event_records_hint,
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

# Names come from the report (kernels, NVTX ranges, domains, paths) and may hold anything.
# In a table cell or a list item they must stay one line of plain text: GitHub renders raw
# HTML (an <img> in a range name would show as an image), `|` ends a cell, and `*_[]`
# and backticks would format. HTML's specials become entities, Markdown's get a backslash;
# control characters, newlines included, show as escapes (names.printable). GitHub also acts
# on plain text: `@name` mentions a user or a team (and notifies them), and a bare URL or
# `www.` name becomes a link; a zero-width space after the `@`, before `://` and after
# `www` leaves the text reading the same, inert.
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_MARKDOWN = re.compile(r"([\\`*_\[\]|#~])")
_ZERO_WIDTH = "&#8203;"
_MENTION = re.compile(r"@(?=\w)")
_AUTOLINK = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*)(?=://)|\b(www)(?=\.)")


# Kernel names are shortened to this (told apart: names.short_names); --full-names shows them
# whole.
KERNEL_NAME_WIDTH = 100


def escape(text: str) -> str:
    """Report text as one line of plain Markdown: control characters (line breaks too) shown
    as escapes, HTML and Markdown syntax escaped, no mention and no link (for table cells,
    list items and headings)."""
    text = _MARKDOWN.sub(r"\\\1", printable(str(text)).translate(_HTML))
    text = _MENTION.sub("@" + _ZERO_WIDTH, text)
    return _AUTOLINK.sub(lambda m: m.group() + _ZERO_WIDTH, text)


def table_lines(columns: list[Column], data: list[dict]) -> list[str]:
    """A Markdown table's lines: the columns' long headers, then a row per dict of `data`."""
    head = "| " + " | ".join(escape(c.long_header) for c in columns) + " |"
    rule = "|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|"
    body = ["| " + " | ".join(escape(x) for x in cells(columns, r)) + " |" for r in data]
    return [head, rule, *body]


class MarkdownRenderer(Renderer):
    def render(self, c: Comparison, *, top: int = 10, full_names: bool = False,
               instances: bool = False, **_) -> str:
        lines = header_lines(c)
        out = [f"## nsyswrap compare: {escape(lines[0])}", "", escape(lines[1]), ""]
        out += [f"> **Warning:** {escape(n)}" for n in c.info.alerts]
        out += [f"> note: {escape(n)}" for n in c.info.notes if n not in c.info.alerts]
        attribution = attribution_line(c)
        if attribution:
            out += [f"> {escape(attribution)}"]
        findings = rows(c, "findings")
        out += ["", f"### Findings ({len(findings)})", ""]
        if findings:
            out += table_lines(FINDING_COLUMNS, findings)
            out += ["", "Suggestions:", ""]
            out += [f"- **{f['code']}** ({escape(', '.join(f['ranges']) or 'report')}): "
                    f"{escape(f['suggestion'])}" for f in findings]
        else:
            out.append(escape(no_findings_line(c)))
        timings = rows(c, "timings")
        if timings or c.analysis.user_timings:
            out += ["", f"### {TIMINGS_TITLE} (per call; trust the kernels)", ""]
            if timings:
                out += table_lines(TIMING_COLUMNS, timings) + [""]
            out += [f"- {escape(line)}" for line in timing_notes(c)]
        hint = event_records_hint(c)
        if hint:
            out += ["", f"> note: {escape(hint)}"]
        out += _lines(c, top)
        kernels = rows(c, "kernels")
        if kernels:
            out += ["", f"### GPU kernels (top {min(top, len(kernels))} of {len(kernels)})", ""]
            names = kernel_names(kernels, KERNEL_NAME_WIDTH, full_names)
            out += table_lines(kernel_columns(names), kernels[:top] if top else kernels)
        processes = rows(c, "processes")
        if len(processes) > 1:
            out += ["", "### Processes", ""]
            out += table_lines(PROCESS_COLUMNS, processes)
        benchmarks = rows(c, "benchmarks")
        if benchmarks:
            out += ["", "### Harness benchmarks (per call; trust the kernels)", ""]
            out += table_lines(BENCHMARK_COLUMNS, benchmarks)
        ranges, left_out = range_rows(c, every=instances)
        if ranges:
            out += ["", "### NVTX ranges", ""]
            out += table_lines(RANGE_COLUMNS, ranges)
        if left_out:
            out += ["", escape(left_out)]
        out += _summaries(c, top)
        return "\n".join(out) + "\n"


def _lines(c: Comparison, top: int) -> list[str]:
    """The By line table (views.line_section), or why there is none."""
    s = line_section(c, top)
    if s is None:
        return ["", f"> note: {escape(line_hint(c))}"]
    out = ["", f"### {escape(s.title)}", "", *table_lines(s.columns, s.rows)]
    return out + (["", escape(s.note)] if s.note else [])


def _summaries(c: Comparison, top: int) -> list[str]:
    """The call summaries and the program's marks (views.summary_sections), a table each."""
    out = []
    for s in summary_sections(c, top):
        out += ["", f"### {escape(s.title)}", "", *table_lines(s.columns, s.rows)]
        if s.note:
            out += ["", escape(s.note)]
    return out
