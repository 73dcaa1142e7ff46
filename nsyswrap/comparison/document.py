"""The Comparison as plain rows and dicts: the JSON contract, and the rows every format in
render/ lays out. One place decides what each section holds. Below render/: the summaries
of many reports (multi/summary.py) keep each report's document too."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from .._version import __version__
from ..analysis.families import MAX_RANGE_FAMILIES, heaviest
from ..read.report import empty
from .result import SCHEMA, Comparison

KERNEL_FIELDS = ["name", "short_name", "count", "total_ns", "mean_ns", "median_ns", "min_ns",
                 "max_ns", "std_ns", "share"]
RANGE_FIELDS = ["name", "domain", "names", "library", "count", "processes", "cpu_total_ns",
                "cpu_median_ns", "cpu_min_ns",
                "cpu_max_ns", "gpu_busy_total_ns", "gpu_busy_median_ns", "gpu_busy_min_ns",
                "gpu_busy_max_ns", "gpu_busy_other_threads_median_ns",
                "gpu_span_median_ns", "gpu_idle_share_median", "gpu_ops",
                "kernels", "launch_latency_median_ns", "syncs", "sync_ns", "copies",
                "copy_bytes", "pageable_copies"]
INSTANCE_FIELDS = ["range_id", "name", "family", "domain", "index", "pid", "tid", "style",
                   "start_ns", "end_ns", "cpu_ns", "gpu_ops", "kernels", "gpu_busy_ns",
                   "gpu_busy_other_threads_ns", "gpu_span_ns",
                   "gpu_idle_ns", "gaps", "max_gap_ns", "launch_latency_ns", "syncs",
                   "sync_ns", "copies", "copy_bytes", "copy_ns", "pageable_copies"]
FINDING_FIELDS = ["code", "severity", "range", "message", "evidence", "suggestion"]
BENCHMARK_FIELDS = ["benchmark", "run", "iterations", "calls", "flush_l2", "backpressure",
                    "cuda_graph", "warmup_iters", "event_median_ns", "event_iqr_ns",
                    "busy_median_ns", "busy_iqr_ns", "span_median_ns", "overhead_median_ns",
                    "overhead_share", "floor_ns", "event_flushed_ns", "event_hot_ns",
                    "busy_flushed_ns", "busy_hot_ns", "trusted_ns", "verdict", "codes"]
ITERATION_FIELDS = ["benchmark", "run", "iteration", "cache", "calls", "range_id", "event_ns",
                    "gpu_busy_ns", "gpu_span_ns", "overhead_ns", "edge_ns", "internal_idle_ns",
                    "gaps", "max_gap_ns", "host_lead_ns", "gpu_ops", "kernels", "streams",
                    "syncs", "copies"]
PROCESS_FIELDS = ["pid", "name", "devices", "kernels", "kernel_ns", "gpu_ops", "nvtx_ranges"]
# What the report's calls add up to (summaries.py, report.CallSummaries): CUDA API calls and
# OS runtime calls per name, the slowest CUDA API calls, copies and memsets by kind; and
# the program's NVTX marks.
CALL_SUMMARY_FIELDS = ["name", "calls", "total_ns", "mean_ns", "median_ns", "min_ns",
                       "max_ns", "std_ns", "share"]
SLOWEST_CALL_FIELDS = ["name", "start_ns", "end_ns", "duration_ns", "pid", "tid",
                       "thread_name"]
MEMORY_OP_FIELDS = ["operation", "count", "total_ns", "mean_ns", "median_ns", "min_ns",
                    "max_ns", "std_ns", "share", "total_bytes", "mean_bytes", "median_bytes",
                    "min_bytes", "max_bytes", "std_bytes", "throughput_bytes_per_s"]
MARK_FIELDS = ["time_ns", "pid", "tid", "domain", "text"]
# The program's own timings (Comparison.user_timings): one row per call-site pair, per call.
TIMING_FIELDS = ["key", "label", "kind", "pid", "instances", "calls", "value_median_ns",
                 "value_iqr_ns", "kernels_median_ns", "kernels_iqr_ns", "difference_ns",
                 "difference_share", "floor_ns", "floor_source", "host_median_ns",
                 "lead_idle_median_ns", "tail_idle_median_ns", "prior_busy_median_ns",
                 "uncovered_median_ns", "sync_median_ns", "copy_median_ns",
                 "residual_median_ns", "first_values_ns", "tool_value_ns", "tool_statistic",
                 "tool_kernels_ns", "codes", "verdict"]
# One row per measured interval (analysis.user_timings.intervals), as the program measured it
# (a Timer measurement of many calls whole: divide by `calls`).
TIMING_INSTANCE_FIELDS = ["key", "label", "kind", "pid", "instance", "calls", "stream_id",
                          "start_ns", "end_ns", "value_ns", "gpu_busy_ns", "gpu_span_ns",
                          "gpu_first_start_ns", "gpu_last_end_ns", "predicted_ns",
                          "residual_ns", "host_between_records_ns", "lead_idle_ns",
                          "tail_idle_ns", "prior_busy_ns", "uncovered_busy_ns",
                          "uncovered_ops", "joined_ops", "internal_idle_ns", "gaps",
                          "max_gap_ns", "gpu_ops", "kernels", "streams", "syncs", "sync_ns",
                          "copies", "copy_bytes", "copy_ns", "pageable_copies",
                          "copies_before_bytes", "copies_before_gap_ns", "work"]
# The program's lines (analysis.code_lines): one row per line of its code that ran, issued
# GPU work or waited; `stack` the lines that called its heaviest use, innermost first.
LINE_FIELDS = ["file", "line", "function", "text", "stack", "host_ns", "gpu_ns", "kernels",
               "kernel_ns", "backward_kernels", "backward_ns", "copies", "copy_ns",
               "copy_bytes", "pageable_copies", "memsets", "syncs", "sync_ns", "idle_ns",
               "share"]
LINE_KERNEL_FIELDS = ["name", "file", "line", "function", "kernels", "kernel_ns"]


def plain(value: Any) -> Any:
    """numpy/pandas scalars to JSON-ready Python: NaN and infinities -> None (strict JSON
    has no such numbers), whole floats -> int."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if not math.isfinite(f):
            return None
        return int(f) if f.is_integer() and abs(f) < 2**53 else f
    if value is pd.NA or value is pd.NaT:
        return None
    return value


