"""What the human-readable formats (terminal table, Markdown) show: the columns of each
section and how each cell reads. The renderers only lay these out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..common.names import printable, short_names
from ..common.units import fmt_bytes, fmt_ns, fmt_share, plural
from ..comparison.document import (
    origin_ns,
    range_families,
    range_fields,
    records,
    report_block,
    section_rows,
    user_timings_block,
)
from ..comparison.result import Comparison
from ..diagnose import range_label


@dataclass(frozen=True)
class Column:
    header: str  # short, for terminals (80-120 columns)
    cell: Callable[[dict[str, Any]], str]
    numeric: bool = True
    title: str = ""  # what the header means, where there is room (Markdown) or in a legend

    @property
    def long_header(self) -> str:
        return self.title or self.header


def legend(columns: list[Column]) -> str:
    """'Wall: median wall time · Busy: ...' for the columns whose header is short for more."""
    return " · ".join(f"{c.header}: {c.title}" for c in columns if c.title)


def ns_cell(key: str) -> Callable[[dict[str, Any]], str]:
    """A Column's cell function: the row's `key`, a time in nanoseconds, as fmt_ns shows it."""
    return lambda r: fmt_ns(r.get(key))


def _without_label(message: str, label: str | None) -> str:
    """Messages start with their range's name for readers of JSON; a table has a column."""
    prefix = f"{label}: "
    return message[len(prefix):] if label and message.startswith(prefix) else message


def _copies(r: dict[str, Any]) -> str:
    if not r["copies"]:
        return "–"
    pageable = f" ({r['pageable_copies']} pageable)" if r["pageable_copies"] else ""
    return f"{r['copies']}{pageable}"


def _ops_per_instance(r: dict[str, Any]) -> str:
    return "–" if r["gpu_ops"] is None else f"{r['gpu_ops'] / r['count']:.3g}"


def kernel_names(rows: list[dict[str, Any]], width: int, full: bool = False,
                 cut: bool = True) -> dict[str, str]:
    """Each kernel's name as a table shows it: shortened within `width` (`cut`: cut where
    leaving out arguments is not enough), distinct kernels told apart
    (names.short_names); or (`full`) whole."""
    names = [r["name"] for r in rows]
    return {n: printable(n) for n in names} if full else short_names(names, width, cut)


def duration_numbers(count: str, key: str) -> list[Column]:
    """A count, then the durations' total, average, median, min, max, standard deviation
    and share, as nsys stats' summaries lay them out (StdDev: the sample standard
    deviation, as nsys computes it)."""
    return [
        Column(count, lambda r: str(r[key])),
        Column("Total", ns_cell("total_ns")),
        Column("Avg", ns_cell("mean_ns")),
        Column("Median", ns_cell("median_ns")),
        Column("Min", ns_cell("min_ns")),
        Column("Max", ns_cell("max_ns")),
        Column("StdDev", ns_cell("std_ns")),
        Column("Share", lambda r: fmt_share(r["share"])),
    ]


# As nsys's cuda_gpu_kern_sum.
KERNEL_NUMBERS = duration_numbers("Count", "count")


def kernel_columns(names: dict[str, str]) -> list[Column]:
    """The kernel table's columns, each kernel named as `names` has it (kernel_names)."""
    return [Column("Kernel", lambda r: names[r["name"]], numeric=False), *KERNEL_NUMBERS]


RANGE_COLUMNS = [
    Column("Range", lambda r: (f"[{r['pid']}] " if "pid" in r else "")
           + range_label(r["domain"] or "", r["name"]), numeric=False),
    Column("N", lambda r: str(r["count"]), title="instances"),
    Column("Wall", ns_cell("cpu_median_ns"), title="median wall time"),
    Column("Busy", ns_cell("gpu_busy_median_ns"), title="median GPU busy time"),
    Column("Span", ns_cell("gpu_span_median_ns"), title="median GPU span"),
    Column("Idle", lambda r: fmt_share(r["gpu_idle_share_median"]),
           title="GPU idle share of the span"),
    Column("Ops", _ops_per_instance, title="GPU ops per instance"),
    Column("Lat", ns_cell("launch_latency_median_ns"), title="launch latency"),
    Column("Syncs", lambda r: str(r["syncs"]) if r["syncs"] else "–"),
    Column("Copies", _copies),
]

def _mode(r: dict[str, Any]) -> str:
    parts = [{"all": "flushed", "none": "hot", "interleave": "flushed+hot"}.get(
        r["flush_l2"], str(r["flush_l2"]))]
    if not r["backpressure"]:
        parts.append("no BP")
    if r["cuda_graph"]:
        parts.append(f"graph x{r['cuda_graph']}")
    return ", ".join(parts)


