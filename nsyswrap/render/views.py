"""What the human-readable formats (terminal table, Markdown) show: the columns of each
section and how each cell reads. The renderers only lay these out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..compare import Comparison
from ..diagnose import range_label
from ..units import fmt_ns, fmt_share
from .document import report_block, section_rows
from .names import shorten


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
    """'CPU: median CPU time · Busy: ...' for the columns whose header is short for more."""
    return " · ".join(f"{c.header}: {c.title}" for c in columns if c.title)


def _ns(key: str) -> Callable[[dict[str, Any]], str]:
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


def kernel_columns(name_width: int) -> list[Column]:
    return [
        Column("Kernel", lambda r: shorten(r["name"], name_width), numeric=False),
        Column("Count", lambda r: str(r["count"])),
        Column("Total", _ns("total_ns")),
        Column("Median", _ns("median_ns")),
        Column("Min", _ns("min_ns")),
        Column("Max", _ns("max_ns")),
        Column("Share", lambda r: fmt_share(r["share"])),
    ]


RANGE_COLUMNS = [
    Column("Range", lambda r: (f"[{r['pid']}] " if "pid" in r else "")
           + range_label(r["domain"] or "", r["name"]), numeric=False),
    Column("N", lambda r: str(r["count"]), title="instances"),
    Column("CPU", _ns("cpu_median_ns"), title="median CPU time"),
    Column("Busy", _ns("gpu_busy_median_ns"), title="median GPU busy time"),
    Column("Span", _ns("gpu_span_median_ns"), title="median GPU span"),
    Column("Idle", lambda r: fmt_share(r["gpu_idle_share_median"]),
           title="GPU idle share of the span"),
    Column("Ops", _ops_per_instance, title="GPU ops per instance"),
    Column("Lat", _ns("launch_latency_median_ns"), title="launch latency"),
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
    Column("Events", _ns("event_median_ns"), title="median CUDA-event time"),
    Column("Kernels", _ns("busy_median_ns"), title="median GPU busy time (trust this)"),
    Column("Diff", _difference, title="events against kernels"),
    Column("Verdict", lambda r: r["verdict"], numeric=False),
]

PROCESS_COLUMNS = [
    Column("PID", lambda r: str(r["pid"])),
    Column("Process", lambda r: r["name"], numeric=False),
    Column("GPUs", lambda r: ",".join(map(str, r["devices"])) or "–", numeric=False),
    Column("Kernels", lambda r: str(r["kernels"])),
    Column("Kernel time", _ns("kernel_ns")),
    Column("NVTX ranges", lambda r: str(r["nvtx_ranges"])),
]

def _finding_subject(r: dict[str, Any]) -> str:
    return ", ".join(r.get("ranges") or []) or r["range"] or "(report)"


FINDING_COLUMNS = [
    Column("Severity", lambda r: r["severity"], numeric=False),
    Column("Code", lambda r: r["code"], numeric=False),
    Column("Range", _finding_subject, numeric=False),
    Column("Finding", lambda r: _without_label(r["message"], _finding_subject(r)),
           numeric=False),
]


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


def cells(columns: list[Column], row: dict[str, Any]) -> list[str]:
    return [col.cell(row) for col in columns]