# Rows made into Python values, and written, this many at a time: ten million range
# instances as Python dicts at once would take tens of GB (docs/performance.md).
CHUNK_ROWS = 50_000


# What plain_column's values are: "int" (ints), "float" (ints, floats, None), "text" (str,
# None), "object" (anything plain gives: lists and dicts too). Writers lay each out at once.
def plain_column(values: pd.Series) -> tuple[list[Any], str]:
    """What `plain` makes of each value of a column (as `to_dict("records")` boxes them), a
    column at a time: numbers by numpy, texts and categories once per distinct value; and
    the kind of values it holds."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return values.to_numpy().tolist(), "int"
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        a = values.to_numpy(dtype="float64")
        out = a.astype(object)
        whole = np.isfinite(a) & (a == np.trunc(a)) & (np.abs(a) < 2**53)
        out[whole] = a[whole].astype("int64").astype(object)
        out[~np.isfinite(a)] = None
        return out.tolist(), "float"
    if isinstance(dtype, (pd.CategoricalDtype, pd.StringDtype)):
        # Texts (or NA): hashing cannot merge values that plain() would tell apart.
        codes, uniques = pd.factorize(values)
        lookup = np.array([plain(v) for v in np.asarray(uniques, dtype=object)] + [None],
                          dtype=object)
        kind = "text" if all(isinstance(v, str) for v in lookup[:-1]) else "object"
        return lookup[codes].tolist(), kind
    return [plain(v) for v in values.tolist()], "object"


def column_chunks(df: pd.DataFrame, fields: list[str], rows: int | None = None
                  ) -> Iterator[tuple[dict[str, list[Any]], dict[str, str]]]:
    """`df`'s `fields` as plain values (plain_column), `rows` (CHUNK_ROWS) rows at a time,
    with each column's kind. The default NVTX domain ("") has no name: None."""
    rows = rows or CHUNK_ROWS
    for lo in range(0, len(df), rows):
        part = df.iloc[lo:lo + rows]
        columns, kinds = {}, {}
        for f in fields:
            columns[f], kinds[f] = plain_column(part[f])
        if "domain" in columns:
            columns["domain"] = [None if d == "" else d for d in columns["domain"]]
        yield columns, kinds