def _difference(r: dict[str, Any]) -> str:
    busy, event = r["busy_median_ns"], r["event_median_ns"]
    if not busy:
        return "–"
    return f"{'+' if event >= busy else ''}{fmt_share((event - busy) / busy)}"


BENCHMARK_COLUMNS = [
    Column("Benchmark", lambda r: r["benchmark"], numeric=False),
    Column("N", lambda r: str(r["iterations"]), title="timed iterations"),
    Column("Mode", _mode, numeric=False),
    Column("Events", ns_cell("event_median_ns"), title="median CUDA-event time"),
    Column("Kernels", ns_cell("busy_median_ns"), title="median GPU busy time (trust this)"),
    Column("Diff", _difference, title="events against kernels"),
    Column("Verdict", lambda r: r["verdict"], numeric=False),
]

def _timing_difference(r: dict[str, Any]) -> str:
    """'+144%' where the program's figure reads more than the kernels, '-3.0%' less, '±1.2%'
    where the two differ by no more than their own spread (the larger IQR)."""
    value, kernels = r["value_median_ns"], r["kernels_median_ns"]
    if value is None or not kernels:
        return "–"
    share = (value - kernels) / kernels
    spread = max(r["value_iqr_ns"] or 0, r["kernels_iqr_ns"] or 0)
    if abs(value - kernels) <= spread:
        return f"±{fmt_share(abs(share))}"
    return f"{'+' if share >= 0 else '-'}{fmt_share(abs(share))}"


def timing_verdict(r: dict[str, Any]) -> str:
    """The group's verdict, with what do_bench returned against the same statistic of the
    kernels, and Timer's calls per measurement (its row is per call)."""
    if r["kind"] == "do_bench" and r["tool_value_ns"] is not None:
        stat = r["tool_statistic"] or "figure"
        return (f"do_bench said {fmt_ns(r['tool_value_ns'])} (its {stat}), the kernels' "
                f"{stat} {fmt_ns(r['tool_kernels_ns'])}: {r['verdict']}")
    if r["kind"] == "timer":
        return f"per call, {plural(r['calls'], 'call')} a measurement: {r['verdict']}"
    return r["verdict"]


_TIMING_NUMBERS = [
    Column("N", lambda r: str(r["instances"]), title="intervals (Timer: measurements)"),
    Column("Your timer", ns_cell("value_median_ns"),
           title="what your timer read (median per call)"),
    Column("Kernels", ns_cell("kernels_median_ns"),
           title="GPU work between the records (median per call; trust this)"),
    Column("Diff", _timing_difference,
           title="your timer against the kernels (± within their spread)"),
]
# The verdict last: the terminal puts it under the call site where it does not fit beside.
TIMING_COLUMNS = [Column("Where", lambda r: r["label"], numeric=False), *_TIMING_NUMBERS,
                  Column("Verdict", timing_verdict, numeric=False)]
TIMINGS_TITLE = "Your CUDA-event timings"


def timing_notes(c: Comparison) -> list[str]:
    """The lines under the timings table: groups whose first instances are cold, record
    sites never measured, elapsed_time() calls not reconciled, and what the hooks and the
    events cost."""
    block = user_timings_block(c)
    lines = []
    t = c.thresholds
    for g in block["groups"]:
        cold = _cold_values(g, t.cold_factor, t.cold_min_excess_ns, t.cold_min_instances)
        if cold:
            first = "instance" if len(cold) == 1 else f"{len(cold)} instances"
            lines.append(
                f"Cold start: {g['label']}: the first {first} read "
                f"{', '.join(fmt_ns(v) for v in cold)} against a median of "
                f"{fmt_ns(g['value_median_ns'])}: start-up work, not the steady state.")
    if block["unmeasured"]:
        lines.append("Recorded but never measured by elapsed_time(): " + ", ".join(
            f"{u['label']} ({plural(u['records'], 'record')})" for u in block["unmeasured"])
            + ".")
    if block["unreconciled"]:
        lines.append(_sentence("Not reconciled: " + "; ".join(
            f"{u['label']} ({u['count']}×): {_first_line(u['reason'])}"
            for u in block["unreconciled"])))
    costs = []
    if block["hook_cost_ns"] is not None and block["records"]:
        costs.append(f"the runner's hooks add {fmt_ns(block['hook_cost_ns'])} of host time "
                     "per record() on this host")
    floors = {(g["floor_ns"], g["floor_source"]) for g in block["groups"]
              if g["kind"] in ("events", "do_bench") and g["floor_ns"] is not None}
    if floors:
        costs.append("the events' own cost per window, taken off before blaming the host: "
                     + ", ".join(f"{fmt_ns(f)} ({FLOOR_SOURCES.get(s, s)})"
                                 for f, s in sorted(floors)))
    if costs:
        text = "; ".join(costs)
        lines.append(_sentence(text[0].upper() + text[1:]))
    return lines


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


