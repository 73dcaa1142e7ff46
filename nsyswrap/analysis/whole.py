"""The analysis of a report loaded whole (loader.load): every GPU operation and every
(range, operation) pair held at once (ranges.attribute), so that html, trace and the
many-report summaries can draw them. The streamed analysis (streamed/engine.py) gives the
same Analysis without them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from .._memory import release_freed_memory
from ..report import Report
from .domains import library_mask
from .finish import Analysis, finished, with_families
from .kernels import durations_summary, kernel_durations
from .ranges import (
    GPU_OPS_KERNEL_INPUT,
    attribute,
    pooled_latency,
    process_summary,
    range_instances,
)


def analyze(report: Report, by_process: bool = False, attribution: str = "process",
            all_domains: bool = False, *, consume: bool = False) -> Analysis:
    """All analyses of one report. `attribution`: "process" (a range owns the GPU work
    other threads of its process launched while it was open) or "thread" (nsys's rule);
    `all_domains`: findings also cover libraries' NVTX ranges. `consume`: the caller has
    no further use for `report`, so its per-operation frames are emptied as soon as the
    attribution holds what is needed of them (one copy of the biggest tables, not two)."""
    # Whether each range is a library's: the attribution's process rule and the findings
    # both ask, once per distinct (domain, name).
    library = library_mask(report.ranges["domain"], report.ranges["name"])
    # The kernel table (a groupby, mostly without the GIL) on a second core while the
    # attribution runs. It reads a frame of its own: the report's two name columns and the
    # kernels' durations, kept until the table is done while `consume` drops the report's
    # columns. Columns that neither reads (process and correlation ids) go at once: at
    # 10 M kernels, every column that outlives its use is 80 MB on the attribution's peak.
    summary_input = kernel_durations(report.kernels)
    if consume:
        report.kernels = report.kernels[GPU_OPS_KERNEL_INPUT]
    with ThreadPoolExecutor(max_workers=1) as pool:
        kernels_done = pool.submit(durations_summary, summary_input, consume=True)
        del summary_input
        att = attribute(report, library, attribution, consume)
        kernels = kernels_done.result()
    size = len(att.gpu_ops) + len(att.op_pairs) + len(report.ranges)
    if consume:
        report.kernels = report.kernels.iloc[:0].copy()  # a slice would keep the buffers
        report.transfers = report.transfers.iloc[:0].copy()
        report.api_calls = report.api_calls.iloc[:0].copy()
        # The ranges' thread keys served the attribution's searches; the instances take
        # their other columns (76 MB at 10 M ranges).
        del report.ranges["thread"]
    release_freed_memory(size)
    # The per-process table (counts over the operations a step at a time: little memory)
    # on a second thread, in the gaps the instances' passes leave on the cores.
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The ranges' pids taken first: range_instances lets the report's ranges go.
        processes = pool.submit(process_summary, report, att, report.ranges["pid"])
        instances = range_instances(report, att, consume=consume)
        processes = processes.result()
    release_freed_memory(size)  # its pair-sized temporaries
    runs = with_families(instances, report.marks, library, notes=report.info.notes)
    return finished(report, instances, runs, kernels=kernels, attribution=att,
                    processes=processes, latency=pooled_latency(att), by_process=by_process,
                    all_domains=all_domains)