def record_chunks(df: pd.DataFrame, fields: list[str], rows: int | None = None
                  ) -> Iterator[list[dict[str, Any]]]:
    """records(df, fields), `rows` at a time."""
    for columns, _ in column_chunks(df, fields, rows):
        yield [dict(zip(fields, row, strict=True))
               for row in zip(*columns.values(), strict=True)]


def records(df: pd.DataFrame, fields: list[str]) -> list[dict[str, Any]]:
    return [row for chunk in record_chunks(df, fields) for row in chunk]


# Range families listed at most (analysis/families.py): in the `ranges` section of json,
# csv, the terminal and Markdown, unless --instances asks for every one; the page shows
# fewer.
# What the `ranges_left_out` summary adds up over the families not listed.
LEFT_OUT_SUMS = ["count", "cpu_total_ns", "gpu_busy_total_ns", "gpu_ops", "kernels"]


def heaviest_families(ranges: pd.DataFrame, limit: int) -> np.ndarray:
    """Positions in `ranges` (range_summary's rows) of the `limit` heaviest families, in
    the frame's order: by GPU busy time in all (unknown as none), then wall time in all,
    equal ones in the frame's order. Every format that leaves families out keeps these."""
    return heaviest(ranges["gpu_busy_total_ns"].to_numpy(dtype="float64"),
                    ranges["cpu_total_ns"].to_numpy(dtype="float64"), limit)


def range_families(c: Comparison, every: bool = False
                   ) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """The user's range families as the `ranges` section lists them: the
    MAX_RANGE_FAMILIES heaviest (all with `every`), and what the others add up to
    (`families`: how many rows were left out, and LEFT_OUT_SUMS over them; None where none
    was)."""
    ranges = c.analysis.ranges[~c.analysis.ranges["harness"]]
    if every or len(ranges) <= MAX_RANGE_FAMILIES:
        return ranges, None
    kept = heaviest_families(ranges, MAX_RANGE_FAMILIES)
    rest = np.ones(len(ranges), dtype=bool)
    rest[kept] = False
    left = ranges.iloc[np.flatnonzero(rest)]
    # A sum of unknowns (no CUDA trace) is unknown: min_count=1 makes it NaN, then null.
    sums = {f: left[f].sum(min_count=1) for f in LEFT_OUT_SUMS}
    return ranges.iloc[kept], plain({"families": len(left), **sums})


def range_fields(c: Comparison) -> list[str]:
    """The ranges section's fields: with `pid` first where it is split by process."""
    return (["pid"] if "pid" in c.analysis.ranges else []) + RANGE_FIELDS


# Sections that are rows of a frame: (the frame, its fields) of a Comparison. `every_family`:
# the ranges section with every family (range_families).
def section_frame(c: Comparison, section: str, every_family: bool = False
                  ) -> tuple[pd.DataFrame, list[str]]:
    a = c.analysis
    if section == "kernels":
        return a.kernels, KERNEL_FIELDS
    if section == "ranges":
        return range_families(c, every_family)[0], range_fields(c)
    if section == "processes":
        return a.processes, PROCESS_FIELDS
    if section == "benchmarks":
        return c.benchmarks, BENCHMARK_FIELDS
    if section == "iterations":
        return a.iterations, ITERATION_FIELDS
    if section == "instances":
        return a.instances, INSTANCE_FIELDS
    if section == "timings":
        return _timing_groups(c), TIMING_FIELDS
    if section == "timing_instances":
        return _timing_instances(c), TIMING_INSTANCE_FIELDS
    calls = a.call_summaries
    if section == "cuda_api":
        return calls.cuda_api, CALL_SUMMARY_FIELDS
    if section == "cuda_api_slowest":
        return calls.slowest_api_calls, SLOWEST_CALL_FIELDS
    if section == "memory_ops":
        return calls.memory_ops, MEMORY_OP_FIELDS
    if section == "os_runtime":
        return calls.os_runtime, CALL_SUMMARY_FIELDS
    if section == "marks":
        return a.marks, MARK_FIELDS
    if section == "lines":
        return _line_rows(c), LINE_FIELDS
    if section == "line_kernels":
        return _line_kernels(c), LINE_KERNEL_FIELDS
    raise ValueError(f"unknown section {section!r}")