FLOOR_SOURCES = {"measured": "measured by the runner",
                 "estimated": "estimated from back-pressured windows",
                 "assumed": "assumed: nothing in the report measures it"}


def _cold_values(g: dict[str, Any], factor: float, min_excess_ns: float,
                 min_instances: int) -> list[float]:
    """The leading values of `first_values_ns` far above the group's median (COLD_START's
    thresholds), per call."""
    median = g["value_median_ns"]
    if g["kind"] == "do_bench estimate" or g["instances"] < min_instances or median is None:
        return []
    out = []
    for v in g["first_values_ns"] or []:
        if v is None or not (v > factor * median and v - median >= min_excess_ns):
            break
        out.append(v)
    return out


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "no reason given"


def event_records_hint(c: Comparison) -> str | None:
    """For a report made without `nsyswrap run`'s records: how many CUDA event records it
    holds, and that `nsyswrap run` would reconcile them (not for the harness's own events,
    which its benchmarks reconcile)."""
    u = c.analysis.user_timings
    n = u.event_records_in_report
    if u or c.analysis.runs or not (n or (n is None and c.info.has_cuda)):
        return None
    held = "CUDA event records" if n is None else plural(n, "CUDA event record")
    return (f"This report holds {held} (cudaEventRecord); `nsyswrap run SCRIPT` reconciles "
            "the timings a program measures with them.")


PROCESS_COLUMNS = [
    Column("PID", lambda r: str(r["pid"])),
    Column("Process", lambda r: r["name"], numeric=False),
    Column("GPUs", lambda r: ",".join(map(str, r["devices"])) or "–", numeric=False),
    Column("Kernels", lambda r: str(r["kernels"])),
    Column("Kernel time", ns_cell("kernel_ns")),
    Column("NVTX ranges", lambda r: str(r["nvtx_ranges"])),
]

# A finding about more places than this names the first and counts the rest (JSON's
# `ranges` lists them all).
SUBJECT_NAMES = 1


def finding_subject(r: dict[str, Any]) -> str:
    """What a finding concerns: its ranges or benchmarks (the first, and how many more),
    else the report."""
    names = r.get("ranges") or []
    if len(names) > SUBJECT_NAMES:
        return f"{names[0]} and {len(names) - 1} more"
    return ", ".join(names) or r["range"] or "(report)"


def finding_message(r: dict[str, Any]) -> str:
    """A finding's message without its subject's name in front (shown beside it): a
    finding about several places starts with the first one's."""
    names = r.get("ranges") or []
    return _without_label(r["message"], names[0] if names else r["range"])


FINDING_COLUMNS = [
    Column("Severity", lambda r: r["severity"], numeric=False),
    Column("Code", lambda r: r["code"], numeric=False),
    Column("Range", finding_subject, numeric=False),
    Column("Finding", finding_message, numeric=False),
]


def no_findings_line(c: Comparison) -> str:
    """What to say where there are no findings: that nothing distorts the timings, or what
    this report lacks for the checks (a program that launched no GPU work, opened no NVTX
    range and timed nothing had nothing to check)."""
    rep = report_block(c)
    missing = []
    if not rep["counts"]["gpu_ops"] and not rep["counts"]["kernels"]:
        missing.append("no GPU work")
    if not rep["counts"]["nvtx_ranges"]:
        missing.append("no NVTX ranges")
    if c.benchmarks.empty and c.user_timings.empty:
        missing.append("no timings (harness benchmarks or CUDA-event timings)")
    if len(missing) == 3:
        return ("Nothing to analyse: this report holds no GPU work, no NVTX ranges and no "
                "timings.")
    if missing:
        return f"No findings at the current thresholds; not analysed: {', '.join(missing)}."
    return "No findings: nothing distorts these timings at the current thresholds."


