"""Where in the program's code each finding's time went: the lines its host was running
inside the windows or ranges the finding names (analysis/code_lines.py's trace), or, for a
finding about kernels (FP32_GEMM), the lines that launched them. Added to the evidence
(`lines`) and, the heaviest one, to the message. Not a check: it runs after them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..analysis.code_lines import THREAD_KEY_BITS, CodeLines
from ..analysis.result import Analysis
from ..common.units import fmt_ns, fmt_share
from .finding import Finding, range_label

# The lines a finding's evidence lists at most; the message names the first.
LINES_SHOWN = 3
# Findings about host time inside windows or ranges: the lines the host ran there.
# CACHE_EFFECT and UNCOVERED_STREAM: the line that ran in those windows is the one that
# launched their work.
HOST_CODES = frozenset({"LAUNCH_OVERHEAD", "HOST_WORK_IN_WINDOW", "TRANSFER_IN_WINDOW",
                        "SYNC_IN_WINDOW", "UNCOVERED_STREAM", "HOST_BOUND",
                        "GPU_IDLE_IN_RANGE", "SYNC_IN_RANGE", "TRANSFER_IN_RANGE",
                        "COLD_START", "CACHE_EFFECT"})
# Findings about kernels by name: the lines that launched them.
KERNEL_CODES = frozenset({"FP32_GEMM"})
TEXT_CHARS = 36


def with_lines(findings: list[Finding], a: Analysis) -> list[Finding]:
    """The findings, each naming the program's lines where the report has a trace of them."""
    lines = a.lines
    if lines.trace is None:
        return findings
    intervals = None  # every window and range instance, labelled: made once, if needed
    # The lines of each set of labels, found once: a place's findings (a sync and a
    # transfer in the same windows) name the same windows, half a million of them.
    host_found: dict[frozenset, pd.DataFrame | None] = {}
    out = []
    for f in findings:
        if f.code in HOST_CODES:
            if intervals is None:
                intervals = _labelled_intervals(a)
            labels = frozenset(f.ranges or ([f.range] if f.range else []))
            if labels not in host_found:
                host_found[labels] = _host_lines(labels, intervals, lines)
            found = host_found[labels]
        elif f.code in KERNEL_CODES:
            found = _kernel_lines(f, lines)
        else:
            found = None
        out.append(f if found is None or not len(found) else _named(f, found))
    return out


def _named(f: Finding, found: pd.DataFrame) -> Finding:
    top = found.head(LINES_SHOWN)
    measure = "host_ns" if "host_ns" in top else "kernel_ns"
    rows = [{"file": r.file, "line": int(r.line), "function": r.function, "text": r.text,
             measure: int(getattr(r, measure)), "share": float(r.share)}
            for r in top.itertuples()]
    first = rows[0]
    what = "its host time" if measure == "host_ns" else "that GPU time"
    text = first["text"].strip()
    text = text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…"
    file = first["file"].rsplit("/", 1)[-1]
    # A timed place's label names its file already: the line number alone reads.
    named = any(f"{file}:" in label for label in f.ranges)
    place = f"line {first['line']}" if named else f"{file}:{first['line']}"
    message = (f"{f.message.rstrip('.')}; {fmt_share(first['share'])} of {what} "
               f"({fmt_ns(first[measure])}) at {place}{f' `{text}`' if text else ''}")
    return dataclasses.replace(f, message=message, evidence={**f.evidence, "lines": rows})


def _labelled_intervals(a: Analysis) -> list[pd.DataFrame]:
    """The program's timed windows and the user's range instances as findings name them
    (label), with the thread (pid << 24 | tid) that recorded or opened each: a frame of
    each, the windows' labels kept categorical (as texts, half a million windows took
    40 MB more; joined with the ranges' labels, more again)."""
    parts = []
    windows = a.user_timings.intervals
    if len(windows) and "label" in windows:
        parts.append(pd.DataFrame({"label": windows["label"].array,
                                   "thread": windows["thread"].to_numpy("int64"),
                                   "start_ns": windows["start_ns"].to_numpy("int64"),
                                   "end_ns": windows["end_ns"].to_numpy("int64")}))
    ranges = a.user_instances(["domain", "name", "pid", "tid", "start_ns", "end_ns"])
    if len(ranges):
        parts.append(pd.DataFrame({
            "label": [range_label(d, n) for d, n in zip(ranges["domain"], ranges["name"],
                                                         strict=True)],
            "thread": (ranges["pid"].to_numpy("int64") << 24) | ranges["tid"].to_numpy("int64"),
            "start_ns": ranges["start_ns"].to_numpy("int64"),
            "end_ns": ranges["end_ns"].to_numpy("int64")}))
    return parts


def _host_lines(labels: frozenset, intervals: list[pd.DataFrame], lines: CodeLines
                ) -> pd.DataFrame | None:
    """The program's lines its threads ran inside the windows or ranges of `labels` (a
    finding's)."""
    if not labels:
        return None
    mine = [part[part["label"].isin(labels)] for part in intervals]

    def column(name: str) -> np.ndarray:
        return np.concatenate([m[name].to_numpy("int64") for m in mine] or [np.zeros(0, "int64")])

    thread, start, end = column("thread") & THREAD_KEY_BITS, column("start_ns"), column("end_ns")
    if not len(thread):
        return None
    per_where = np.zeros(len(lines.trace.wheres), "int64")
    for key in np.unique(thread):
        rows = thread == key
        per_where += lines.trace.host_time(int(key), start[rows], end[rows])
    found = lines.by_line({"host_ns": per_where}, "host_ns")
    return found[found["line"] > 0]


def _kernel_lines(f: Finding, lines: CodeLines) -> pd.DataFrame | None:
    names = f.evidence.get("kernels") or f.evidence.get("kernel_names")
    k = lines.kernel_lines
    if not names or not len(k):
        return None
    names = [n if isinstance(n, str) else n.get("name", "") for n in names]
    mine = k[k["name"].isin(names)]
    per_where = np.bincount(mine["where"].to_numpy("int64"),
                            weights=mine["kernel_ns"].to_numpy("float64"),
                            minlength=len(lines.trace.wheres)).astype("int64")
    found = lines.by_line({"kernel_ns": per_where}, "kernel_ns")
    return found[found["line"] > 0]