def _line_rows(c: Comparison) -> pd.DataFrame:
    lines = c.analysis.lines
    table = lines.table
    stacks = [[f"{file}:{line} {function}" for file, line, function in
               lines.stack(int(where))[1:]] for where in table["where"]]
    return table.assign(stack=stacks)


def _line_kernels(c: Comparison) -> pd.DataFrame:
    lines = c.analysis.lines
    k = lines.kernel_lines
    if lines.trace is None or not len(k):
        return empty(LINE_KERNEL_FIELDS, "object")
    wheres = lines.trace.wheres
    at = wheres.iloc[k["where"].to_numpy()]
    out = pd.DataFrame({"name": k["name"].to_numpy(), "file": at["file"].to_numpy(),
                        "line": at["line"].to_numpy(), "function": at["function"].to_numpy(),
                        "kernels": k["kernels"].to_numpy(), "kernel_ns": k["kernel_ns"].to_numpy()})
    out = out.groupby(["name", "file", "line", "function"], sort=False, as_index=False,
                      observed=True).sum()
    return out.sort_values(["kernel_ns", "name"], ascending=[False, True], kind="stable")


def lines_block(c: Comparison) -> dict[str, Any]:
    """Where in the program's code (analysis.code_lines): its lines, the kernels each
    launched, and, where there is no trace, why."""
    lines = c.analysis.lines
    return plain({
        "rows": section_rows(c, "lines"),
        "kernels": section_rows(c, "line_kernels"),
        "why_empty": lines.why_empty,
        "notes": list(lines.notes),
    })


def _timing_groups(c: Comparison) -> pd.DataFrame:
    g = c.user_timings
    if g.empty:  # a report without the runner's records: no columns at all
        return empty(TIMING_FIELDS, "float64")
    # Only do_bench's rows name a statistic.
    statistic = g["tool_statistic"].astype(object)
    return g.assign(tool_statistic=statistic.where(statistic != "", None))


def _timing_instances(c: Comparison) -> pd.DataFrame:
    i = c.analysis.user_timings.intervals
    if "iteration" not in i:
        return empty(TIMING_INSTANCE_FIELDS, "float64")
    return i.assign(instance=i["iteration"])


def section_chunks(c: Comparison, section: str, every_family: bool = False
                   ) -> Iterator[list[dict[str, Any]]]:
    """A section's rows, CHUNK_ROWS at a time (writers that stream: json, csv)."""
    if section == "findings":
        yield [plain(f.to_dict()) for f in c.findings]
        return
    yield from record_chunks(*section_frame(c, section, every_family))


def section_rows(c: Comparison, section: str, every_family: bool = False
                 ) -> list[dict[str, Any]]:
    return [row for chunk in section_chunks(c, section, every_family) for row in chunk]


def report_block(c: Comparison) -> dict[str, Any]:
    info = c.info
    a = c.analysis
    return plain({
        "path": str(info.path),
        "source": str(info.source),
        "nsys_version": info.nsys_version,
        "schema_version": info.schema_version,
        "duration_ns": info.duration_ns,
        "gpus": [
            {"device_id": g.device_id, "name": g.name, "sm_count": g.sm_count,
             "l2_bytes": g.l2_bytes, "compute_capability": g.compute_capability,
             "max_clock_mhz": g.max_clock_mhz}
            for g in info.gpus
        ],
        "processes": [{"pid": pid, "name": name} for pid, name in sorted(info.processes.items())],
        "traced": {"cuda": info.has_cuda, "nvtx": info.has_nvtx, "osrt": info.has_osrt,
                   "gpu_metrics": info.has_gpu_metrics},
        "gpu_trace_lost": info.gpu_trace_lost,
        "attribution": a.attribution.rule,
        "other_threads": other_thread_rows(c),
        "counts": {
            "kernels": int(a.kernels["count"].sum()) if not a.kernels.empty else 0,
            "gpu_ops": a.attribution.operations,
            "nvtx_ranges": len(a.instances),
        },
        "notes": list(info.notes),
    })