def attribution_line(c: Comparison) -> str | None:
    """Once per output: whose GPU work the range numbers include, when that is not obvious."""
    rep = report_block(c)
    if rep["attribution"] == "thread":
        return ("attribution: thread (nsys's rule): a range owns only the GPU work launched on "
                "its own thread; PyTorch's backward kernels belong to autograd threads")
    threads = rep["other_threads"]
    if not threads:
        return None
    ops = sum(t["gpu_ops"] for t in threads)
    named = ", ".join(f"{t['name'] or 'tid ' + str(t['tid'])} {t['gpu_ops']}"
                      for t in threads[:3])
    more = f", +{len(threads) - 3} more" if len(threads) > 3 else ""
    return (f"attribution: ranges include GPU work other threads of their process launched "
            f"while they were open: {ops} GPU ops from {len(threads)} "
            f"thread{'s' if len(threads) > 1 else ''} ({named}{more}); "
            "--attribution thread for nsys's rule")


def header_lines(c: Comparison) -> list[str]:
    rep = report_block(c)
    gpus = ", ".join(g["name"] for g in rep["gpus"]) or "no GPU info"
    traced = ", ".join(k for k, v in rep["traced"].items() if v) or "nothing"
    counts = rep["counts"]
    lines = [
        f"{rep['source']}",
        f"nsys {rep['nsys_version'] or '?'} · {gpus} · traced: {traced} · "
        f"{counts['kernels']} kernels, {counts['gpu_ops']} GPU ops, "
        f"{counts['nvtx_ranges']} NVTX ranges · {fmt_ns(rep['duration_ns'])}",
    ]
    return lines


def rows(c: Comparison, section: str) -> list[dict[str, Any]]:
    return section_rows(c, section)


def range_rows(c: Comparison, every: bool = False) -> tuple[list[dict[str, Any]], str]:
    """The ranges section's rows as the text formats list them (document.range_families:
    the heaviest families, every one with `every`), and the line that says what the others
    add up to ("" where none was left out)."""
    frame, left_out = range_families(c, every)
    return records(frame, range_fields(c)), families_left_out(len(frame), left_out)


def families_left_out(shown: int, left_out: dict[str, Any] | None,
                      every: str = "--instances lists every one") -> str:
    """What a list of the `shown` heaviest range families says of the rest
    (document.range_families' `left_out`), and how to list every one."""
    if not left_out:
        return ""
    n, count = left_out["families"], left_out["count"]
    busy = left_out["gpu_busy_total_ns"]
    return (f"The {shown:,} range families with the most GPU busy time (then wall time) of "
            f"{shown + n:,}; the other {n:,} ({count:,} instance{'' if count == 1 else 's'}"
            + (f", {fmt_ns(busy)} of GPU busy time" if busy is not None else "")
            + f", {fmt_ns(left_out['cpu_total_ns'])} of wall time in all) are left out: "
            f"{every}.")


def cells(columns: list[Column], row: dict[str, Any]) -> list[str]:
    return [col.cell(row) for col in columns]


# The call summaries and the program's marks, after the other tables: as nsys stats'
# cuda_api_sum, osrt_sum and cuda_gpu_mem_time_sum / cuda_gpu_mem_size_sum lay them out.
CALL_NUMBERS = duration_numbers("Calls", "calls")
MEMORY_OP_NUMBERS = [
    *(c for c in KERNEL_NUMBERS if c.header != "StdDev"),
    Column("Bytes", lambda r: fmt_bytes(r["total_bytes"]), title="bytes in all"),
    Column("Size", lambda r: fmt_bytes(r["median_bytes"]), title="median size"),
    Column("Rate", lambda r: f"{fmt_bytes(r['throughput_bytes_per_s'])}/s"
           if r["throughput_bytes_per_s"] is not None else "–",
           title="throughput"),
]
# Rows each summary shows at most in a table (JSON and CSV hold every one).
MARKS_SHOWN = 20


@dataclass(frozen=True)
class SummarySection:
    """One table of the summaries: what the terminal and Markdown lay out, after the
    others. `optional`: groups of headers a narrow terminal may leave out."""

    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    note: str = ""  # under the table: the rows not shown and where they are
    optional: tuple[tuple[str, ...], ...] = ()


def _since(origin: int) -> Callable[[int], str]:
    """A session time as the time since the report's start ('1.23 s';
    document.origin_ns)."""
    return lambda t: fmt_ns(t - origin)


def _more(shown: int, total: int, what: str, section: str) -> str:
    if shown >= total:
        return ""
    return (f"{total - shown} more {what} in the JSON document and in CSV "
            f"(--section {section}).")


def _heaviest_calls(title: str, name: str, calls: list[dict], top: int) -> SummarySection:
    """A call summary's `top` heaviest rows (0: all), as nsys stats' *_sum reports."""
    shown = calls[:top] if top else calls
    return SummarySection(
        f"{title} (top {len(shown)} of {len(calls)} by total time)",
        [Column(name, lambda r: r["name"], numeric=False), *CALL_NUMBERS], shown,
        optional=(("StdDev",), ("Min", "Max")))


