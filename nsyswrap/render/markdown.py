"""Markdown, for pull-request comments and notebooks."""

from __future__ import annotations

from ..compare import Comparison
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
    rows,
)


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def _table(columns: list[Column], data: list[dict]) -> list[str]:
    head = "| " + " | ".join(_escape(c.long_header) for c in columns) + " |"
    rule = "|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|"
    body = ["| " + " | ".join(_escape(x) for x in cells(columns, r)) + " |" for r in data]
    return [head, rule, *body]


class MarkdownRenderer:
    def render(self, c: Comparison, *, top: int = 10, **_) -> str:
        lines = header_lines(c)
        out = [f"## nsyswrap compare: `{lines[0]}`", "", lines[1], ""]
        out += [f"> **Warning:** {_escape(n)}" for n in c.info.alerts]
        out += [f"> note: {_escape(n)}" for n in c.info.notes if n not in c.info.alerts]
        attribution = attribution_line(c)
        if attribution:
            out += [f"> {attribution}"]
        findings = rows(c, "findings")
        out += ["", f"### Findings ({len(findings)})", ""]
        if findings:
            out += _table(FINDING_COLUMNS, findings)
            out += ["", "Suggestions:", ""]
            out += [f"- **{f['code']}** ({f['range'] or 'report'}): {f['suggestion']}"
                    for f in findings]
        else:
            out.append("No findings.")
        kernels = rows(c, "kernels")
        if kernels:
            out += ["", f"### GPU kernels (top {min(top, len(kernels))} of {len(kernels)})", ""]
            out += _table(kernel_columns(80), kernels[:top] if top else kernels)
        processes = rows(c, "processes")
        if len(processes) > 1:
            out += ["", "### Processes", ""]
            out += _table(PROCESS_COLUMNS, processes)
        benchmarks = rows(c, "benchmarks")
        if benchmarks:
            out += ["", "### Harness benchmarks (per call; trust the kernels)", ""]
            out += _table(BENCHMARK_COLUMNS, benchmarks)
        ranges = rows(c, "ranges")
        if ranges:
            out += ["", "### NVTX ranges", ""]
            out += _table(RANGE_COLUMNS, ranges)
        return "\n".join(out) + "\n"