def other_thread_rows(c: Comparison) -> list[dict[str, Any]]:
    """The threads whose GPU work went to ranges open on other threads (process rule),
    busiest first: pid, tid, name, gpu_ops."""
    info = c.info
    rows = []
    for r in c.analysis.attribution.other_threads.itertuples():
        rows.append({"pid": (r.thread >> 24) & 0xFFFFFF, "tid": r.thread & 0xFFFFFF,
                     "name": info.threads.get(int(r.thread), ""), "gpu_ops": int(r.gpu_ops)})
    return sorted(rows, key=lambda r: -r["gpu_ops"])


def origin_ns(c: Comparison) -> int:
    """Where times shown from the report's start count from: its start, or its first event
    where that came earlier (nsys 2022.4 dates a CPU capture's session after its events),
    so that no time shown is negative. The instances and the marks are in start order."""
    a = c.analysis
    starts = [c.info.start_ns]
    if len(a.instances):
        starts.append(a.instances.values("start_ns", slice(0, 1))[0])
    if len(a.marks):
        starts.append(a.marks["time_ns"].iloc[0])
    for frame, column in ((a.attribution.blocking_calls, "start_ns"),
                          (a.attribution.gpu_ops, "start_ns"),
                          (a.call_summaries.slowest_api_calls, "start_ns")):
        if len(frame):
            starts.append(frame[column].min())
    ops = a.attribution.gpu_ops
    launches = ops["launch_start_ns"].to_numpy() if len(ops) else np.zeros(0, "int64")
    if (launches >= 0).any():
        starts.append(launches[launches >= 0].min())
    return int(min((int(s) for s in starts if s is not None), default=0))


def refuse_without_pairs(c: Comparison, what: str) -> None:
    """Formats that draw every GPU operation (a page's timeline, a trace) need every
    operation and (range, operation) pair, which an analysis keeps only where asked: say
    so rather than draw none."""
    if not c.analysis.attribution.pairs_kept:
        raise ValueError(f"{what} draws every GPU operation, which this analysis did not "
                         "keep: compare the report with operations=True")


def user_timings_block(c: Comparison) -> dict[str, Any]:
    """What `nsyswrap run` recorded of the program's own timing code: its groups (the
    `timings` section) and what could not be reconciled. Present for every report:
    `records` 0 and no groups where the runner recorded nothing."""
    u = c.analysis.user_timings
    return plain({
        "records": u.records,
        "measured": u.measured,
        "hook_cost_ns": u.hook_cost_ns,
        "groups": section_rows(c, "timings"),
        "unmeasured": records(u.unmeasured, ["pid", "label", "records"])
        if len(u.unmeasured) else [],
        "unreconciled": records(u.unreconciled, ["pid", "label", "reason", "count"])
        if len(u.unreconciled) else [],
        "notes": list(u.notes),
        "event_records_in_report": u.event_records_in_report,
    })


def document(c: Comparison, every_family: bool = False) -> dict[str, Any]:
    """The JSON contract `nsyswrap.compare/1` (see docs/json.md): the ranges section with
    the MAX_RANGE_FAMILIES heaviest families, and `ranges_left_out` where there were more,
    unless `every_family` (--instances) lists them all."""
    ranges, left_out = range_families(c, every_family)
    return {
        "schema": SCHEMA,
        "tool": {"name": "nsyswrap", "version": __version__},
        "report": report_block(c),
        "thresholds": plain(c.thresholds.to_dict()),
        "kernels": section_rows(c, "kernels"),
        "ranges": records(ranges, range_fields(c)),
        **({"ranges_left_out": left_out} if left_out else {}),
        "benchmarks": section_rows(c, "benchmarks"),
        "processes": section_rows(c, "processes"),
        "findings": section_rows(c, "findings"),
        "user_timings": user_timings_block(c),
        "lines": lines_block(c),
        "cuda_api": {"apis": section_rows(c, "cuda_api"),
                     "slowest_calls": section_rows(c, "cuda_api_slowest")},
        "memory_ops": section_rows(c, "memory_ops"),
        "os_runtime": section_rows(c, "os_runtime"),
        "marks": section_rows(c, "marks"),
    }