def line_cell(r: dict[str, Any]) -> str:
    """A line of the program as a table names it: file:line and its source (or function);
    the wheres that are no line (backward on autograd's thread, ...) by their label."""
    if not r["line"]:
        return printable(str(r["function"]))
    # The code without its inline comment ("  # ..."), cut to fit beside the numbers.
    what = (r["text"].split("  #", 1)[0].strip() if r["text"] else "") or r["function"]
    if len(what) > LINE_TEXT_CHARS:
        what = what[:LINE_TEXT_CHARS - 1] + "…"
    return printable(f"{str(r['file']).rsplit('/', 1)[-1]}:{r['line']}  {what}")


LINE_TEXT_CHARS = 40


LINE_COLUMNS = [
    Column("Line", line_cell, numeric=False, title="the program's line (file:line, source)"),
    Column("GPU", ns_cell("gpu_ns"), title="GPU time of the kernels and copies it launched"),
    Column("Kern", lambda r: str(r["kernels"]) if r["kernels"] else "–",
           title="kernels it launched"),
    Column("Copies", _copies),
    Column("Syncs", lambda r: f"{r['syncs']} ({fmt_ns(r['sync_ns'])})" if r["syncs"]
           else "–", title="blocking CUDA calls it made (time blocked)"),
    Column("Host", lambda r: fmt_ns(r["host_ns"]) if r["host_ns"] else "–",
           title="host time the line ran (with what it called)"),
    Column("Idle", ns_cell("idle_ns"), title="GPU idle while the host ran this line"),
]


def line_section(c: Comparison, top: int = 10) -> SummarySection | None:
    """The program's lines by GPU time (the `top` heaviest, 0: all, and any that caused
    more GPU idle than the least shown), or None where the report has no trace of them."""
    lines = rows(c, "lines")
    if not lines:
        return None
    shown = lines[:top] if top else lines
    return SummarySection(
        f"By line: GPU work, syncs and host time of the program's lines (top {len(shown)} "
        f"of {len(lines)} by GPU time)", LINE_COLUMNS, shown,
        note=_more(len(shown), len(lines), "lines", "lines"),
        optional=(("Idle",), ("Host",), ("Syncs",)))


def line_hint(c: Comparison) -> str | None:
    """Why there is no By line table, and how to get one; None where there is one."""
    return None if rows(c, "lines") else c.analysis.lines.why_empty


def summary_sections(c: Comparison, top: int = 10) -> list[SummarySection]:
    """The CUDA API calls (the `top` heaviest, 0: all), the slowest CUDA API calls, the
    copies and memsets, the OS runtime calls (the `top` heaviest) and the program's marks
    (the first MARKS_SHOWN), each where the report has any."""
    out = []
    at = _since(origin_ns(c))
    apis = rows(c, "cuda_api")
    if apis:
        out.append(_heaviest_calls("CUDA API calls", "CUDA API", apis, top))
        slowest = rows(c, "cuda_api_slowest")
        out.append(SummarySection(
            f"Slowest CUDA API calls ({len(slowest)})",
            [Column("CUDA API", lambda r: r["name"], numeric=False),
             Column("Duration", ns_cell("duration_ns")),
             Column("At", lambda r: at(r["start_ns"]), title="time since the report's start"),
             Column("Thread", lambda r: f"{r['pid']}/{r['tid']}"
                    + (f" {r['thread_name']}" if r["thread_name"] else ""), numeric=False)],
            slowest))
    memory = rows(c, "memory_ops")
    if memory:
        out.append(SummarySection(
            "GPU copies and memsets by kind", [
                Column("Operation", lambda r: r["operation"], numeric=False),
                *MEMORY_OP_NUMBERS], memory,
            optional=(("Min", "Max"), ("Avg",), ("Median",))))
    osrt = rows(c, "os_runtime")
    if osrt:
        out.append(_heaviest_calls("OS runtime calls", "OS call", osrt, top))
    marks = rows(c, "marks")
    if marks:
        shown = marks[:MARKS_SHOWN]
        out.append(SummarySection(
            f"NVTX marks ({len(marks)})",
            [Column("Mark", lambda r: r["text"], numeric=False),
             Column("At", lambda r: at(r["time_ns"]), title="time since the report's start"),
             Column("Thread", lambda r: f"{r['pid']}/{r['tid']}", numeric=False),
             Column("Domain", lambda r: r["domain"] or "(default)", numeric=False)],
            shown, note=_more(len(shown), len(marks), "marks", "marks")))
    return out
